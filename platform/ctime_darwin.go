package platform

import (
	"io/fs"
	"syscall"
)

// ChangeTime is fi's inode change time in nanoseconds, 0 when unknown.
func ChangeTime(fi fs.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ctimespec.Nano()
	}
	return 0
}
