package snapshot

import (
	"bytes"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
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

// ownerTag names this process in every git's environment (CAIRN_OWNER):
// its pid and start time, so a git (or a process git started: a repack's
// pack-objects, which no parent-death signal reaches) whose cairn is gone
// can be told from one whose cairn runs.
var ownerTag = func() string {
	return strconv.Itoa(os.Getpid()) + ":" + procStartTime(os.Getpid())
}()

// procStartTime is a process's start time in clock ticks since boot ("" if
// it is gone).
func procStartTime(pid int) string {
	if f := procStatFields(pid); len(f) >= 20 {
		return f[19]
	}
	return ""
}

// procStatFields is /proc/<pid>/stat after the command's name: its state,
// its parent's pid, … (nil if it is gone).
func procStatFields(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(b[i+1:]))
}

// killOrphans kills the processes a cairn that is gone left working on the
// store at gitDir: their environment names that store (GIT_DIR) and a
// CAIRN_OWNER whose process no longer runs. They hold no lock cairn could
// see (git's own children do not inherit the store lock), and write into
// the store. Only processes this one may read are seen (all, as root). It
// returns how many it killed, after they are gone (at most a second each).
func killOrphans(gitDir string) int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	self := os.Getpid()
	killed := 0
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil {
			continue
		}
		var owner string
		store := false
		for _, kv := range bytes.Split(env, []byte{0}) {
			switch {
			case bytes.HasPrefix(kv, []byte("CAIRN_OWNER=")):
				owner = string(kv[len("CAIRN_OWNER="):])
			case string(kv) == "GIT_DIR="+gitDir:
				store = true
			}
		}
		if owner == "" || !store || owner == ownerTag {
			continue
		}
		opid, start, _ := strings.Cut(owner, ":")
		if n, err := strconv.Atoi(opid); err == nil && start != "" && procStartTime(n) == start {
			continue // its cairn runs
		}
		started := procStartTime(pid)
		if syscall.Kill(pid, syscall.SIGKILL) != nil {
			continue
		}
		for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if procStartTime(pid) != started {
				break
			}
		}
		killed++
	}
	return killed
}
