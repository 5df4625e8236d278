package platform

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// SyncFS flushes every dirty page of the filesystem holding path: one call
// instead of an fsync per loose object.
func SyncFS(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("syncfs %s: %w", path, err)
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return fmt.Errorf("syncfs %s: %w", path, err)
	}
	return nil
}
