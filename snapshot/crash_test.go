package snapshot

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/restore/ckpt"
	"github.com/cairn-dev/cairn/snapshot/gitobj"
)

// buildFaultSeal builds testdata/faultseal, a program that seals one
// checkpoint, with the fault points compiled in: plain `go test` builds this
// package without them, and the shipped binary must never have them.
func buildFaultSeal(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "faultseal")
	// go test puts its own go first in PATH.
	if out, err := exec.Command("go", "build", "-tags", "cairnfault", "-o", bin, "./testdata/faultseal").CombinedOutput(); err != nil {
		t.Fatalf("building the fault-point binary: %v\n%s", err, out)
	}
	return bin
}

// inprocChanged is what the crash tests' edits touch, as a watcher reports them.
var inprocChanged = []string{"a.txt", "b", "b/c.txt"}

func putFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func gitStr(t *testing.T, st *Store, args ...string) string {
	t.Helper()
	out, err := st.git.Run(context.Background(), nil, args...)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// TestCrashAtEveryStep kills a seal after each pipeline step and checks that
// the store stays sound, the ref moved completely or not at all, and the
// ledger agrees with the refs after the next open.
func TestCrashAtEveryStep(t *testing.T) {
	child := buildFaultSeal(t)
	steps := []struct {
		step    string
		changed []string // the child's incremental set: the in-process engine
		moved   bool     // the ref holds the new checkpoint after the crash
		full    bool     // a full reconcile by the in-process engine (changed nil)
	}{
		{"stage", nil, false, false}, {"write-tree", nil, false, false}, {"commit-tree", nil, false, false},
		{"update-ref", nil, true, false}, {"position", nil, true, false}, {"ledger", nil, true, false},
		{"blob-written", inprocChanged, false, false}, {"tree-written", inprocChanged, false, false},
		{"commit-written", inprocChanged, false, false}, {"pack-written", inprocChanged, false, false}, {"packs-merged", inprocChanged, false, false}, {"ref-locked", inprocChanged, false, false},
		{"ref-renamed", inprocChanged, true, false}, {"update-ref", inprocChanged, true, false}, {"position", inprocChanged, true, false},
		{"ledger", inprocChanged, true, false},
		{"blob-written", nil, false, true}, {"tree-written", nil, false, true}, {"commit-written", nil, false, true},
		{"pack-written", nil, false, true}, {"ref-locked", nil, false, true}, {"ref-renamed", nil, true, true},
		{"update-ref", nil, true, true}, {"ledger", nil, true, true},
	}
	for _, sc := range steps {
		step := sc.step
		name := step
		switch {
		case sc.changed != nil:
			name = "inproc-" + step
		case sc.full:
			name = "inproc-full-" + step
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			ws, state := t.TempDir(), t.TempDir()
			putFile(t, filepath.Join(ws, "a.txt"), "one\n")
			st, err := Open(ctx, ws, Options{Layout: LayoutPlain, StateDir: state, Engine: EngineInproc})
			if err != nil {
				t.Fatal(err)
			}
			first, err := st.Seal(ctx, SealRequest{Kind: ckpt.KindBaseline})
			if err != nil {
				t.Fatal(err)
			}
			putFile(t, filepath.Join(ws, "a.txt"), "two\n")
			putFile(t, filepath.Join(ws, "b/c.txt"), "new\n")
			if sc.changed != nil {
				// One pack short of a roll-up: the child's seal merges.
				db := gitobj.NewDB(st.GitDir(), gitobj.SHA1)
				for i := range rollUpEvery - 1 {
					b := db.Batch()
					if _, err := b.Write("blob", []byte(fmt.Sprintf("an earlier seal's blob %d\n", i))); err != nil {
						t.Fatal(err)
					}
					if _, err := b.Flush(); err != nil {
						t.Fatal(err)
					}
				}
			}

			cmd := exec.Command(child, append([]string{ws, state}, sc.changed...)...)
			cmd.Env = append(os.Environ(), FaultEnv+"="+step)
			if sc.changed == nil && !sc.full {
				cmd.Env = append(cmd.Env, "FAULTSEAL_ENGINE="+EngineGit)
			}
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != FaultExitCode {
				t.Fatalf("child: want exit %d at %s, got %v: %s", FaultExitCode, step, err, out)
			}

			if fsck, err := st.git.Run(ctx, nil, "fsck", "--no-progress", "--no-dangling"); err != nil {
				t.Fatalf("git fsck after crash at %s: %v\n%s", step, err, fsck)
			}
			st2, err := Open(ctx, ws, Options{Layout: LayoutPlain, StateDir: state, Engine: EngineInproc})
			if err != nil {
				t.Fatal(err)
			}
			recs := st2.Records()
			tip, moved := st2.resolve(ctx, "refs/cairn/manual/c2")
			movedWant := sc.moved
			if moved != movedWant {
				t.Fatalf("crash after %s: ref moved=%v, want %v", step, moved, movedWant)
			}
			if moved {
				if len(recs) != 2 || recs[1].ID != "c2" || recs[1].SHA != tip {
					t.Fatalf("ledger does not agree with refs after crash at %s: %+v", step, recs)
				}
				if step != "ledger" && !recs[1].Recovered {
					t.Errorf("record c2 should be marked recovered: %+v", recs[1])
				}
				if got := gitStr(t, st2, "show", tip+":a.txt"); got != "two" {
					t.Errorf("recovered checkpoint holds a.txt=%q", got)
				}
				if step == "position" || step == "ledger" {
					if got := st2.Position(); got != tip {
						t.Errorf("position %s after a crash at %s, want the new checkpoint %s", got, step, tip)
					}
				}
			} else if len(recs) != 1 || recs[0].SHA != first.SHA {
				t.Fatalf("ledger after crash at %s: %+v", step, recs)
			}
			// The next seal works and takes a fresh id: incremental (by the
			// in-process engine when the child was), then a full reconcile
			// that must find the same tree (the index and the engine agree).
			rec, err := st2.Seal(ctx, SealRequest{Kind: ckpt.KindManual, Changed: sc.changed})
			if err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprintf("c%d", len(recs)+1); rec.ID != want {
				t.Errorf("next id %s, want %s", rec.ID, want)
			}
			if got := gitStr(t, st2, "show", rec.SHA+":b/c.txt"); got != "new" {
				t.Errorf("next checkpoint holds b/c.txt=%q", got)
			}
			if got := gitStr(t, st2, "show", rec.SHA+":a.txt"); got != "two" {
				t.Errorf("next checkpoint holds a.txt=%q", got)
			}
			full := mustSeal(t, st2, SealRequest{Kind: ckpt.KindManual})
			if a, b := treeOf(t, st2, rec.SHA), treeOf(t, st2, full.SHA); a != b {
				t.Errorf("a full reconcile after the crash found tree %s, the seal after it %s", b, a)
			}
			if fsck, err := st2.git.Run(ctx, nil, "fsck", "--no-progress", "--no-dangling"); err != nil {
				t.Fatalf("git fsck at the end: %v\n%s", err, fsck)
			}
		})
	}
}
