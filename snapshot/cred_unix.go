//go:build unix

package snapshot

import (
	"io/fs"
	"os/exec"
	"syscall"
)

// SysCred is the user a git process runs as when the daemon acts for a
// workspace owner.
type SysCred struct {
	UID, GID uint32
}

func (c *SysCred) apply(cmd *exec.Cmd) {
	if c == nil {
		return
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: c.UID, Gid: c.GID}}
}

// inode is fi's inode number, 0 when unknown.
func inode(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Ino)
	}
	return 0
}
