package cli_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/agent/checkpoints"
	"github.com/cairn-dev/cairn/snapshot"
	"github.com/cairn-dev/cairn/snapshot/retain"
)

// TestPinListAllAndPrunedRestore: pin and unpin through the CLI, a policy
// applied to the store, list hiding what it pruned unless --all, and a
// restore of a pruned checkpoint refused with when and why.
func TestPinListAllAndPrunedRestore(t *testing.T) {
	ws, state := t.TempDir(), t.TempDir()
	env := []string{"CAIRN_STATE_DIR=" + state, "CAIRN_SOCKET=" + filepath.Join(state, "none.sock")}
	for i, name := range []string{"a", "b", "c"} {
		os.WriteFile(filepath.Join(ws, name+".txt"), []byte(name), 0o644)
		if _, errOut, code := cairn(t, env, "checkpoint", ws, "--label", name); code != 0 {
			t.Fatalf("checkpoint %d: %s", i, errOut)
		}
	}
	out, errOut, code := cairn(t, env, "pin", ws, "c1")
	if code != 0 || !strings.Contains(out, "pinned c1") {
		t.Fatalf("pin: exit %d: %s%s", code, out, errOut)
	}
	if out, _, _ := cairn(t, env, "pin", ws, "c1"); !strings.Contains(out, "pinned already") {
		t.Errorf("second pin: %s", out)
	}
	if _, errOut, code := cairn(t, env, "pin", ws); code != 2 {
		t.Errorf("pin without a target: exit %d: %s", code, errOut)
	}

	ctx := context.Background()
	st, err := snapshot.Open(ctx, ws, snapshot.Options{Layout: snapshot.LayoutPlain, StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	one := retain.Policy{KeepLast: 1}
	res, err := checkpoints.ApplyRetention(ctx, st, retain.Policies{Autosave: one, PreRestore: one, Checkpoints: one}, time.Now())
	st.Close()
	if err != nil || len(res.Pruned) != 1 || res.Pruned[0].ID != "c2" {
		t.Fatalf("retention: %+v %v", res, err)
	}

	out, _, _ = cairn(t, env, "list", ws)
	// " c2 ": the id as listed, not "c2" inside a short sha (1c22b6e).
	if strings.Contains(out, " c2 ") || !strings.Contains(out, " c1 ") || !strings.Contains(out, " c3 ") {
		t.Errorf("list shows pruned c2 or hides the others:\n%s", out)
	}
	out, _, _ = cairn(t, env, "list", ws, "--all")
	if !strings.Contains(out, "c2") || !strings.Contains(out, "pruned") || !strings.Contains(out, "by retention.checkpoints (keep_last=1)") {
		t.Errorf("list --all:\n%s", out)
	}
	_, errOut, code = cairn(t, env, "restore", ws, "c2")
	if code != 5 || !strings.Contains(errOut, "c2 cannot be restored: it was pruned at ") || !strings.Contains(errOut, "by retention.checkpoints") {
		t.Errorf("restore of a pruned checkpoint: exit %d: %s", code, errOut)
	}

	out, _, code = cairn(t, env, "unpin", ws, "c1")
	if code != 0 || !strings.Contains(out, "unpinned c1") {
		t.Errorf("unpin: exit %d: %s", code, out)
	}
	if out, _, _ := cairn(t, env, "unpin", ws, "c1"); !strings.Contains(out, "was not pinned") {
		t.Errorf("second unpin: %s", out)
	}
}
