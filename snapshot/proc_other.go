//go:build !unix

package snapshot

import (
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

func childAttr() *syscall.SysProcAttr { return nil }

func spawn(cmd *exec.Cmd) error { return cmd.Start() }

func killGroup(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}

// ownerTag names this process in every git's environment (CAIRN_OWNER).
var ownerTag = strconv.Itoa(os.Getpid())

// killOrphans finds no orphans here (no /proc): the store lock protects.
func killOrphans(gitDir string) int { return 0 }
