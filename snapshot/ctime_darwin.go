package snapshot

import (
	"io/fs"
	"syscall"
)

// ctime is fi's inode change time in nanoseconds, 0 when unknown.
func ctime(fi fs.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ctimespec.Nano()
	}
	return 0
}
