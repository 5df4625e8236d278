package snapshot

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// TestCheckupGitsHoldStoreLock: the gits `cairn doctor --repair` runs under
// the store lock (read-tree on cairn's index, update-ref) inherit that lock,
// as a seal's do (proc.go); before, the doctor took the lock apart from the
// checkup's runner, and a repair's git that outlived a killed doctor left
// the store unlocked while it wrote cairn's index.
func TestCheckupGitsHoldStoreLock(t *testing.T) {
	dir, st := newTestStore(t, Options{Engine: EngineGit})
	writeTree(t, dir, map[string]string{"a.txt": "a\n"})
	mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})

	c := NewCheckup(st.git)
	rec := t.TempDir()
	script := filepath.Join(rec, "git")
	// Each git notes what its fd 3 is (nothing: "none").
	body := fmt.Sprintf("#!/bin/bash\n{ readlink /proc/$$/fd/3 || echo none; } >>%q 2>/dev/null\nexec %q \"$@\"\n",
		filepath.Join(rec, "fds"), c.g.Path)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	c.g.Path = script
	fds := func() []string {
		b, _ := os.ReadFile(filepath.Join(rec, "fds"))
		os.Remove(filepath.Join(rec, "fds"))
		return strings.Fields(string(b))
	}
	lockPath := filepath.Join(st.GitDir(), cairnSubdir, "lock")

	unlock, err := c.LockStore(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if p := c.Index(context.Background()); len(p) > 0 {
		t.Fatalf("Index: %+v", p)
	}
	got := fds()
	if len(got) == 0 {
		t.Fatal("the checkup ran no git")
	}
	for _, f := range got {
		if f != lockPath {
			t.Errorf("a git the checkup ran under the store lock has fd 3 = %s, want the store lock %s", f, lockPath)
		}
	}
	unlock()
	c.Index(context.Background())
	for _, f := range fds() {
		if f == lockPath {
			t.Errorf("a git the checkup ran after unlock still holds the store lock")
		}
	}
}
