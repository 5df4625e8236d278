package gitobj_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/snapshot/gitobj"
)

// deltaObjects writes, loose, many versions of a few files (each a small
// edit of the one before, so git packs them as deltas), a tree per version
// and a blob too large to delta, and returns every id with its type and
// content.
func deltaObjects(t *testing.T, db *gitobj.DB, f gitobj.Format) map[string]string {
	t.Helper()
	r := rand.New(rand.NewPCG(7, 7))
	want := map[string]string{}
	write := func(typ string, data []byte) string {
		id, err := db.Write(typ, data)
		if err != nil {
			t.Fatal(err)
		}
		want[id] = typ + "\x00" + string(data)
		return id
	}
	files := make([][]string, 12)
	for i := range files {
		for j := range 200 {
			files[i] = append(files[i], fmt.Sprintf("file %d line %d: %x", i, j, r.Uint64()))
		}
	}
	for v := range 25 {
		var ents []gitobj.TreeEntry
		for i := range files {
			// An edit, an insertion and a deletion somewhere in the file.
			ls := files[i]
			ls[r.IntN(len(ls))] = fmt.Sprintf("edited in version %d: %x", v, r.Uint64())
			k := r.IntN(len(ls))
			ls = append(ls[:k], append([]string{fmt.Sprintf("inserted %d", v)}, ls[k:]...)...)
			k = r.IntN(len(ls))
			ls = append(ls[:k], ls[k+1:]...)
			files[i] = ls
			id := write("blob", []byte(strings.Join(ls, "\n")+"\n"))
			ents = append(ents, gitobj.TreeEntry{Mode: gitobj.ModeFile, Name: fmt.Sprintf("f%02d.txt", i), ID: id})
		}
		body, err := gitobj.EncodeTree(ents, f)
		if err != nil {
			t.Fatal(err)
		}
		write("tree", body)
	}
	big := make([]byte, 300<<10)
	for i := range big {
		big[i] = byte(r.Uint32())
	}
	write("blob", big)
	write("blob", nil)
	return want
}

// TestReadPackedMatchesGit: every object of packs git wrote with deltas by
// offset and by id, in both object formats, reads back in-process as git
// stored it; an object in no pack is ErrNotFound; damaged bytes anywhere in
// a pack give an error or the right object, never other bytes or a panic.
// The delta bases ReadPacked keeps are used throughout the first pass.
func TestReadPackedMatchesGit(t *testing.T) {
	for _, format := range []string{"sha1", "sha256"} {
		for _, ofs := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/ofs-delta=%v", format, ofs), func(t *testing.T) {
				ctx := context.Background()
				g, gitDir := newRepo(t, format)
				f, _ := gitobj.FormatByName(format)
				db := gitobj.NewDB(gitDir, f)
				want := deltaObjects(t, db, f)
				var ids bytes.Buffer
				for id := range want {
					fmt.Fprintln(&ids, id)
				}
				args := []string{"pack-objects", "-q", "--window=50", "--depth=50"}
				if ofs {
					args = append(args, "--delta-base-offset")
				}
				out, err := g.Run(ctx, &ids, append(args, filepath.Join(gitDir, "objects", "pack", "pack"))...)
				if err != nil {
					t.Fatal(err)
				}
				packName := strings.TrimSpace(string(out))
				// Loose copies gone: only the pack answers.
				for id := range want {
					if err := os.Remove(db.Path(id)); err != nil {
						t.Fatal(err)
					}
				}
				v, err := g.Run(ctx, nil, "verify-pack", "-v", filepath.Join(gitDir, "objects", "pack", "pack-"+packName+".idx"))
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(string(v), "chain length = ") {
					t.Fatalf("git made no deltas:\n%s", v)
				}
				k := db.Known()
				k.Refresh()
				check := func(damaged bool) {
					t.Helper()
					for id, w := range want {
						typ, data, err := k.ReadPacked(id)
						switch {
						case err != nil && !damaged:
							t.Fatalf("ReadPacked(%s): %v", id, err)
						case err == nil && typ+"\x00"+string(data) != w:
							t.Fatalf("ReadPacked(%s) = %s of %d bytes, not what was written", id, typ, len(data))
						}
					}
				}
				check(false)
				absent := f.Hash("blob", []byte("never written"))
				if _, _, err := k.ReadPacked(absent); err != gitobj.ErrNotFound {
					t.Errorf("ReadPacked(absent) = %v, want ErrNotFound", err)
				}

				pack := filepath.Join(gitDir, "objects", "pack", "pack-"+packName+".pack")
				good, err := os.ReadFile(pack)
				if err != nil {
					t.Fatal(err)
				}
				r := rand.New(rand.NewPCG(1, 2))
				for range 40 {
					bad := bytes.Clone(good)
					for range 1 + r.IntN(4) {
						bad[12+r.IntN(len(bad)-12)] ^= byte(1 + r.IntN(255))
					}
					if err := os.WriteFile(pack, bad, 0o644); err != nil {
						t.Fatal(err)
					}
					k = db.Known() // no delta base kept from the pack as it was
					k.Refresh()
					check(true)
				}
			})
		}
	}
}

// openPacks lists the files under dir this process has open.
func openPacks(t *testing.T, dir string) []string {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	var open []string
	for _, fd := range fds {
		if p, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && strings.HasPrefix(p, dir) {
			open = append(open, p)
		}
	}
	return open
}

// ReadPacked keeps the packs it read open for a run of reads: a pack a
// repack removed is closed at the next Refresh (its space is freed, and
// its objects are read from where they went), and Release closes the rest.
func TestReadPackedClosesPacks(t *testing.T) {
	ctx := context.Background()
	g, gitDir := newRepo(t, "sha1")
	f, _ := gitobj.FormatByName("sha1")
	db := gitobj.NewDB(gitDir, f)
	want := deltaObjects(t, db, f)
	var ids []string
	for id := range want {
		ids = append(ids, id)
	}
	if _, err := g.Run(ctx, strings.NewReader(strings.Join(ids, "\n")+"\n"), "pack-objects", "-q", filepath.Join(gitDir, "objects", "pack", "pack")); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if err := os.Remove(db.Path(id)); err != nil {
			t.Fatal(err)
		}
	}
	k := db.Known()
	k.Refresh()
	readAll := func() {
		t.Helper()
		for id, w := range want {
			typ, data, err := k.ReadPacked(id)
			if err != nil || typ+"\x00"+string(data) != w {
				t.Fatalf("ReadPacked(%s): %v", id, err)
			}
		}
	}
	readAll()
	packs := filepath.Join(gitDir, "objects", "pack")
	if open := openPacks(t, packs); len(open) != 1 {
		t.Fatalf("open under the pack folder after reads: %q, want the one pack", open)
	}
	// git repacks into a new pack and removes the old one.
	var refs strings.Builder
	for _, id := range ids {
		fmt.Fprintf(&refs, "create refs/keep/%s %s\n", id, id)
	}
	if _, err := g.Run(ctx, strings.NewReader(refs.String()), "update-ref", "--stdin"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Run(ctx, nil, "repack", "-a", "-d", "-q", "-f"); err != nil {
		t.Fatal(err)
	}
	if !k.Refresh() {
		t.Fatal("the repack's removed pack was not noticed")
	}
	if open := openPacks(t, packs); len(open) != 0 {
		t.Fatalf("still open after the pack was removed: %q", open)
	}
	readAll()
	k.Release()
	if open := openPacks(t, packs); len(open) != 0 {
		t.Fatalf("still open after Release: %q", open)
	}
}
