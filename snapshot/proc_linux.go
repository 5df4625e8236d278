package snapshot

import (
	"os/exec"
	"runtime"
	"sync"
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
// that thread ends only with cairn.
var spawner struct {
	once sync.Once
	req  chan spawnCall
}

type spawnCall struct {
	cmd  *exec.Cmd
	done chan error
}

func spawn(cmd *exec.Cmd) error {
	spawner.once.Do(func() {
		spawner.req = make(chan spawnCall)
		go func() {
			runtime.LockOSThread() // never unlocked
			for c := range spawner.req {
				c.done <- c.cmd.Start()
			}
		}()
	})
	c := spawnCall{cmd: cmd, done: make(chan error, 1)}
	spawner.req <- c
	return <-c.done
}

// killGroup kills the process group pid leads.
func killGroup(pid int) error { return syscall.Kill(-pid, syscall.SIGKILL) }
