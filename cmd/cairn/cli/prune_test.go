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

	out, errOut, code := cairn(t, env, "prune", ws, "--dry-run", "--max-store-size", "1KiB")
	if code != 0 || !strings.Contains(out, "drop     c2") || !strings.Contains(out, "drop     c3") || strings.Contains(out, "c4") ||
		!strings.Contains(out, "would drop 2 checkpoints") || !strings.Contains(out, "an estimate") || !strings.Contains(out, "over budget: the protected") {
		t.Fatalf("dry run: exit %d:\n%s%s", code, out, errOut)
	}
	if list, _, _ := cairn(t, env, "list", ws); !strings.Contains(list, "c2") {
		t.Fatalf("dry run dropped c2:\n%s", list)
	}
	out, errOut, code = cairn(t, env, "prune", ws, "--max-store-size", "1KiB")
	if code != 0 || !strings.Contains(out, "dropped  c2") || !strings.Contains(out, "dropped 2 checkpoints") || !strings.Contains(out, "after maintenance (freed ") {
		t.Fatalf("prune: exit %d:\n%s%s", code, out, errOut)
	}
	if list, _, _ := cairn(t, env, "list", ws, "--all"); !strings.Contains(list, "budget (max 1.0 KiB)") {
		t.Fatalf("list --all:\n%s", list)
	}
}
