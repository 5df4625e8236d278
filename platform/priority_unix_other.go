//go:build unix && !linux

package platform

import "golang.org/x/sys/unix"

func deprioritize(pid int) { _ = unix.Setpriority(unix.PRIO_PROCESS, pid, 19) }
