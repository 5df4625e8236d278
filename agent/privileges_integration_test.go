//go:build linux

package agent_test

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cairn-dev/cairn/agent/hankweave/hwsim"
	"github.com/cairn-dev/cairn/agent/hankweave/hwsim/hwsimtest"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// TestRootDaemonWritesAsWorkspaceOwner: the daemon runs as root and watches a
// Hankweave workspace owned by an unprivileged user created for the test;
// after a codon, a rollback (with an archived file to bring back) and a
// restore, every file and folder under the workspace belongs to that user.
// The simulated runtime writes as root, so its files are given to the user
// after each step; anything root-owned left afterwards is cairn's.
func TestRootDaemonWritesAsWorkspaceOwner(t *testing.T) {
	alice := newUser(t)
	name, uid, gid := alice.name, alice.uid, alice.gid
	base := openBase(t)
	execDir := filepath.Join(base, "exec")
	plan := hwsim.Plan(
		hwsim.Codon{ID: "a", Name: "Codon A", Files: []string{"**"}},
		hwsim.Codon{ID: "b", Name: "Codon B", Files: []string{"**"}},
	)
	sim := hwsimtest.New(t, execDir, plan, hwsim.WithClock(hwClock()))
	checkpoints := filepath.Join(execDir, ".hankweave", "checkpoints")
	// giveAway hands what the simulated runtime wrote to the user, leaving
	// cairn's folder alone so its owners stay as cairn made them.
	giveAway := func() {
		t.Helper()
		_ = filepath.WalkDir(execDir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if p == checkpoints {
				return filepath.SkipDir
			}
			_ = os.Lchown(p, uid, gid) // a file may vanish mid-walk
			return nil
		})
		_ = os.Lchown(checkpoints, uid, gid) // the runtime makes this folder, not cairn
	}
	if _, err := os.Stat(checkpoints); err == nil {
		t.Fatalf("hwsim created %s; the test assumes cairn does", checkpoints)
	}
	giveAway()
	assertOwned := func(when string) {
		t.Helper()
		var bad []string
		_ = filepath.WalkDir(execDir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			fi, err := d.Info()
			if err != nil {
				return nil
			}
			if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != uid || int(st.Gid) != gid {
				bad = append(bad, fmt.Sprintf("%s (%d:%d)", strings.TrimPrefix(p, execDir+"/"), st.Uid, st.Gid))
			}
			return nil
		})
		if len(bad) > 0 {
			t.Errorf("%s: not owned by %s (%d:%d): %v", when, name, uid, gid, bad)
		}
	}

	state := t.TempDir()
	root := filepath.Join(execDir, "agentRoot")
	d := startDaemon(t, state, "--watch", execDir)
	waitBaseline(t, execDir, state)
	assertOwned("after the baseline")

	run := sim.StartRun()
	giveAway()
	sim.StartCodon("a")
	giveAway()
	sim.WriteFile("a.txt", "a\n")
	giveAway()
	sim.CompleteCodon("a")
	giveAway()
	ca := waitMarker(t, execDir, state, markerKey{ckpt.KindCompleted, run, "a", 0})
	sim.StartCodon("b")
	giveAway()
	sim.WriteFile("dir/out.md", "b's output\n")
	giveAway()
	sim.CompleteCodon("b")
	giveAway()
	cb := waitMarker(t, execDir, state, markerKey{ckpt.KindCompleted, run, "b", 0})
	sim.Shutdown()
	giveAway()
	assertOwned("after a codon")

	// The runtime archived b's output (in a folder the rollback recreates).
	write(t, filepath.Join(execDir, "rigArchive/b/dir/out.md"), "b's output\n")
	os.RemoveAll(filepath.Join(root, "dir"))
	manifest := map[string]any{"version": "1.0.0", "entries": []map[string]any{
		{"sourcePath": "dir/out.md", "archivePath": "rigArchive/b/dir/out.md", "codonId": "b", "checkpointSha": cb.SHA, "timestamp": "t"},
	}}
	b, _ := json.MarshalIndent(manifest, "", "  ")
	write(t, filepath.Join(execDir, ".hankweave/archive-manifest.json"), string(b))
	giveAway()
	waitRecord(t, execDir, state, "autosave of the archiving", func(r ckpt.Record) bool {
		return r.Kind == ckpt.KindAutosave && r.Removed == 1
	})

	code, body := command(t, d.socket, execDir, "rollback.toCodon", map[string]any{"codonId": "a", "checkpointType": "end"})
	if code != 200 {
		t.Fatalf("rollback: %d %v", code, body)
	}
	fileIs(t, filepath.Join(root, "dir/out.md"), "b's output\n")
	assertOwned("after a rollback")

	// A restore through the cairn command writes b's files back via git.
	if out, err := runCairn(t, "restore", execDir, cb.SHA, "--socket", d.socket); err != nil {
		t.Errorf("restore: %v\n%s", err, out)
	}
	if b, err := os.ReadFile(filepath.Join(root, "a.txt")); err != nil || string(b) != "a\n" {
		t.Errorf("a.txt after the restore to %s (a at %s): %q %v", cb.ID, ca.ID, b, err)
	}
	assertOwned("after a restore")
	// The owner's worker made its barriers (its marks folder in its own
	// state directory): its lifecycle checkpoints were not sealed without.
	if strings.Contains(d.log.String(), "no barrier") {
		t.Errorf("the worker made no barrier:\n%s", d.log.String())
	}
}
