//go:build unix

package snapshot

import (
	"io/fs"
	"syscall"
)

// inode is fi's inode number, 0 when unknown.
func inode(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Ino)
	}
	return 0
}

// device is the file system fi is on, 0 when unknown.
func device(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Dev)
	}
	return 0
}
