//go:build !unix

package snapshot

import (
	"os"
	"os/exec"
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
