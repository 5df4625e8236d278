package platform

import "golang.org/x/sys/unix"

// Deprioritize lowers a process's CPU priority (nice 19) and puts its disk
// I/O in the idle class, so background work (store maintenance) yields to
// seals. Best effort: errors are ignored.
func Deprioritize(pid int) {
	_ = unix.Setpriority(unix.PRIO_PROCESS, pid, 19)
	const ioprioWhoProcess, ioprioClassIdle, ioprioClassShift = 1, 3, 13
	_, _, _ = unix.Syscall(unix.SYS_IOPRIO_SET, ioprioWhoProcess, uintptr(pid), ioprioClassIdle<<ioprioClassShift)
}
