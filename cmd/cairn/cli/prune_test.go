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
	if list, _, _ := cairn(t, env, "list", ws); !strings.Contains(list, "c2") || !strings.Contains(list, "c3") {
		t.Fatalf("a dry run dropped checkpoints:\n%s", list)
	}
	out, errOut, code = cairn(t, env, "prune", ws, "--max-store-size", "1KiB")
	if code != 0 || !strings.Contains(out, "dropped 2 checkpoints") || !strings.Contains(out, "over budget: the protected") {
		t.Fatalf("prune: exit %d:\n%s%s", code, out, errOut)
	}
	list, _, _ := cairn(t, env, "list", ws)
	if strings.Contains(list, "c2 ") || strings.Contains(list, "c3 ") || !strings.Contains(list, "c4") || !strings.Contains(list, "c1") {
		t.Fatalf("after the budget pass:\n%s", list)
	}
}
