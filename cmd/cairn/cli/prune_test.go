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

	// c2 and c3 are ancestors of c4 (each checkpoint's parent is the one
	// before): dropping them would free nothing while c4 is kept, so the
	// budget pass drops nothing and says why, dry run or not.
	for _, args := range [][]string{{"prune", ws, "--dry-run", "--max-store-size", "1KiB"}, {"prune", ws, "--max-store-size", "1KiB"}} {
		out, errOut, code := cairn(t, env, args...)
		if code != 0 || !strings.Contains(out, "would free nothing") || !strings.Contains(out, "over budget: the protected") {
			t.Fatalf("%v: exit %d:\n%s%s", args, code, out, errOut)
		}
		if list, _, _ := cairn(t, env, "list", ws); !strings.Contains(list, "c2") || !strings.Contains(list, "c3") {
			t.Fatalf("%v dropped a checkpoint that frees nothing:\n%s", args, list)
		}
	}
}
