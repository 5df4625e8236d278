//go:build unix

package hwsim_test

import (
	"errors"
	"syscall"
)

func pidGone(pid int) bool { return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) }
