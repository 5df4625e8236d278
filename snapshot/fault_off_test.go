//go:build !cairnfault

package snapshot

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// Without the cairnfault tag, as this test binary and the shipped one are
// built, FaultEnv does nothing: were it read, this process would exit here.
func TestFaultEnvIgnoredWithoutTag(t *testing.T) {
	ctx := context.Background()
	ws := t.TempDir()
	putFile(t, filepath.Join(ws, "a.txt"), "one\n")
	st, err := Open(ctx, ws, Options{Layout: LayoutPlain, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []string{"stage", "write-tree", "commit-tree", "update-ref", "ledger"} {
		t.Setenv(FaultEnv, step)
		putFile(t, filepath.Join(ws, "a.txt"), step+"\n")
		if _, err := st.Seal(ctx, SealRequest{Kind: ckpt.KindManual}); err != nil {
			t.Fatal(err)
		}
	}
	// Nor does a restore's write between its temporary entry and the
	// rename (platform's fault point).
	first := st.Records()[0]
	if err := os.Remove(filepath.Join(ws, "a.txt")); err != nil { // made anew by the restore
		t.Fatal(err)
	}
	t.Setenv(FaultEnv, "temp-made")
	if res, err := st.Restore(ctx, ckpt.Request{Target: first.SHA}); err != nil || len(res.Write) != 1 {
		t.Fatalf("restore: %v, writes %v", err, res.Write)
	}
}
