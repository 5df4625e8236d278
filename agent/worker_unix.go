//go:build unix && !linux

package agent

import (
	"errors"
	"syscall"
)

// workerAttr runs a worker as uid:gid with its groups, in its own session.
func workerAttr(uid, gid uint32, groups []uint32) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: groups}, Setsid: true}
}

// workerIDArgs: the worker is started with its owner's ids here (workerAttr).
func workerIDArgs(uint32, uint32, []uint32) []string { return nil }

// BecomeWorker is Linux only; elsewhere a worker starts with its ids.
func BecomeWorker(uint32, uint32, []uint32) error {
	return errors.New("a worker changes its own ids on Linux only")
}

// HardenWorker: no PR_SET_DUMPABLE here.
func HardenWorker() error { return nil }

func workerExePath(exe string) string { return exe }

// killSession: no portable way to list a session here; the children die
// of the store lock's rule instead (snapshot/proc.go).
func killSession(int) {}

// keepInherited: Linux only for now.
func keepInherited() {}
