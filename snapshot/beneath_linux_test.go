//go:build cairnfault && linux

package snapshot

// This test sets a hook only a build with -tags cairnfault has (hooks_on.go);
// without the tag, TestHooksUnderFaultTag runs it in such a build.

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// TestInprocSealSwappedFolder: between the planning of a seal and its read
// of tmp/sub/secret.txt, whoever may write in tmp/ swaps tmp/sub with a link
// to a folder outside the workspace holding a secret.txt of its own (the
// moment a renameat2 exchange loop aims for, taken deterministically). The
// in-process engine names the path as resolving through a link and never
// reads it: the outside secret reaches no object of the store.
func TestInprocSealSwappedFolder(t *testing.T) {
	dir, st := newTestStore(t, Options{})
	const secret = "OUTSIDE-SECRET-91c4d2"
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	writeTree(t, dir, map[string]string{"a.txt": "a", "tmp/sub/secret.txt": "mine"})
	mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, Changed: []string{"a.txt", "tmp/sub/secret.txt"}})
	writeFile(t, dir, "a.txt", "b", 0o644)
	mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, Changed: []string{"a.txt"}})
	if st.lastEngine != EngineInproc {
		t.Fatalf("the in-process engine is not sealing: %s", st.lastEngine)
	}
	writeFile(t, dir, "tmp/sub/secret.txt", "mine, edited", 0o644)
	sub, link := filepath.Join(dir, "tmp/sub"), filepath.Join(dir, "tmp/link")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	hookBeforeHash = func() {
		if err := unix.Renameat2(unix.AT_FDCWD, sub, unix.AT_FDCWD, link, unix.RENAME_EXCHANGE); err != nil {
			t.Error(err)
		}
	}
	defer func() { hookBeforeHash = nil }()
	rec, err := st.Seal(context.Background(), SealRequest{Kind: ckpt.KindManual, Changed: []string{"tmp/sub/secret.txt"}})
	if err != nil {
		t.Fatal(err)
	}
	if st.lastEngine != EngineInproc {
		t.Fatalf("sealed by %s: %+v", st.lastEngine, rec)
	}
	if rec.State != ckpt.StatePartial || len(rec.Issues) != 1 || rec.Issues[0].Path != "tmp/sub/secret.txt" ||
		!strings.Contains(rec.Issues[0].Reason, "symbolic link") {
		t.Errorf("record: state %s, issues %+v; want partial naming tmp/sub/secret.txt", rec.State, rec.Issues)
	}
	out, err := st.git.Run(context.Background(), nil, "cat-file", "--batch-all-objects", "--batch")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(out, []byte(secret)) {
		t.Error("the outside secret was sealed into the store")
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "secret.txt")); string(b) != secret+"\n" {
		t.Errorf("outside file: %q", b)
	}
}
