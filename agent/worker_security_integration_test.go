//go:build linux

package agent_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Started as an attacker with CAIRN_TEST_ATTACK=steal or race, the copied
// test binary tries to take a worker over (stealMain, raceMain) and exits
// before any test runs.
func init() {
	switch os.Getenv("CAIRN_TEST_ATTACK") {
	case "steal":
		os.Exit(stealMain())
	case "race":
		os.Exit(raceMain())
	}
}

// takeOver tries, as this process's user, what would give it a process:
// its descriptors fds with pidfd_getfd, a ptrace attach (PTRACE_SEIZE, which
// does not stop it; the kernel detaches when this process exits), its
// memory. It answers what each try gave ("ok" or the error).
func takeOver(pid int, fds []int) map[string]string {
	res := map[string]string{}
	say := func(what string, err error) {
		if err == nil {
			res[what] = "ok"
		} else {
			res[what] = err.Error()
		}
	}
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		say("pidfd_open", err)
	} else {
		for _, fd := range fds {
			got, err := unix.PidfdGetfd(pidfd, fd, 0)
			if err == nil {
				unix.Close(got)
			}
			say(fmt.Sprintf("pidfd_getfd %d", fd), err)
		}
		unix.Close(pidfd)
	}
	say("ptrace", unix.PtraceSeize(pid))
	f, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err == nil {
		f.Close()
	}
	say("/proc/pid/mem", err)
	return res
}

// stealMain tries takeOver on ATTACK_PID's descriptors ATTACK_FDS and prints what each gave, as JSON.
func stealMain() int {
	runtime.LockOSThread() // ptrace is per thread
	pid, _ := strconv.Atoi(os.Getenv("ATTACK_PID"))
	var fds []int
	for _, s := range strings.Split(os.Getenv("ATTACK_FDS"), ",") {
		if n, err := strconv.Atoi(s); err == nil {
			fds = append(fds, n)
		}
	}
	_ = json.NewEncoder(os.Stdout).Encode(takeOver(pid, fds))
	return 0
}

// raceMain watches, for ATTACK_SECS, for every worker process whose command
// line names ATTACK_STATE, and tries takeOver on each as soon as it appears,
// again and again; it prints the pids seen and every try that succeeded.
func raceMain() int {
	runtime.LockOSThread()
	secs, _ := strconv.Atoi(os.Getenv("ATTACK_SECS"))
	state := "\x00" + os.Getenv("ATTACK_STATE") + "/"
	fmt.Println("ready")
	seen := map[int]bool{}
	var won []string
	tries := 0
	for end := time.Now().Add(time.Duration(secs) * time.Second); time.Now().Before(end); {
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == os.Getpid() {
				continue
			}
			cl, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			if err != nil || !strings.HasPrefix(string(cl), "cairn-worker\x00") || !strings.Contains(string(cl), state) {
				continue
			}
			seen[pid] = true
			tries++
			for what, got := range takeOver(pid, []int{0, 1, 2, 3, 4, 5, 6, 7, 8}) {
				// A worker's child (a git it starts) reads as the worker
				// until its exec, after which it is an ordinary process of
				// the user's: a win is the worker's only if it still is.
				if now, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); got == "ok" && err == nil && string(now) == string(cl) {
					won = append(won, fmt.Sprintf("%s of pid %d", what, pid))
				}
			}
		}
	}
	_ = json.NewEncoder(os.Stdout).Encode(map[string]any{"pids": len(seen), "tries": tries, "won": won})
	return 0
}

// fdLinks lists a process's descriptors: number to what they point at.
func fdLinks(t *testing.T, pid int) map[int]string {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]string{}
	for _, e := range ents {
		n, _ := strconv.Atoi(e.Name())
		if l, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil {
			out[n] = l
		}
	}
	return out
}

// readOnlyPublic answers whether pid's descriptor fd (a path) is open
// read-only on a file anyone may read.
func readOnlyPublic(t *testing.T, pid, fd int, path string) bool {
	t.Helper()
	info, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%d", pid, fd))
	if err != nil {
		return false
	}
	var flags int64 = -1
	for _, l := range strings.Split(string(info), "\n") {
		if v, ok := strings.CutPrefix(l, "flags:"); ok {
			flags, _ = strconv.ParseInt(strings.TrimSpace(v), 8, 64)
		}
	}
	fi, err := os.Stat(path)
	return err == nil && flags >= 0 && flags&syscall.O_ACCMODE == syscall.O_RDONLY && fi.Mode().Perm()&0o004 != 0
}

// TestSecurityWorkerGivesNothing: a worker is no process its user may take
// over. As the user: pidfd_getfd on its socket and stderr, a ptrace attach,
// reading its memory are refused, in its steady state and in a loop racing
// each restart the user can cause (they may kill their own worker). It
// holds no descriptor of root's: its stdout and stderr are a pipe its
// supervisor reads, and every line of it reaches root's log nested under
// the worker's uid, never as a line of root's.
func TestSecurityWorkerGivesNothing(t *testing.T) {
	alice := newUser(t)
	base := openBase(t)
	ws := filepath.Join(base, "alice-ws")
	ownedDir(t, alice, ws, map[string]string{"a.txt": "a\n"})
	state := filepath.Join(base, "state")
	d := startDaemon(t, state, "--watch", ws)
	waitWatching(t, d, ws)
	workerPID := func() int {
		for _, w := range d.status().Workers {
			if int(w.UID) == alice.uid && w.State == "running" {
				return w.PID
			}
		}
		return 0
	}
	pid := workerPID()
	if pid == 0 {
		t.Fatal("no worker for alice")
	}

	t.Run("not dumpable", func(t *testing.T) {
		// What /proc shows of a process that is not dumpable is root's.
		var st syscall.Stat_t
		if err := syscall.Stat(fmt.Sprintf("/proc/%d/fd", pid), &st); err != nil {
			t.Fatal(err)
		}
		if st.Uid != 0 {
			t.Errorf("/proc/%d/fd is owned by %d: the worker is dumpable", pid, st.Uid)
		}
		var fds []string
		for n, l := range fdLinks(t, pid) {
			if n <= 2 || strings.HasPrefix(l, "socket:") {
				fds = append(fds, strconv.Itoa(n))
			}
		}
		cmd := asUser(alice, attacker(t), "-test.run=^$")
		cmd.Env = append(cmd.Env, "CAIRN_TEST_ATTACK=steal", "ATTACK_PID="+strconv.Itoa(pid), "ATTACK_FDS="+strings.Join(fds, ","))
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("attacker: %v %s", err, out)
		}
		var res map[string]string
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatalf("attacker said %q", out)
		}
		if len(res) < 3 {
			t.Fatalf("attacker tried too little: %v", res)
		}
		for what, got := range res {
			switch {
			case got == "ok":
				t.Errorf("alice took her worker over: %s worked", what)
			case what == "pidfd_open":
				t.Errorf("pidfd_open: %s", got) // open to anyone; what it gives is the question
			case !strings.Contains(got, "not permitted") && !strings.Contains(got, "permission denied"):
				t.Errorf("%s: %s, want EPERM or EACCES", what, got)
			}
		}
	})

	t.Run("no descriptor of root's", func(t *testing.T) {
		wl, dl := fdLinks(t, pid), fdLinks(t, d.cmd.Process.Pid)
		held := map[string]bool{}
		for _, l := range dl {
			held[l] = true
		}
		logPipe := wl[2]
		if !strings.HasPrefix(logPipe, "pipe:") || wl[1] != logPipe || !held[logPipe] {
			t.Errorf("worker's stdout %q and stderr %q: want one pipe the supervisor holds", wl[1], wl[2])
		}
		defer func() {
			if t.Failed() {
				t.Logf("worker's descriptors: %v\nsupervisor's: %v", wl, dl)
			}
		}()
		if logPipe == dl[2] {
			t.Errorf("the worker writes to root's own stderr %s", dl[2])
		}
		own := []string{filepath.Join(state, "users", strconv.Itoa(alice.uid)), ws}
		for n, l := range wl {
			switch {
			case l == logPipe, l == "/dev/null", strings.HasPrefix(l, "anon_inode:"):
			case strings.HasPrefix(l, "pipe:"), strings.HasPrefix(l, "socket:"):
				if held[l] {
					t.Errorf("worker fd %d is %s, which the supervisor holds too", n, l)
				}
			case slices.ContainsFunc(own, func(p string) bool { return l == p || strings.HasPrefix(l, p+"/") }):
			case !readOnlyPublic(t, pid, n, l):
				// Its Go runtime's cgroup files (opened before it took
				// its owner's ids) are read-only and readable by anyone.
				t.Errorf("worker fd %d is %s: none of its own, and not a read-only one of a file anyone may read", n, l)
			}
		}
	})

	t.Run("log nested", func(t *testing.T) {
		nested := false
		sc := bufio.NewScanner(strings.NewReader(d.log.String()))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var l struct {
				Message string          `json:"message"`
				UID     *int            `json:"worker_uid"`
				Worker  json.RawMessage `json:"worker"`
			}
			if json.Unmarshal(sc.Bytes(), &l) != nil {
				continue
			}
			if l.Message == "cairn worker started" {
				t.Errorf("a worker's line in root's log as root's own: %s", sc.Text())
			}
			if l.UID != nil && *l.UID == alice.uid && strings.Contains(string(l.Worker), "cairn worker started") {
				nested = true
			}
		}
		if !nested {
			t.Error("the worker's start is not in root's log, nested under its uid")
		}
	})

	t.Run("race at restart", func(t *testing.T) {
		cmd := asUser(alice, attacker(t), "-test.run=^$")
		cmd.Env = append(cmd.Env, "CAIRN_TEST_ATTACK=race", "ATTACK_SECS=9", "ATTACK_STATE="+state)
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		rd := bufio.NewReader(out)
		if l, err := rd.ReadString('\n'); err != nil || strings.TrimSpace(l) != "ready" {
			t.Fatalf("attacker: %q %v", l, err)
		}
		// Two restarts (the user may kill their own worker: it is theirs).
		for range 2 {
			old := workerPID()
			if old != 0 {
				if err := asUser(alice, "kill", "-KILL", strconv.Itoa(old)).Run(); err != nil {
					t.Fatalf("alice kills her worker: %v", err)
				}
			}
			waitFor(t, 30*time.Second, "alice's worker restarted", func() bool {
				p := workerPID()
				return p != 0 && p != old
			})
		}
		var res struct {
			Pids, Tries int
			Won         []string
		}
		if err := json.NewDecoder(rd).Decode(&res); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		if len(res.Won) > 0 {
			t.Errorf("alice took over her worker while racing its start: %v", res.Won)
		}
		if res.Pids < 2 {
			t.Errorf("the attacker saw %d worker processes (%d tries), want the restarted ones too", res.Pids, res.Tries)
		}
		t.Logf("attacker: %d worker processes seen, %d tries", res.Pids, res.Tries)
	})
}
