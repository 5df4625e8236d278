//go:build unix

package snapshot

import (
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
