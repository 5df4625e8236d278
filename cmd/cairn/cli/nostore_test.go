package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadsCreateNoStore: list, show and diff on a folder that has no store
// create nothing (no store, no state directory): list shows an empty ledger,
// show and diff say there are no checkpoints yet. Once a checkpoint exists
// they read it.
func TestReadsCreateNoStore(t *testing.T) {
	ws, state := t.TempDir(), filepath.Join(t.TempDir(), "state")
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"CAIRN_STATE_DIR=" + state, "CAIRN_SOCKET=" + filepath.Join(t.TempDir(), "none.sock")}
	for _, c := range []struct {
		args      []string
		code      int
		out, errs string
	}{
		{[]string{"list", ws}, 0, "no checkpoints yet\n", ""},
		{[]string{"list", ws, "--json"}, 0, "[]\n", ""},
		{[]string{"show", ws, "c1"}, 1, "", "no checkpoints for " + ws + " yet"},
		{[]string{"diff", ws, "c1"}, 1, "", "no checkpoints for " + ws + " yet"},
	} {
		out, errOut, code := cairn(t, env, c.args...)
		if code != c.code || out != c.out || !strings.Contains(errOut, c.errs) {
			t.Errorf("cairn %v without a store: exit %d, stdout %q, stderr %q; want exit %d, stdout %q, stderr saying %q",
				c.args, code, out, errOut, c.code, c.out, c.errs)
		}
		if _, err := os.Lstat(state); err == nil {
			t.Fatalf("cairn %v created the state directory %s", c.args, state)
		}
	}
	if _, errOut, code := cairn(t, env, "checkpoint", ws); code != 0 {
		t.Fatalf("checkpoint: exit %d: %s", code, errOut)
	}
	if out, errOut, code := cairn(t, env, "list", ws); code != 0 || !strings.Contains(out, "c1") {
		t.Errorf("list after a checkpoint: exit %d, %q %q", code, out, errOut)
	}
	if out, errOut, code := cairn(t, env, "show", ws, "c1"); code != 0 || !strings.Contains(out, "c1") {
		t.Errorf("show after a checkpoint: exit %d, %q %q", code, out, errOut)
	}
}
