package testsupport

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// MountTmpfs mounts a tmpfs of the given size ("2m", "16m": a real ENOSPC
// once full) on a fresh folder, unmounted at the end of the test. It skips
// the test where it cannot mount (not root, no mount permission).
func MountTmpfs(t testing.TB, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	unmountAtCleanup(t, dir)
	return dir
}

// MountExt4Coarse makes an ext4 image of size bytes with 128-byte inodes,
// which keep whole-second timestamps, and loop-mounts it on a fresh folder,
// unmounted at the end of the test. It skips the test without root,
// mkfs.ext4 (e2fsprogs) or loop devices.
func MountExt4Coarse(t testing.TB, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to loop-mount an ext4 with 1-second timestamps (mkfs.ext4 -I 128)")
	}
	mkfs, err := exec.LookPath("mkfs.ext4")
	if err != nil {
		t.Skip("needs mkfs.ext4 (e2fsprogs) for a file system with 1-second timestamps")
	}
	img := filepath.Join(t.TempDir(), "ext4.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, size); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(mkfs, "-q", "-F", "-I", "128", img).CombinedOutput(); err != nil {
		t.Skipf("mkfs.ext4 of a %s-byte image: %v: %s", strconv.FormatInt(size, 10), err, out)
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-o", "loop", img, mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot loop-mount an ext4 image here (no loop devices?): %v: %s", err, out)
	}
	unmountAtCleanup(t, mnt)
	return mnt
}

// unmountAtCleanup unmounts dir when the test ends. A file system still busy
// (a file left open) fails the test, and is then detached lazily so that
// nothing stays mounted.
func unmountAtCleanup(t testing.TB, dir string) {
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
			_ = exec.Command("umount", "-l", dir).Run()
		}
	})
}
