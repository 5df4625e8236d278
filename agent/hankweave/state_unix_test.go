//go:build unix

package hankweave

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/cairn-dev/cairn/agent/hankweave/hwsim"
	"github.com/cairn-dev/cairn/agent/hankweave/hwsim/hwsimtest"
)

// cairn runs as root; the runtime as the workspace's owner, who must go on
// rewriting state.json and state.json.bak after cairn did.
func TestWriteStateKeepsOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	dir := t.TempDir()
	sim := hwsimtest.New(t, dir, hwsim.Plan(hwsim.Codon{ID: "a"}))
	sim.StartRun()
	sim.Stop()
	for _, name := range []string{StateFile, StateBackupFile} {
		_ = os.Chown(filepath.Join(dir, HankweaveDir, name), 4321, 4321)
	}
	_ = os.Remove(filepath.Join(dir, HankweaveDir, StateBackupFile)) // so WriteState creates it
	st, err := ReadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteState(dir, st); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{StateFile, StateBackupFile} {
		fi, err := os.Stat(filepath.Join(dir, HankweaveDir, name))
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != 4321 || st.Gid != 4321 {
			t.Errorf("%s owned by %d:%d, want 4321:4321", name, st.Uid, st.Gid)
		}
	}
}
