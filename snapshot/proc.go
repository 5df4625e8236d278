package snapshot

import (
	"os"
	"os/exec"
	"sync"
)

// Children and the locks they hold.
//
// A git cairn starts must never outlive cairn holding one of cairn's locks
// (cairn/index.lock, a ref's .lock) unseen: a restarted cairn would take the
// lock for a killed seal's and remove it while the orphan still writes, and
// the orphan would later rename whatever lies at the lock's path over the
// index or the ref. Two things make that impossible:
//
//   - Children die with cairn. Each git runs in its own process group (killed
//     whole when its call is cancelled, when a coprocess is stopped, and by
//     KillChildren at shutdown) and, on Linux, with Pdeathsig SIGKILL: the
//     kernel kills it when the thread that forked it ends, so every child is
//     forked by one goroutine locked to its thread for cairn's whole life
//     (proc_linux.go). That covers a kill -9 of cairn; it cannot reach what
//     git itself starts, nor any system without Pdeathsig.
//
//   - The store lock covers the children. Every git run while the store lock
//     (cairn/lock, an flock) is held inherits that lock's descriptor
//     (ExtraFiles): an flock belongs to the open file, not to a process, so it
//     stays held until the last process holding the descriptor ends, whatever
//     killed cairn, and git passes it on to the processes it starts. A cairn
//     that gets the store lock therefore knows no process it or an earlier
//     cairn started for this store still runs, and a lock file it finds under
//     the store lock (cairn/index.lock, a plain store's ref lock) is provably
//     a dead writer's; one held by a survivor keeps the store lock taken, so
//     the seal waits and then fails naming it, and is retried later.
//
// An flock was chosen over a pid and start time in a side file because the
// kernel releases it exactly when its last holder is gone (no pid reuse, no
// clock, no /proc), and because it needs no new lock: the store lock is
// already held around every call that writes the index or moves a ref.

// lockHolder hands the store lock's file to the git calls made while it is held.
type lockHolder struct {
	mu sync.RWMutex
	f  *os.File
}

// set records the held lock's file; clear (before the lock is released)
// waits for the children being started with it.
func (h *lockHolder) set(f *os.File) {
	h.mu.Lock()
	h.f = f
	h.mu.Unlock()
}

// hold returns the held lock's file (nil when none) and keeps it open until
// done is called, once the child is started.
func (h *lockHolder) hold() (f *os.File, done func()) {
	if h == nil {
		return nil, func() {}
	}
	h.mu.RLock()
	return h.f, h.mu.RUnlock
}

// children are the process groups of the git processes running now.
var children struct {
	mu   sync.Mutex
	pids map[int]bool
}

// startChild starts cmd in its own process group, dying with cairn where the
// system allows (childAttr), and records it for KillChildren; waitChild
// reaps it.
func startChild(cmd *exec.Cmd) error {
	cmd.SysProcAttr = childAttr()
	if err := spawn(cmd); err != nil {
		return err
	}
	children.mu.Lock()
	if children.pids == nil {
		children.pids = map[int]bool{}
	}
	children.pids[cmd.Process.Pid] = true
	children.mu.Unlock()
	return nil
}

// waitChild waits for a child startChild started.
func waitChild(cmd *exec.Cmd) error {
	err := cmd.Wait()
	children.mu.Lock()
	delete(children.pids, cmd.Process.Pid)
	children.mu.Unlock()
	return err
}

// KillChildren kills the process group of every git cairn started that
// still runs: the daemon calls it as it exits, so nothing it started
// outlives it.
func KillChildren() {
	children.mu.Lock()
	defer children.mu.Unlock()
	for pid := range children.pids {
		killGroup(pid)
	}
}
