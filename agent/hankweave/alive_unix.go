//go:build unix

package hankweave

import (
	"errors"
	"syscall"
)

// pidAlive is kill(pid, 0): no error or EPERM (it exists, we may not signal
// it) means alive; ESRCH means gone.
func pidAlive(pid int) (alive, known bool) {
	if pid <= 0 {
		return false, true
	}
	err := syscall.Kill(pid, 0)
	if err == nil || errors.Is(err, syscall.EPERM) {
		return true, true
	}
	if errors.Is(err, syscall.ESRCH) {
		return false, true
	}
	return true, false
}
