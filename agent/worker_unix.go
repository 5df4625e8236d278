//go:build unix && !linux

package agent

import "syscall"

// workerAttr runs a worker as uid:gid with its groups, in its own session.
func workerAttr(uid, gid uint32, groups []uint32) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: groups}, Setsid: true}
}

func workerExePath(exe string) string { return exe }

// killSession: no portable way to list a session here; the children die
// of the store lock's rule instead (snapshot/proc.go).
func killSession(int) {}
