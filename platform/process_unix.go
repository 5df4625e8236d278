//go:build unix

package platform

import (
	"errors"
	"syscall"
)

// ProcessRunning says whether a process with this pid exists (signal 0;
// one owned by another user counts).
func ProcessRunning(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
