//go:build unix

package sealbench

import "syscall"

// settle flushes dirty pages before a timed operation, so writeback left by
// the previous one (a first seal writes hundreds of MB at 100k files) does
// not land in the next measurement. It needs no root, unlike dropping the
// page cache, and leaves the cache warm.
func settle() { syscall.Sync() }
