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

// ownerIDs is the uid and gid of path when this process may give files away
// (root), else -1, -1: files it creates keep the writer's owner.
func ownerIDs(path string) (int, int) {
	if os.Geteuid() != 0 {
		return -1, -1
	}
	fi, err := os.Stat(path)
	if err != nil {
		return -1, -1
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return -1, -1
	}
	return int(st.Uid), int(st.Gid)
}

// likeOwner is like's uid and gid when this process may give files away
// (root), else -1, -1, as platform.WriteFileAtomicOwned takes them.
func likeOwner(like fs.FileInfo) (int, int) {
	st, ok := like.Sys().(*syscall.Stat_t)
	if !ok || os.Geteuid() != 0 {
		return -1, -1
	}
	return int(st.Uid), int(st.Gid)
}
