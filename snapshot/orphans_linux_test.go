package snapshot

import (
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/platform/testsupport"
)

// killOrphans stops a process left working on the store by a cairn that is
// gone (as a repack's pack-objects is when cairn is killed: no parent-death
// signal reaches git's own children), and leaves alone one whose cairn runs,
// one of this cairn, and one on another store.
func TestKillOrphans(t *testing.T) {
	gitDir := t.TempDir()
	other := t.TempDir()
	// A process that is gone: a finished child's pid and start time.
	done := exec.Command("true")
	if err := done.Start(); err != nil {
		t.Fatal(err)
	}
	deadTag := strconv.Itoa(done.Process.Pid) + ":" + procStartTime(done.Process.Pid)
	done.Wait()
	live := exec.Command("sleep", "60")
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { live.Process.Kill(); live.Wait() })
	liveTag := strconv.Itoa(live.Process.Pid) + ":" + procStartTime(live.Process.Pid)

	start := func(owner, dir string) *exec.Cmd {
		c := exec.Command("sleep", "60")
		c.Env = []string{"CAIRN_OWNER=" + owner, "GIT_DIR=" + dir}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
		return c
	}
	orphan := start(deadTag, gitDir)
	ours := start(ownerTag, gitDir)
	othersLive := start(liveTag, gitDir)
	otherStore := start(deadTag, other)
	// Let the kernel show their environments.
	testsupport.Poll(5*time.Second, func() bool { return procStartTime(orphan.Process.Pid) != "" })
	exited := make(chan struct{})
	go func() { orphan.Wait(); close(exited) }()
	if n := killOrphans(gitDir); n != 1 {
		t.Errorf("killOrphans = %d, want 1", n)
	}
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		t.Fatal("the orphan still runs")
	}
	for name, c := range map[string]*exec.Cmd{"this cairn's": ours, "a live cairn's": othersLive, "another store's": otherStore} {
		if procStartTime(c.Process.Pid) == "" {
			t.Errorf("%s process was killed", name)
		}
	}
}
