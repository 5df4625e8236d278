//go:build cairnfault

package snapshot

// These tests set hooks only a build with -tags cairnfault has (hooks_on.go);
// without the tag, TestHooksUnderFaultTag runs them in such a build.

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// A ref another writer moved is not overwritten by the in-process engine:
// the seal fails, recorded failed, and the ref keeps the other value.
func TestInprocRefCompareAndSwap(t *testing.T) {
	dir, st := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{"a.txt": "a"})
	req := SealRequest{Kind: ckpt.KindCompleted, CodonID: "c", CodonName: "c", RunID: "cas", Changed: []string{"a.txt"}}
	first := mustSeal(t, st, req)
	writeFile(t, dir, "a.txt", "b", 0o644)
	other := gitStr(t, st, "commit-tree", "-m", "other writer", treeOf(t, st, first.SHA))
	hookBeforeUpdateRef = func() { gitStr(t, st, "update-ref", "refs/heads/run-cas", other) }
	defer func() { hookBeforeUpdateRef = nil }()
	rec, err := st.Seal(context.Background(), req)
	if err == nil || rec.State != ckpt.StateFailed || !strings.Contains(err.Error(), "moved while sealing") {
		t.Fatalf("seal over a moved ref: %+v, %v", rec, err)
	}
	if st.lastEngine != EngineInproc {
		t.Fatalf("sealed by %s", st.lastEngine)
	}
	if got := gitStr(t, st, "rev-parse", "refs/heads/run-cas"); got != other {
		t.Fatalf("ref holds %s, want the other writer's %s", got, other)
	}
	if _, err := os.Stat(filepath.Join(st.gitDir, "refs", "heads", "run-cas.lock")); err == nil {
		t.Fatal("the ref lock was left behind")
	}
}

// TestForeignRefMoveNotOverwritten: a ref moved by a writer that is not this
// seal is never overwritten; the seal fails, recorded as failed.
func TestForeignRefMoveNotOverwritten(t *testing.T) {
	ctx := context.Background()
	exec := hankweaveWorkspace(t)
	st, err := Open(ctx, exec, Options{})
	if err != nil {
		t.Fatal(err)
	}
	req := SealRequest{Kind: ckpt.KindCompleted, CodonID: "a", CodonName: "A", RunID: "1-abcde"}
	if _, err := st.Seal(ctx, req); err != nil {
		t.Fatal(err)
	}
	// Another writer (the runtime, say) moves the branch between cairn's read and its update.
	main := gitStr(t, st, "rev-parse", "main")
	moved := false
	hookBeforeUpdateRef = func() {
		if !moved {
			gitStr(t, st, "update-ref", "refs/heads/run-1-abcde", main)
			moved = true
		}
	}
	defer func() { hookBeforeUpdateRef = nil }()
	rec, err := st.Seal(ctx, req)
	if err == nil || rec.State != ckpt.StateFailed || !strings.Contains(rec.Error, "not overwritten") {
		t.Fatalf("seal over a moved ref: %+v, %v", rec, err)
	}
	if got := gitStr(t, st, "rev-parse", "refs/heads/run-1-abcde"); got != main {
		t.Errorf("foreign ref value overwritten: %s", got)
	}
	last := st.Records()[len(st.Records())-1]
	if last.ID != rec.ID || last.State != ckpt.StateFailed {
		t.Errorf("failed seal not in the ledger: %+v", last)
	}
}

// A restore that stopped after writing the work tree leaves cairn's index
// describing the work tree as it was: the next seal told what changed (here,
// nothing) reconciles the whole tree, and holds what is on disk.
func TestSealAfterRestoreStoppedPartWay(t *testing.T) {
	for _, eng := range []string{EngineInproc, EngineGit} {
		t.Run(eng, func(t *testing.T) {
			dir, st := newTestStore(t, Options{Engine: eng})
			writeTree(t, dir, map[string]string{"a.txt": "one\n", "b.txt": "b\n"})
			one := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
			writeFile(t, dir, "a.txt", "two\n", 0o644)
			mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
			hookRestoreApplied = func() error { return errors.New("stopped by the test") }
			_, err := st.Restore(context.Background(), ckpt.Request{Target: one.SHA})
			hookRestoreApplied = nil
			if err == nil || !strings.Contains(err.Error(), "stopped by the test") {
				t.Fatalf("restore: %v", err)
			}
			if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "one\n" {
				t.Fatalf("the restore wrote %q", b)
			}
			rec := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, Changed: []string{}})
			if got, want := treeOf(t, st, rec.SHA), treeOf(t, st, one.SHA); got != want {
				t.Fatalf("the seal after the stopped restore holds %s, want the work tree's %s", got, want)
			}
		})
	}
}
