package snapshot

import (
	"os/exec"
	"runtime"
	"syscall"
)

// childAttr: its own process group, and SIGKILL when its parent thread ends.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// Pdeathsig fires when the thread that forked the child ends, not the
// process, and Go ends a thread when a goroutine locked to it exits; any
// goroutine may lock the thread a child was forked on. Every child is
// therefore forked by one goroutine that locks its thread and never returns:
// that thread ends only with cairn. It starts with the package, so it is
// there before anything counts goroutines.
var spawnReq = startSpawner()

type spawnCall struct {
	cmd  *exec.Cmd
	done chan error
}

func startSpawner() chan spawnCall {
	req := make(chan spawnCall)
	go func() {
		runtime.LockOSThread() // never unlocked
		for c := range req {
			c.done <- c.cmd.Start()
		}
	}()
	return req
}

func spawn(cmd *exec.Cmd) error {
	c := spawnCall{cmd: cmd, done: make(chan error, 1)}
	spawnReq <- c
	return <-c.done
}

// killGroup kills the process group pid leads.
func killGroup(pid int) error { return syscall.Kill(-pid, syscall.SIGKILL) }
