//go:build unix && !linux

package snapshot

import (
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

// childAttr: its own process group (no Pdeathsig here: the store lock the
// child inherits keeps a survivor's locks from being taken for stale).
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

func spawn(cmd *exec.Cmd) error { return cmd.Start() }

// killGroup kills the process group pid leads.
func killGroup(pid int) error { return syscall.Kill(-pid, syscall.SIGKILL) }

// ownerTag names this process in every git's environment (CAIRN_OWNER).
var ownerTag = strconv.Itoa(os.Getpid())

// killOrphans finds no orphans here (no /proc): the store lock protects.
func killOrphans(gitDir string) int { return 0 }
