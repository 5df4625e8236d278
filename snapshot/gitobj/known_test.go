package gitobj_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
	ctx := context.Background()
	g, gitDir := newRepo(t, "sha1")
	f, _ := gitobj.FormatByName("sha1")
	db := gitobj.NewDB(gitDir, f)
	loose, err := db.Write("blob", []byte("loose, then packed"))
	if err != nil {
		t.Fatal(err)
	}
	k := db.Known()
	k.Refresh()
	if _, err := g.Run(ctx, nil, "update-ref", "refs/keep", loose); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Run(ctx, nil, "repack", "-q"); err != nil { // packs the loose object
		t.Fatal(err)
	}
	if _, err := g.Run(ctx, nil, "prune-packed", "-q"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(db.Path(loose)); err == nil {
		t.Fatal("the loose file is still there")
	}
	if !k.Has(loose) {
		t.Fatal("an object moved from a loose file into a new pack reads as missing")
	}
}
