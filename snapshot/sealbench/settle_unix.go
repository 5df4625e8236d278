//go:build unix

package sealbench

import (
	"io/fs"
	"syscall"
)

// settle flushes dirty pages before a timed operation, so writeback left by
// the previous one (a first seal writes hundreds of MB at 100k files) does
// not land in the next measurement. It needs no root, unlike dropping the
// page cache, and leaves the cache warm.
func settle() { syscall.Sync() }

// diskBytes is the space a file takes on disk (its allocated blocks).
func diskBytes(fi fs.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int64(st.Blocks) * 512
	}
	return fi.Size()
}
