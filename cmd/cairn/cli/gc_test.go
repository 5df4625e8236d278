package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGCAndDamagedStore: `cairn gc` without a daemon packs the store and
// prints what it did; a store whose objects another program deleted is
// recovered by the next checkpoint (sealed from the whole work tree, saying
// what was lost), and doctor --fsck reports the missing objects as a FAIL
// with a fix.
func TestGCAndDamagedStore(t *testing.T) {
	ws, state := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"CAIRN_STATE_DIR=" + state}
	sock := filepath.Join(state, "cairn.sock")
	if out, se, code := cairn(t, env, "checkpoint", ws, "--state-dir", state, "--socket", sock); code != 0 {
		t.Fatalf("checkpoint: %d %s %s", code, out, se)
	}
	out, se, code := cairn(t, env, "gc", ws, "--state-dir", state, "--socket", sock)
	if code != 0 || !strings.Contains(out, "done in") || !strings.Contains(out, "pack-refs") || !strings.Contains(out, "loose objects") {
		t.Fatalf("gc: exit %d\n%s%s", code, out, se)
	}

	// Another program deletes the store's packs.
	packs, _ := filepath.Glob(filepath.Join(state, "stores", "*", "store.git", "objects", "pack", "*"))
	if len(packs) == 0 {
		t.Fatal("gc left no pack")
	}
	for _, p := range packs {
		os.Remove(p)
	}
	os.WriteFile(filepath.Join(ws, "b.txt"), []byte("b\n"), 0o644)
	// The next checkpoint is sealed from the whole work tree, saying what
	// was lost (it was refused for ever before); doctor still finds the
	// lost checkpoint.
	out, se, code = cairn(t, env, "checkpoint", ws, "--state-dir", state, "--socket", sock)
	if code != 0 || !strings.Contains(out+se, "missing from the store") {
		t.Fatalf("checkpoint on a damaged store: exit %d\n%s%s", code, out, se)
	}
	out, se, code = cairn(t, env, "doctor", "--fsck", "--state-dir", state, "--socket", sock, ws)
	if code != 6 || !strings.Contains(out, "FAIL store") || !strings.Contains(out, " missing (deleted by another program?)") || !strings.Contains(out, "fix:") {
		t.Fatalf("doctor --fsck on a damaged store: exit %d\n%s%s", code, out, se)
	}
}

// TestRootLeavesUsersStores: as root, without a daemon, gc, prune and pin on
// a workspace another user owns are refused (exit 5, naming the owner's way)
// and touch nothing: root never acts on a user's files itself.
func TestRootLeavesUsersStores(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	ws, state := t.TempDir(), t.TempDir()
	if err := os.Chown(ws, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	env := []string{"CAIRN_STATE_DIR=" + state, "CAIRN_SOCKET=" + filepath.Join(state, "none.sock")}
	for _, args := range [][]string{{"gc", ws}, {"prune", ws}, {"pin", ws, "c1"}, {"unpin", ws, "c1"}} {
		out, se, code := cairn(t, env, args...)
		if code != 5 || !strings.Contains(se, "as root, cairn does not work on a user's files itself") {
			t.Errorf("cairn %v as root on another user's workspace: exit %d\n%s%s", args, code, out, se)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(state, "*")); len(left) != 0 {
		t.Errorf("the refused commands left %v in the state directory", left)
	}
}
