//go:build !unix

package workerproto

import (
	"errors"
	"syscall"
)

// Attr: no per-user workers here (a daemon never runs as another user).
func Attr(uid, gid uint32, groups []uint32) *syscall.SysProcAttr { return nil }

// IDArgs: none here (Attr).
func IDArgs(uint32, uint32, []uint32) []string { return nil }

// BecomeWorker: no per-user workers here.
func BecomeWorker(uint32, uint32, []uint32) error { return errors.New("no workers on this system") }

// HardenWorker: nothing to do here.
func HardenWorker() error { return nil }

// ExePath is the executable itself here.
func ExePath(exe string) string { return exe }

// KillSession: nothing to do here.
func KillSession(int) {}

// KeepInherited: nothing to do here.
func KeepInherited() {}
