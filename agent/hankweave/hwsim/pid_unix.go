//go:build unix

package hwsim

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// DeadPID returns a process id that no process has right now (kill(pid, 0)
// fails with ESRCH), searched downwards from the top of the pid range.
func DeadPID() int {
	top := 99999
	if b, err := os.ReadFile("/proc/sys/kernel/pid_max"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n > 2 {
			top = n - 1
		}
	}
	for pid := top; pid > 1; pid-- {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return pid
		}
	}
	return top
}
