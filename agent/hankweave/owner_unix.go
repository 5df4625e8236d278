//go:build unix

package hankweave

import (
	"io/fs"
	"os"
	"syscall"
)

// chownLike gives f the owner and group of like when this process may (root).
// Errors are ignored: the file is still correct, only its owner differs.
func chownLike(f *os.File, like fs.FileInfo) {
	st, ok := like.Sys().(*syscall.Stat_t)
	if !ok || os.Geteuid() != 0 {
		return
	}
	_ = f.Chown(int(st.Uid), int(st.Gid))
}
