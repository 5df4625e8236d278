//go:build !cairnfault

package snapshot

import (
	"context"
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
}
