package gitobj_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/snapshot"
	"github.com/cairn-dev/cairn/snapshot/gitobj"
)

// Known finds objects in packs (version 1 and 2 indexes, as git writes
// them) and loose, and says when one it had found is gone: a pack removed
// or rewritten by a repack, a loose object pruned.
func TestKnownSeesRemovals(t *testing.T) {
	for _, format := range []string{"sha1", "sha256"} {
		t.Run(format, func(t *testing.T) {
			ctx := context.Background()
			g, gitDir := newRepo(t, format)
			f, _ := gitobj.FormatByName(format)
			db := gitobj.NewDB(gitDir, f)
			b := db.Batch()
			packed, _ := b.Write("blob", []byte("in a pack"))
			if _, err := b.Flush(); err != nil {
				t.Fatal(err)
			}
			loose, err := db.Write("blob", []byte("loose"))
			if err != nil {
				t.Fatal(err)
			}
			absent := f.Hash("blob", []byte("never written"))
			k := db.Known()
			k.Refresh()
			for id, want := range map[string]bool{packed: true, loose: true, absent: false, "zz": false} {
				if got := k.Has(id); got != want {
					t.Errorf("Has(%s) = %v, want %v", id, got, want)
				}
			}
			if k.Refresh() {
				t.Error("Refresh reports a loss with nothing changed")
			}
			// A prune of the loose object.
			if err := os.Remove(db.Path(loose)); err != nil {
				t.Fatal(err)
			}
			if !k.Refresh() || k.Has(loose) {
				t.Error("a removed loose object was not noticed")
			}
			// git repacks everything into a new pack (a version 1 index
			// here) and removes the old one: the objects are still known,
			// and the loss of the old pack is said once.
			if _, err := g.Run(ctx, nil, "update-ref", "refs/keep", packed); err != nil {
				t.Fatal(err)
			}
			if _, err := g.Run(ctx, nil, "-c", "pack.indexVersion=1", "repack", "-a", "-d", "-q"); err != nil {
				t.Fatal(err)
			}
			if !k.Refresh() {
				t.Error("the repack's removed pack was not noticed")
			}
			if !k.Has(packed) {
				t.Error("an object git repacked (version 1 index) is not found")
			}
			packs, _ := filepath.Glob(filepath.Join(gitDir, "objects", "pack", "*"))
			for _, p := range packs {
				if strings.HasSuffix(p, ".idx") || strings.HasSuffix(p, ".pack") {
					os.Remove(p)
				}
			}
			if !k.Refresh() || k.Has(packed) {
				t.Error("a removed pack's object is still found")
			}
		})
	}
}

// A repack beside a seal moves a loose object into a pack written after the
// last Refresh: Has still finds it (it reads the pack folder again on a
// miss, as git does), instead of calling it missing.
func TestKnownFindsObjectMovedIntoNewPack(t *testing.T) {
	g, gitDir := newRepo(t, "sha1")
	f, _ := gitobj.FormatByName("sha1")
	db := gitobj.NewDB(gitDir, f)
	loose, err := db.Write("blob", []byte("loose, then packed"))
	if err != nil {
		t.Fatal(err)
	}
	k := db.Known()
	k.Refresh()
	packLoose(t, g, loose)
	if _, err := os.Stat(db.Path(loose)); err == nil {
		t.Fatal("the loose file is still there")
	}
	if !k.Has(loose) {
		t.Fatal("an object moved from a loose file into a new pack reads as missing")
	}
}

// A Witness holds while what it names is stored: a pack added beside it or
// a loose object packed since changes nothing; a pack it names removed or
// rewritten, or a loose object it names removed, makes it fail. And Has
// finds every object of several packs, by each first byte, and no other.
func TestKnownWitness(t *testing.T) {
	for _, format := range []string{"sha1", "sha256"} {
		t.Run(format, func(t *testing.T) {
			ctx := context.Background()
			g, gitDir := newRepo(t, format)
			f, _ := gitobj.FormatByName(format)
			db := gitobj.NewDB(gitDir, f)
			var packed []string
			for p := range 3 { // packs of 1, 10 and 100 objects: the big one searched first
				b := db.Batch()
				for i := range []int{1, 10, 100}[p] {
					id, _ := b.Write("blob", fmt.Appendf(nil, "pack %d object %d", p, i))
					packed = append(packed, id)
				}
				if _, err := b.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			loose, err := db.Write("blob", []byte("loose"))
			if err != nil {
				t.Fatal(err)
			}
			k := db.Known()
			k.Refresh()
			for _, id := range append(packed, loose) {
				if !k.Has(id) {
					t.Fatalf("Has(%s) = false for a stored object", id)
				}
			}
			for i := range 300 {
				if id := f.Hash("blob", fmt.Appendf(nil, "absent %d", i)); k.Has(id) {
					t.Fatalf("Has(%s) = true for an object never written", id)
				}
			}
			w, ok := k.Witness(10)
			if !ok || len(w.Packs) != 3 || len(w.Loose) != 1 || w.Loose[0] != loose {
				t.Fatalf("Witness = %+v, %v; want 3 packs and the loose object", w, ok)
			}
			if _, ok := k.Witness(0); ok {
				t.Error("a witness naming more loose objects than allowed was given")
			}
			fresh := func() *gitobj.Known {
				k := db.Known()
				k.Refresh()
				return k
			}
			if !fresh().Holds(w) {
				t.Fatal("a witness of an unchanged store does not hold")
			}
			// A name that is not a pack folder's file is never taken.
			w3 := gitobj.Witness{Packs: []gitobj.WitnessPack{w.Packs[0]}}
			w3.Packs[0].Name = "../pack/" + w3.Packs[0].Name
			if fresh().Holds(w3) {
				t.Error("a witness naming a path outside the pack folder holds")
			}
			// A pack added, the loose object packed and its file removed:
			// everything is still stored.
			b := db.Batch()
			b.Write("blob", []byte("another pack"))
			if _, err := b.Flush(); err != nil {
				t.Fatal(err)
			}
			packLoose(t, g, loose)
			if !fresh().Holds(w) {
				t.Fatal("a witness does not hold after a pack was added and a loose object packed")
			}
			// A loose object it names removed (written again, then removed).
			w2 := w
			w2.Loose = []string{f.Hash("blob", []byte("gone"))}
			if fresh().Holds(w2) {
				t.Error("a witness naming a loose object the store lacks holds")
			}
			// A pack it names rewritten under its name, then removed.
			idx := filepath.Join(gitDir, "objects", "pack", w.Packs[0].Name)
			later := time.Now().Add(time.Hour)
			if err := os.Chtimes(idx, later, later); err != nil {
				t.Fatal(err)
			}
			if fresh().Holds(w) {
				t.Error("a witness holds though a pack index it names changed")
			}
			if _, err := g.Run(ctx, nil, "repack", "-a", "-d", "-q"); err != nil {
				t.Fatal(err)
			}
			if fresh().Holds(w) {
				t.Error("a witness holds though the packs it names were removed")
			}
		})
	}
}

// packLoose has git pack the loose object id (kept by a ref) into a new
// pack and remove its loose file, as maintenance does.
func packLoose(t *testing.T, g *snapshot.Git, id string) {
	t.Helper()
	ctx := context.Background()
	for _, args := range [][]string{{"update-ref", "refs/keep", id}, {"repack", "-q"}, {"prune-packed", "-q"}} {
		if _, err := g.Run(ctx, nil, args...); err != nil {
			t.Fatal(err)
		}
	}
}
