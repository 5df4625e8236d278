package snapshot

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// damageFixture seals three checkpoints of a workspace: one (the target a
// test damages), two (undamaged, every file other than one's) and three
// (the position: a/ changed again, b/ removed, c/ added). a/f07.txt in one
// is 8 KiB of random hex, so a pack stores it whole, never as a delta. The
// seals are git's whatever the store's engine (the tests damage loose
// objects git wrote); engine is the restores'.
func damageFixture(t *testing.T, engine string) (dir string, st *Store, one, two, three ckpt.Record) {
	t.Helper()
	dir, st = newTestStore(t, Options{Engine: engine})
	files := func(gen string) map[string]string {
		m := map[string]string{"keep.txt": "kept the same throughout\n"}
		for i := range 30 {
			m[fmt.Sprintf("a/f%02d.txt", i)] = fmt.Sprintf("%s %02d\n", gen, i)
		}
		for i := range 20 {
			m[fmt.Sprintf("b/g%02d.txt", i)] = fmt.Sprintf("b %s %02d\n", gen, i)
		}
		return m
	}
	m := files("one")
	var rnd [4096]byte
	_, _ = rand.Read(rnd[:])
	m["a/f07.txt"] = hex.EncodeToString(rnd[:])
	writeTree(t, dir, m)
	one = mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, Label: "one", engine: EngineGit})
	writeTree(t, dir, files("two"))
	two = mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, Label: "two", engine: EngineGit})
	m = files("three")
	for p := range m {
		if strings.HasPrefix(p, "b/") {
			delete(m, p)
		}
	}
	removeAll(t, dir, "b")
	for i := range 5 {
		m[fmt.Sprintf("c/new%d.txt", i)] = "new\n"
	}
	writeTree(t, dir, m)
	three = mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, Label: "three", engine: EngineGit})
	return dir, st, one, two, three
}

// looseObject is the file of a loose object; the test fails if it is not loose.
func looseObject(t *testing.T, st *Store, sha string) string {
	t.Helper()
	p := filepath.Join(st.GitDir(), "objects", sha[:2], sha[2:])
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("object %s is not loose: %v", sha, err)
	}
	return p
}

// refusedUntouched restores to target and requires a refusal naming want
// ("type path sha problem-prefix"), with the work tree, the ledger and the
// store's branches as they were. A dry run is refused the same way.
func refusedUntouched(t *testing.T, dir string, st *Store, target ckpt.Record, req ckpt.Request, want ...string) *ckpt.TargetDamagedError {
	t.Helper()
	ctx := context.Background()
	before := hashDir(t, dir)
	recs := len(st.Records())
	branches := string(gitOut(t, st, nil, "for-each-ref", "--format=%(refname) %(objectname)"))
	var dmg *ckpt.TargetDamagedError
	for _, dry := range []bool{false, true} {
		r := req
		r.Target, r.Label, r.DryRun = target.SHA, target.ID, dry
		res, err := st.Restore(ctx, r)
		if hashDir(t, dir) != before {
			t.Fatalf("the restore (dry %v) of a damaged %s changed the work tree (%v)", dry, target.ID, err)
		}
		if !errors.As(err, &dmg) {
			t.Fatalf("restore (dry %v) of a damaged %s: %v, want a TargetDamagedError", dry, target.ID, err)
		}
		var got []string
		for _, l := range dmg.Lost {
			got = append(got, l.Type+" "+l.Path+" "+l.SHA+" "+l.Problem)
		}
		if len(got) != len(want) {
			t.Fatalf("lost %q, want %q", got, want)
		}
		for i := range want {
			if !strings.HasPrefix(got[i], want[i]) {
				t.Errorf("lost %q, want %q", got[i], want[i])
			}
		}
		for _, w := range want {
			if f := strings.Fields(w); len(f) > 2 && !strings.Contains(err.Error(), f[2]) {
				t.Errorf("the error does not name %s: %v", f[2], err)
			}
		}
		if res.PreRestore != nil || dmg.PreRestore != "" {
			t.Errorf("a pre-restore checkpoint was sealed before the refusal: %+v", res.PreRestore)
		}
		if n := len(st.Records()); n != recs {
			t.Errorf("the refused restore (dry %v) added %d ledger records: %+v", dry, n-recs, st.Records()[recs:])
		}
		if now := string(gitOut(t, st, nil, "for-each-ref", "--format=%(refname) %(objectname)")); now != branches {
			t.Errorf("the refused restore moved refs:\n%s\nwas\n%s", now, branches)
		}
	}
	return dmg
}

// restoreClean restores to target and requires it to succeed and verify.
func restoreClean(t *testing.T, dir string, st *Store, target ckpt.Record) {
	t.Helper()
	res, err := st.Restore(context.Background(), ckpt.Request{Target: target.SHA, Label: target.ID})
	if err != nil {
		t.Fatalf("restore to undamaged %s: %v", target.ID, err)
	}
	if len(res.Diff) != 0 || len(res.Write) == 0 || res.PreRestore == nil {
		t.Fatalf("restore to %s: %+v", target.ID, res)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "a/f03.txt")); string(got) != "two 03\n" {
		t.Errorf("a/f03.txt = %q after the restore to two", got)
	}
}

// TestRestoreRefusesDamagedTarget: a restore whose target the store cannot
// give back whole (a blob or a tree missing, a loose object or a pack
// damaged) is refused with the list of what is lost before anything is
// sealed, written or deleted; a restore to an undamaged checkpoint of the
// same store still works.
func TestRestoreRefusesDamagedTarget(t *testing.T) {
	for _, eng := range []string{EngineGit, EngineInproc} {
		t.Run(eng, func(t *testing.T) { restoreRefusesDamagedTarget(t, eng) })
	}
}

func restoreRefusesDamagedTarget(t *testing.T, eng string) {
	t.Run("missing loose blob", func(t *testing.T) {
		dir, st, one, two, _ := damageFixture(t, eng)
		blob := lsTree(t, st, one.SHA)["a/f07.txt"].sha
		if err := os.Remove(looseObject(t, st, blob)); err != nil {
			t.Fatal(err)
		}
		refusedUntouched(t, dir, st, one, ckpt.Request{}, "blob a/f07.txt "+blob+" missing")
		// Only the paths asked for count: b/ needs nothing lost.
		if _, err := st.Restore(context.Background(), ckpt.Request{Target: one.SHA, Paths: []string{"b"}, DryRun: true}); err != nil {
			t.Errorf("a dry restore of b/ alone: %v", err)
		}
		refusedUntouched(t, dir, st, one, ckpt.Request{Paths: []string{"a/f07.txt"}}, "blob a/f07.txt "+blob+" missing")
		restoreClean(t, dir, st, two)
	})
	t.Run("missing loose tree", func(t *testing.T) {
		dir, st, one, two, _ := damageFixture(t, eng)
		tree := strings.TrimSpace(string(gitOut(t, st, nil, "rev-parse", one.SHA+":b")))
		if err := os.Remove(looseObject(t, st, tree)); err != nil {
			t.Fatal(err)
		}
		refusedUntouched(t, dir, st, one, ckpt.Request{}, "tree b "+tree+" missing")
		restoreClean(t, dir, st, two)
	})
	t.Run("truncated loose blob", func(t *testing.T) {
		dir, st, one, two, _ := damageFixture(t, eng)
		blob := lsTree(t, st, one.SHA)["a/f07.txt"].sha
		p := looseObject(t, st, blob)
		fi, _ := os.Stat(p)
		_ = os.Chmod(p, 0o644)
		if err := os.Truncate(p, fi.Size()/2); err != nil {
			t.Fatal(err)
		}
		refusedUntouched(t, dir, st, one, ckpt.Request{}, "blob a/f07.txt "+blob+" unreadable")
		restoreClean(t, dir, st, two)
	})
	t.Run("corrupt pack", func(t *testing.T) {
		dir, st, one, two, _ := damageFixture(t, eng)
		blob := lsTree(t, st, one.SHA)["a/f07.txt"].sha
		damagePack(t, st, blob)
		types, err := st.objectTypes(context.Background(), []string{blob})
		if err != nil || types[blob] != "blob" {
			t.Fatalf("batch-check of the damaged blob: %v %v (the test wants it found)", types, err)
		}
		refusedUntouched(t, dir, st, one, ckpt.Request{}, "blob a/f07.txt "+blob+" unreadable")
		restoreClean(t, dir, st, two)
	})
	t.Run("truncated pack", func(t *testing.T) {
		dir, st, one, _, _ := damageFixture(t, eng)
		blob := lsTree(t, st, one.SHA)["a/f07.txt"].sha
		pack, _ := packOffset(t, st, blob)
		fi, _ := os.Stat(pack)
		_ = os.Chmod(pack, 0o644)
		if err := os.Truncate(pack, fi.Size()/2); err != nil {
			t.Fatal(err)
		}
		before := hashDir(t, dir)
		recs := len(st.Records())
		_, err := st.Restore(context.Background(), ckpt.Request{Target: one.SHA, Label: one.ID})
		var dmg *ckpt.TargetDamagedError
		if !errors.As(err, &dmg) || len(dmg.Lost) == 0 {
			t.Fatalf("restore from a truncated pack: %v, want a TargetDamagedError", err)
		}
		t.Logf("refused: %v", err)
		if hashDir(t, dir) != before {
			t.Fatalf("the refused restore changed the work tree: %v", err)
		}
		if n := len(st.Records()); n != recs {
			t.Errorf("the refused restore added %d ledger records (%v)", n-recs, err)
		}
	})
	t.Run("blob of a file changed since the last seal", func(t *testing.T) {
		// keep.txt is the same in one and three, so only the plan, once the
		// pre-restore checkpoint holds the edit, knows it is to be written.
		dir, st, one, _, three := damageFixture(t, eng)
		blob := lsTree(t, st, one.SHA)["keep.txt"].sha
		if lsTree(t, st, three.SHA)["keep.txt"].sha != blob {
			t.Fatal("keep.txt changed between one and three")
		}
		if err := os.Remove(looseObject(t, st, blob)); err != nil {
			t.Fatal(err)
		}
		writeFile(t, dir, "keep.txt", "edited after the last seal\n", 0o644)
		// Told what changed (a watcher's dirty set), the check reads it
		// before anything is sealed.
		refusedUntouched(t, dir, st, one, ckpt.Request{Changed: []string{"keep.txt"}}, "blob keep.txt "+blob+" missing")
		// Not told, it is found after the pre-restore checkpoint, which is
		// whole, and before any file is written.
		before := hashDir(t, dir)
		res, err := st.Restore(context.Background(), ckpt.Request{Target: one.SHA, Label: one.ID})
		var dmg *ckpt.TargetDamagedError
		if !errors.As(err, &dmg) || len(dmg.Lost) != 1 || dmg.Lost[0].Path != "keep.txt" || dmg.Lost[0].SHA != blob {
			t.Fatalf("restore: %v, want keep.txt's blob lost", err)
		}
		if hashDir(t, dir) != before {
			t.Fatal("the refused restore changed the work tree")
		}
		pre := res.PreRestore
		if pre == nil || pre.State != ckpt.StateOK || dmg.PreRestore != pre.ID {
			t.Fatalf("pre-restore %+v, error names %q", pre, dmg.PreRestore)
		}
		if got := readBlobs(t, st, []string{lsTree(t, st, pre.SHA)["keep.txt"].sha}); len(got) != 1 {
			t.Errorf("the pre-restore checkpoint does not hold the edit")
		}
	})
}

// packOffset repacks the store into one pack and finds sha's offset in it.
// damagePack overwrites bytes in the middle of blob's deflated data in its
// pack: git still finds the object and its size, and cannot inflate it.
func damagePack(t *testing.T, st *Store, blob string) {
	t.Helper()
	pack, off := packOffset(t, st, blob)
	f, err := os.OpenFile(pack, os.O_RDWR, 0)
	if err != nil {
		_ = os.Chmod(pack, 0o644)
		if f, err = os.OpenFile(pack, os.O_RDWR, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.WriteAt([]byte("cairn was here, damaging a pack"), off+1000); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

func packOffset(t *testing.T, st *Store, sha string) (string, int64) {
	t.Helper()
	gitOut(t, st, nil, "repack", "-a", "-d", "-q")
	gitOut(t, st, nil, "prune-packed")
	idxs, _ := filepath.Glob(filepath.Join(st.GitDir(), "objects", "pack", "*.idx"))
	for _, idx := range idxs {
		f, err := os.Open(idx)
		if err != nil {
			t.Fatal(err)
		}
		out := string(gitOut(t, st, f, "show-index"))
		f.Close()
		for _, l := range strings.Split(out, "\n") {
			if fs := strings.Fields(l); len(fs) >= 2 && fs[1] == sha {
				off, _ := strconv.ParseInt(fs[0], 10, 64)
				return strings.TrimSuffix(idx, ".idx") + ".pack", off
			}
		}
	}
	t.Fatalf("no pack holds %s", sha)
	return "", 0
}

// TestReadBlobsCountsEveryObject: the streaming reader takes a whole batch,
// empty blobs and blobs split across writes included, and names a missing one.
func TestReadBlobsCountsEveryObject(t *testing.T) {
	dir, st := newTestStore(t, Options{Engine: EngineGit})
	m := map[string]string{"empty.txt": ""}
	for i := range 50 {
		m["f"+strconv.Itoa(i)] = strings.Repeat("x", i*997)
	}
	writeTree(t, dir, m)
	rec := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
	tc := &targetCheck{files: map[string]treeFile{}, read: map[string]bool{}}
	var shas []string
	for p, e := range lsTree(t, st, rec.SHA) {
		tc.files[p] = treeFile{e.mode, e.sha}
		shas = append(shas, e.sha)
	}
	gone := lsTree(t, st, rec.SHA)["f3"].sha
	if err := os.Remove(looseObject(t, st, gone)); err != nil {
		t.Fatal(err)
	}
	lost, err := st.readBlobs(context.Background(), tc, shas)
	if err != nil {
		t.Fatal(err)
	}
	if len(lost) != 1 || lost[0].SHA != gone || lost[0].Path != "f3" || lost[0].Problem != "missing" {
		t.Errorf("lost %+v, want f3's blob missing", lost)
	}
	slices.Sort(shas)
	if n := len(slices.Compact(shas)); len(tc.read) != n-1 {
		t.Errorf("read %d blobs, want %d", len(tc.read), n-1)
	}
}
