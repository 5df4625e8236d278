package agent

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

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

// killSession kills what a worker that has exited left in its session: the
// git processes it started (each in its own process group, all in the
// worker's session) and whatever they started. A session's id stays taken
// while any member lives, so no other process can match.
func killSession(sid int) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == sid {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp session ...; comm may hold anything.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(b[i+1:])
		if len(f) > 3 && string(f[3]) == strconv.Itoa(sid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
