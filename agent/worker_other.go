//go:build !unix

package agent

import (
	"errors"
	"syscall"
)

// workerAttr: no per-user workers here (a daemon never runs as another user).
func workerAttr(uid, gid uint32, groups []uint32) *syscall.SysProcAttr { return nil }

func workerIDArgs(uint32, uint32, []uint32) []string { return nil }

// BecomeWorker: no per-user workers here.
func BecomeWorker(uint32, uint32, []uint32) error { return errors.New("no workers on this system") }

// HardenWorker: nothing to do here.
func HardenWorker() error { return nil }

func workerExePath(exe string) string { return exe }

func killSession(int) {}

func keepInherited() {}
