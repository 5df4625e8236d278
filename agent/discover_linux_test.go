package agent

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// A file system mounted inside the root is not walked unless CrossMounts.
func TestDiscoverMountBoundary(t *testing.T) {
	root := discoverTree(t, "runs/a/", "runs/mnt/")
	mnt := filepath.Join(root, "runs/mnt")
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(mnt, syscall.MNT_DETACH); err != nil {
			t.Error(err)
		}
	})
	if err := os.MkdirAll(filepath.Join(mnt, "inner/ws"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cross bool
		want  []string
	}{
		{false, []string{".", "runs", "runs/a"}},
		{true, []string{".", "runs", "runs/a", "runs/mnt", "runs/mnt/inner", "runs/mnt/inner/ws"}},
	} {
		dirs, _, err := discoverRoot(context.Background(), filepath.Join(root, "**"), discoverLimits{CrossMounts: c.cross})
		if err != nil {
			t.Fatal(err)
		}
		if got := foundPaths(root, dirs); !slices.Equal(got, c.want) {
			t.Errorf("cross %v: got %q, want %q", c.cross, got, c.want)
		}
	}
}
