package workerproto

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/platform/testsupport"
)

// TestKillSession: what a worker left in its session when it exited (a git
// in its own process group, and what that started) is killed; a process of
// another session is not.
func TestKillSession(t *testing.T) {
	pidFile := t.TempDir() + "/pid"
	// The "worker": a session leader whose child runs in a group of its own
	// (as a git does) and outlives it.
	worker := exec.Command("/bin/sh", "-c", `set -m; sleep 60 & echo $! >`+pidFile+`; exit 0`)
	worker.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := worker.Run(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	left, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	other := exec.Command("sleep", "60")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Process.Kill(); _ = other.Wait(); _ = syscall.Kill(left, syscall.SIGKILL) })
	gone := func(pid int) bool {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		i := bytes.LastIndexByte(b, ')')
		return err != nil || i < 0 || len(b) < i+3 || b[i+2] == 'Z'
	}
	if gone(left) {
		t.Fatal("the worker's child did not outlive it: the test shows nothing")
	}

	KillSession(worker.Process.Pid)
	testsupport.WaitFor(t, 10*time.Second, fmt.Sprintf("pid %d, left in the exited worker's session, to end", left),
		func() bool { return gone(left) })
	if gone(other.Process.Pid) {
		t.Error("a process of another session was killed")
	}
}
