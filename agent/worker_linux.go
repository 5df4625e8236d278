package agent

import "syscall"

// workerAttr runs a worker as uid:gid with its groups, in its own session,
// killed if the supervisor dies.
func workerAttr(uid, gid uint32, groups []uint32) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{
		Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: groups},
		Setsid:     true,
		Pdeathsig:  syscall.SIGTERM,
	}
}

// workerExePath runs the executable inherited as fd 4, so it starts even
// when its folder is closed to the owner.
func workerExePath(string) string { return "/proc/self/fd/4" }
