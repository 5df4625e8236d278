package cli_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/restore/ckpt"
	"github.com/cairn-dev/cairn/snapshot"
)

// TestPruneBudget: `cairn prune --dry-run` names what a budget would drop and
// drops nothing; the real run drops it and reports the store measured after
// maintenance.
func TestPruneBudget(t *testing.T) {
	ws, state := t.TempDir(), t.TempDir()
	env := []string{"CAIRN_STATE_DIR=" + state, "CAIRN_SOCKET=" + filepath.Join(state, "none.sock")}
	ctx := context.Background()
	st, err := snapshot.Open(ctx, ws, snapshot.Options{Layout: snapshot.LayoutPlain, StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range []ckpt.Kind{ckpt.KindBaseline, ckpt.KindAutosave, ckpt.KindAutosave, ckpt.KindAutosave} {
		b := make([]byte, 32<<10)
		rand.Read(b)
		os.WriteFile(filepath.Join(ws, "data.bin"), []byte(hex.EncodeToString(b)), 0o644)
		if rec, err := st.Seal(ctx, snapshot.SealRequest{Kind: k}); err != nil || rec.State != ckpt.StateOK {
			t.Fatalf("seal %d: %v %+v", i, err, rec)
		}
	}
	st.Close()

	// c4 is the position (kept), c1 the newest baseline; the budget drops
	// the older autosaves c2 and c3, which free their own 64 KiB each since
	// checkpoints outside runs are root commits. The protected ones alone
	// are still over 1 KiB: said, and kept.
	out, errOut, code := cairn(t, env, "prune", ws, "--dry-run", "--max-store-size", "1KiB")
	if code != 0 || !strings.Contains(out, "would drop 2 checkpoints") || !strings.Contains(out, "over budget: the protected") {
		t.Fatalf("dry run: exit %d:\n%s%s", code, out, errOut)
	}
	if list, _, _ := cairn(t, env, "list", ws); !listedIDs(list)["c2"] || !listedIDs(list)["c3"] {
		t.Fatalf("a dry run dropped checkpoints:\n%s", list)
	}
	out, errOut, code = cairn(t, env, "prune", ws, "--max-store-size", "1KiB")
	if code != 0 || !strings.Contains(out, "dropped 2 checkpoints") || !strings.Contains(out, "over budget: the protected") {
		t.Fatalf("prune: exit %d:\n%s%s", code, out, errOut)
	}
	list, _, _ := cairn(t, env, "list", ws)
	if ids := listedIDs(list); ids["c2"] || ids["c3"] || !ids["c4"] || !ids["c1"] {
		t.Fatalf("after the budget pass:\n%s", list)
	}
}

// listedIDs are the checkpoint ids of `cairn list` lines (the second field;
// a commit abbreviation may hold "c2 " too).
func listedIDs(list string) map[string]bool {
	ids := map[string]bool{}
	for _, line := range strings.Split(list, "\n") {
		if f := strings.Fields(line); len(f) > 1 {
			ids[f[1]] = true
		}
	}
	return ids
}
