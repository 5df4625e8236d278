package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestDoctor: a healthy setup (a sealed plain-layout store, no daemon) exits
// 0; a lock file naming a dead process is reported with its fix and exit 6.
func TestDoctor(t *testing.T) {
	ws, state := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"CAIRN_STATE_DIR=" + state}
	if out, se, code := cairn(t, env, "checkpoint", ws, "--state-dir", state); code != 0 {
		t.Fatalf("checkpoint: %d %s %s", code, out, se)
	}
	sock := filepath.Join(state, "cairn.sock")
	args := []string{"doctor", "--state-dir", state, "--socket", sock, ws}
	out, se, code := cairn(t, env, args...)
	if code != 0 {
		t.Fatalf("healthy doctor: exit %d\n%s%s", code, out, se)
	}
	if !strings.Contains(out, "ok   git") || !strings.Contains(out, "healthy") {
		t.Errorf("healthy doctor output:\n%s", out)
	}

	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	locks, _ := filepath.Glob(filepath.Join(state, "stores", "*", "store.git", "cairn", "lock"))
	if len(locks) != 1 {
		t.Fatalf("store lock files: %v", locks)
	}
	if err := os.WriteFile(locks[0], []byte(strconv.Itoa(dead.Process.Pid)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, code = cairn(t, env, args...)
	if code != 6 {
		t.Errorf("doctor with a stale lock: exit %d, want 6\n%s", code, out)
	}
	if !strings.Contains(out, "FAIL lock") || !strings.Contains(out, "stale lock "+locks[0]) || !strings.Contains(out, "fix: rm "+locks[0]) {
		t.Errorf("stale lock not reported with its fix:\n%s", out)
	}
}
