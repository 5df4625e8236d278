package snapshot

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// TestSealOnDamagedParentMovesNoRef: a git-engine seal whose parent's trees
// cannot all be read (another program deleted one) fails before its ref
// moves, so no ref names a checkpoint the ledger records as failed. Then,
// with a checkpoint's commit gone as well and a ref the ledger lacks, a new
// store still opens (its recovery of the ledger is skipped, said in the
// log), as it does when only the ref's own commit is gone.
func TestSealOnDamagedParentMovesNoRef(t *testing.T) {
	ctx := context.Background()
	dir, opts := t.TempDir(), Options{Engine: EngineGit, StateDir: t.TempDir()}
	st := openTestStore(t, dir, opts)
	writeTree(t, dir, map[string]string{"a.txt": "a\n", "sub/b.txt": "b\n"})
	one := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
	sub := gitStr(t, st, "rev-parse", one.SHA+":sub")
	if err := os.Remove(filepath.Join(st.GitDir(), "objects", sub[:2], sub[2:])); err != nil {
		t.Fatal(err) // loose: the git engine wrote it
	}
	writeFile(t, dir, "sub/b.txt", "b2\n", 0o644)
	rec, err := st.Seal(ctx, SealRequest{Kind: ckpt.KindManual})
	if err == nil && rec.State != ckpt.StateFailed {
		t.Fatalf("sealed %s %s on a parent whose tree %s is gone", rec.ID, rec.State, sub)
	}
	ref := "refs/cairn/manual/" + rec.ID
	if tip, ok := st.Resolve(ctx, ref); ok {
		t.Fatalf("the failed seal %s left %s at %s", rec.ID, ref, tip)
	}

	// A checkpoint the ledger lacks (its record lost: its ref is read back
	// from git, walking every checkpoint's message) while an older
	// checkpoint's commit is gone.
	dir2, opts2 := t.TempDir(), Options{Engine: EngineGit, StateDir: t.TempDir()}
	st2 := openTestStore(t, dir2, opts2)
	writeFile(t, dir2, "a.txt", "a\n", 0o644)
	first := mustSeal(t, st2, SealRequest{Kind: ckpt.KindManual})
	writeFile(t, dir2, "b.txt", "b\n", 0o644)
	mustSeal(t, st2, SealRequest{Kind: ckpt.KindManual})
	if err := st2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(st2.GitDir(), "objects", first.SHA[:2], first.SHA[2:])); err != nil {
		t.Fatal(err)
	}
	ledger, err := os.ReadFile(st2.LedgerPath())
	if err != nil {
		t.Fatal(err)
	}
	last := bytes.LastIndexByte(ledger[:len(ledger)-1], '\n')
	if err := os.WriteFile(st2.LedgerPath(), ledger[:last+1], 0o644); err != nil {
		t.Fatal(err)
	}
	st3, err := Open(ctx, dir2, Options{Layout: LayoutPlain, Engine: EngineGit, StateDir: opts2.StateDir})
	if err != nil {
		t.Fatalf("a store whose history names a deleted commit does not open: %v", err)
	}
	// The skipped recovery is said where cairn status shows it (a note).
	if notes := st3.TakeNotes(); !slices.ContainsFunc(notes, func(n string) bool { return strings.Contains(n, "store damaged") }) {
		t.Errorf("notes after opening a damaged store: %q, want one saying the recovery was skipped", notes)
	}
	st3.Close()
}
