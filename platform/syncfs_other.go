//go:build unix && !linux

package platform

import "syscall"

// SyncFS flushes dirty data to disk. Without syncfs(2) the whole system is synced.
func SyncFS(path string) error {
	syscall.Sync()
	return nil
}
