//go:build linux

package agent_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// TestEngineFromConfig runs the real daemon with each engine named in its
// config file and checks, through the ledger and the store, that the
// autosaves after the baseline are sealed by that engine and hold exactly
// what `git add -A` makes of the same folder; then, after a restart (the
// in-process engine's stat cache read back from disk), once more.
func TestEngineFromConfig(t *testing.T) {
	for _, engine := range []string{"inproc", "git"} {
		t.Run(engine, func(t *testing.T) {
			dir := t.TempDir()
			write(t, filepath.Join(dir, "README.md"), "hello\n")
			write(t, filepath.Join(dir, "src", "a", "main.go"), "package main\n")
			write(t, filepath.Join(dir, "src", "a", "old.go"), "package old\n")
			write(t, filepath.Join(dir, "tool.sh"), "#!/bin/sh\n")
			write(t, filepath.Join(dir, ".gitignore"), "*.log\n")
			cfg := configFile(t, fastAutosave+fmt.Sprintf("engine = %q\n", engine))
			state := t.TempDir()
			d := startDaemon(t, state, "--watch", dir, "--config", cfg)
			waitRecord(t, dir, state, "the baseline", func(r ckpt.Record) bool { return r.Kind == ckpt.KindBaseline })
			ws, ok := d.workspace(dir)
			if !ok {
				t.Fatal("workspace not in status")
			}

			edits := []func(){
				func() {
					write(t, filepath.Join(dir, "src", "a", "main.go"), "package main\n\nfunc main() {}\n")
					write(t, filepath.Join(dir, "src", "b", "c", "new file é.txt"), "new\n")
					write(t, filepath.Join(dir, "debug.log"), "ignored\n")
					if err := os.Remove(filepath.Join(dir, "src", "a", "old.go")); err != nil {
						t.Fatal(err)
					}
					if err := os.Chmod(filepath.Join(dir, "tool.sh"), 0o755); err != nil {
						t.Fatal(err)
					}
				},
				func() {
					write(t, filepath.Join(dir, "README.md"), "hello again\n")
					if err := os.RemoveAll(filepath.Join(dir, "src", "b")); err != nil {
						t.Fatal(err)
					}
					write(t, filepath.Join(dir, "src", "b"), "a file where a folder was\n")
				},
			}
			seen := len(ledger(t, dir, state))
			for i, edit := range edits {
				if i == 1 { // restart between the two: the stat cache comes back from disk
					d.stop(syscall.SIGTERM)
					d = startDaemon(t, state, "--watch", dir, "--config", cfg)
					waitFor(t, 20*time.Second, "the workspace watched again", func() bool {
						w, ok := d.workspace(dir)
						return ok && w.State == "watching"
					})
					seen = len(ledger(t, dir, state))
				}
				edit()
				// The newest autosave after the edit, once it holds the
				// edit whole: with a 100 ms quiet period an autosave may
				// fire between two of an edit's steps (the folder src/b
				// removed, the file src/b not yet written), holding the
				// disk as it was then; the next one holds the rest.
				var rec ckpt.Record
				want := ""
				waitFor(t, 20*time.Second, fmt.Sprintf("an autosave holding edit %d", i+1), func() bool {
					recs := ledger(t, dir, state)
					for j := len(recs) - 1; j >= seen; j-- {
						if recs[j].Kind == ckpt.KindAutosave {
							rec = recs[j]
							want = addAllTree(t, dir)
							return rec.SHA != "" && git(t, ws.Store, "ls-tree", "-r", "--full-tree", rec.SHA) == want
						}
					}
					return false
				})
				if rec.State != ckpt.StateOK {
					t.Fatalf("edit %d: autosave %s is %s: %+v", i+1, rec.ID, rec.State, rec)
				}
				if rec.Engine != engine {
					t.Errorf("edit %d: autosave %s sealed by %q, want %q", i+1, rec.ID, rec.Engine, engine)
				}
				if out, err := runCairn(t, "show", dir, rec.ID, "--state-dir", state); err != nil || !strings.Contains(out, "sealed: by the "+engine+" engine") {
					t.Errorf("cairn show %s: %v\n%s", rec.ID, err, out)
				}
				if got := git(t, ws.Store, "ls-tree", "-r", "--full-tree", rec.SHA); got != want {
					t.Errorf("edit %d: autosave %s holds\n%s\nwant (git add -A of the folder)\n%s", i+1, rec.ID, got, want)
				}
				seen = len(ledger(t, dir, state))
			}
			if out := git(t, ws.Store, "fsck", "--no-progress", "--no-dangling"); out != "" {
				t.Errorf("git fsck: %s", out)
			}
		})
	}
}

// addAllTree is `git ls-tree -r` of what `git add -A` stages from dir, in a
// scratch repository of its own (the store is only read).
func addAllTree(t *testing.T, dir string) string {
	t.Helper()
	scratch := filepath.Join(t.TempDir(), "scratch.git")
	run := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Env = []string{"GIT_DIR=" + scratch, "GIT_WORK_TREE=" + dir, "HOME=" + t.TempDir(), "GIT_CONFIG_NOSYSTEM=1",
			"PATH=" + os.Getenv("PATH"), "LC_ALL=C"}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	run("init", "-q")
	run("add", "-A")
	tree := run("write-tree")
	return git(t, scratch, "ls-tree", "-r", "--full-tree", tree[:len(tree)-1])
}
