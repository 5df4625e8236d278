//go:build unix && !linux

package workerproto

import (
	"errors"
	"syscall"
)

// Attr runs a worker as uid:gid with its groups, in its own session.
func Attr(uid, gid uint32, groups []uint32) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: groups}, Setsid: true}
}

// IDArgs: the worker is started with its owner's ids here (Attr).
func IDArgs(uint32, uint32, []uint32) []string { return nil }

// BecomeWorker is Linux only; elsewhere a worker starts with its ids.
func BecomeWorker(uint32, uint32, []uint32) error {
	return errors.New("a worker changes its own ids on Linux only")
}

// HardenWorker: no PR_SET_DUMPABLE here.
func HardenWorker() error { return nil }

// ExePath is the executable itself here.
func ExePath(exe string) string { return exe }

// KillSession: no portable way to list a session here; the children die
// of the store lock's rule instead (snapshot/proc.go).
func KillSession(int) {}

// KeepInherited: Linux only for now.
func KeepInherited() {}
