//go:build !unix

package agent

import "syscall"

// workerAttr: no per-user workers here (a daemon never runs as another user).
func workerAttr(uid, gid uint32, groups []uint32) *syscall.SysProcAttr { return nil }

func workerExePath(exe string) string { return exe }

func killSession(int) {}
