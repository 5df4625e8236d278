package agent_test

import (
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/replicate"
	"github.com/cairn-dev/cairn/platform/testsupport"
)

// Fleet replication against real git servers: a bare repository over
// file://, and `git daemon --enable=receive-pack` on 127.0.0.1.

// gitServer is a `git daemon` serving the bare repositories under base.
type gitServer struct {
	t    *testing.T
	base string
	port int
	args []string
	cmd  *exec.Cmd
	done chan struct{}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startGitServer starts git daemon on a free port; receivePack enables pushes.
func startGitServer(t *testing.T, base string, receivePack bool) *gitServer {
	t.Helper()
	s := &gitServer{t: t, base: base, port: freePort(t)}
	s.args = []string{"daemon", "--export-all", "--reuseaddr", "--informative-errors", "--base-path=" + base,
		"--listen=127.0.0.1", "--port=" + strconv.Itoa(s.port)}
	if receivePack {
		s.args = append(s.args, "--enable=receive-pack")
	}
	s.start()
	t.Cleanup(s.stop)
	return s
}

func (s *gitServer) start() {
	s.t.Helper()
	s.cmd = exec.Command("git", s.args...)
	s.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + s.base, "GIT_CONFIG_NOSYSTEM=1", "LC_ALL=C"}
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its per-connection children die with it
	s.done = make(chan struct{})
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	go func() { s.cmd.Wait(); close(s.done) }()
	waitFor(s.t, 10*time.Second, "git daemon listens", func() bool {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", s.port))
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

// stop kills the daemon and its children (kill -9).
func (s *gitServer) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	select {
	case <-s.done:
		return
	default:
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.done
}

func (s *gitServer) url(repo string) string {
	return fmt.Sprintf("git://127.0.0.1:%d/%s", s.port, repo)
}

// bareRepo makes an empty bare repository under dir.
func bareRepo(t *testing.T, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if out, err := exec.Command("git", "init", "-q", "--bare", p).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v: %s", err, out)
	}
	return p
}

// replConfig is a daemon config that replicates every workspace.
func replConfig(t *testing.T, remote, host, interval string, extra string) string {
	t.Helper()
	if extra == "" {
		extra = "autosave = true"
	}
	return configFile(t, fmt.Sprintf("[defaults]\nautosave_quiet = \"100ms\"\nautosave_max_wait = \"1s\"\n%s\n"+
		"[defaults.replicate]\nremote = %q\nhost = %q\ninterval = %q\n", extra, remote, host, interval))
}

// lsRemote lists a remote's refs under prefix.
func lsRemote(t *testing.T, remote, prefix string) map[string]string {
	t.Helper()
	cmd := exec.Command("git", "ls-remote", remote, prefix+"*")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "GIT_CONFIG_NOSYSTEM=1", "LC_ALL=C"}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ls-remote %s: %v", remote, err)
	}
	refs := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if sha, ref, ok := strings.Cut(l, "\t"); ok {
			refs[ref] = sha
		}
	}
	return refs
}

// replicatedRefs are a store's refs as they should appear on the remote.
func replicatedRefs(t *testing.T, gitDir, host, key string) map[string]string {
	t.Helper()
	out := git(t, gitDir, "for-each-ref", "--format=%(objectname) %(refname)", "refs/heads/", "refs/cairn/")
	refs := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if sha, name, ok := strings.Cut(l, " "); ok {
			if r, ok := replicate.RemoteRef(host, key, name); ok {
				refs[r] = sha
			}
		}
	}
	return refs
}

// arrived reports whether the remote holds exactly the store's refs, plus the manifest.
func arrived(t *testing.T, remote, gitDir, host, key string) (bool, string) {
	want := replicatedRefs(t, gitDir, host, key)
	got := lsRemote(t, remote, replicate.Base(host, key))
	if _, ok := got[replicate.ManifestRef(host, key)]; !ok {
		return false, "no manifest"
	}
	delete(got, replicate.ManifestRef(host, key))
	if len(got) != len(want) {
		return false, fmt.Sprintf("%d refs on the remote, %d in the store", len(got), len(want))
	}
	for r, sha := range want {
		if got[r] != sha {
			return false, fmt.Sprintf("%s: remote %q, store %s", r, got[r], sha)
		}
	}
	return true, ""
}

func replOf(t *testing.T, d *daemon, dir string) *api.ReplicationStatus {
	t.Helper()
	w, ok := d.workspace(dir)
	if !ok {
		return nil
	}
	return w.Replication
}

// replWorkspace makes a workspace with a few files.
func replWorkspace(t *testing.T, name string, files int) string {
	t.Helper()
	ws := filepath.Join(t.TempDir(), name)
	for i := range files {
		write(t, filepath.Join(ws, fmt.Sprintf("src/f%03d.txt", i)), fmt.Sprintf("%s file %d\n", name, i))
	}
	real, err := filepath.EvalSymlinks(ws)
	if err != nil {
		t.Fatal(err)
	}
	return real
}

// storeOf waits for the workspace's store and returns its GIT_DIR.
func storeOf(t *testing.T, d *daemon, dir string) string {
	t.Helper()
	var gitDir string
	waitFor(t, 30*time.Second, "the workspace's store", func() bool {
		w, ok := d.workspace(dir)
		gitDir = w.Store
		return ok && w.Store != ""
	})
	return gitDir
}

// waitArrived waits until the remote holds every ref of the store and the
// status shows no lag.
func waitArrived(t *testing.T, d *daemon, dir, remote, gitDir, host string) {
	t.Helper()
	key := replicate.Key(dir)
	why := ""
	if !testsupport.Poll(60*time.Second, func() bool {
		r := replOf(t, d, dir)
		if r == nil || r.LagCheckpoints != 0 || r.State != "idle" {
			why = fmt.Sprintf("status %+v", r)
			return false
		}
		ok, w := arrived(t, remote, gitDir, host, key)
		why = w
		return ok
	}) {
		t.Fatalf("timed out waiting for every ref on the remote: %s", why)
	}
}

// TestReplicateTwoHosts: two daemons (two hosts) push concurrently into one
// git daemon remote; every ref of both arrives, each under its host.
func TestReplicateTwoHosts(t *testing.T) {
	srv := t.TempDir()
	bareRepo(t, srv, "fleet.git")
	gs := startGitServer(t, srv, true)
	remote := gs.url("fleet.git")
	type host struct {
		name, ws string
		d        *daemon
		gitDir   string
	}
	hosts := []*host{{name: "alpha"}, {name: "beta"}}
	for _, h := range hosts {
		h.ws = replWorkspace(t, "ws-"+h.name, 20)
		h.d = startDaemon(t, "", "--config", replConfig(t, remote, h.name, "200ms", ""), "--watch", h.ws)
	}
	for _, h := range hosts {
		h.gitDir = storeOf(t, h.d, h.ws)
	}
	// Both write and checkpoint at once: autosaves, manual and lifecycle checkpoints.
	var wg sync.WaitGroup
	for _, h := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 6 {
				write(t, filepath.Join(h.ws, fmt.Sprintf("src/new%d.txt", i)), h.name+strconv.Itoa(i))
				args := []string{"checkpoint", h.ws, "--socket", h.d.socket, "--label", "round " + strconv.Itoa(i)}
				if i%2 == 1 {
					args = append(args, "--status", "completed", "--codon", "c"+strconv.Itoa(i), "--run", "r1")
				}
				if out, err := runCairn(t, args...); err != nil {
					t.Errorf("%s: cairn checkpoint: %v: %s", h.name, err, out)
				}
				time.Sleep(150 * time.Millisecond) // not a wait: paces the checkpoints so that autosaves come in between
			}
		}()
	}
	wg.Wait()
	for _, h := range hosts {
		waitArrived(t, h.d, h.ws, remote, h.gitDir, h.name)
	}
	// Each host wrote under its own prefix only.
	all := lsRemote(t, remote, replicate.Prefix)
	for ref := range all {
		if !strings.HasPrefix(ref, replicate.Prefix+"alpha/") && !strings.HasPrefix(ref, replicate.Prefix+"beta/") {
			t.Errorf("unexpected ref %s", ref)
		}
	}
	for _, h := range hosts {
		if n := len(replicatedRefs(t, h.gitDir, h.name, replicate.Key(h.ws))); n < 6 {
			t.Errorf("%s: only %d refs", h.name, n)
		}
		r := replOf(t, h.d, h.ws)
		if r.Remote != remote || r.Host != h.name || r.LastPushed == "" || r.LastError != "" {
			t.Errorf("%s: status %+v", h.name, r)
		}
	}
}

// descendants lists the processes below pid (children first found first).
func descendants(pid int) []int {
	parent := map[int]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 2 {
			pp, _ := strconv.Atoi(f[1])
			parent[p] = pp
		}
	}
	var out []int
	frontier := []int{pid}
	for len(frontier) > 0 {
		cur := frontier[0]
		frontier = frontier[1:]
		for p, pp := range parent {
			if pp == cur {
				out = append(out, p)
				frontier = append(frontier, p)
			}
		}
	}
	return out
}

func cmdline(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.ReplaceAll(string(b), "\x00", " ")
}

// TestReplicateKilledPush: the daemon and its push are killed with SIGKILL
// in the middle of a large first push; the remote stays consistent (git
// fsck) and the next daemon's push completes.
func TestReplicateKilledPush(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc to find the push")
	}
	remoteDir := bareRepo(t, t.TempDir(), "fleet.git")
	remote := "file://" + remoteDir
	ws := filepath.Join(t.TempDir(), "big")
	buf := make([]byte, 16<<10)
	for i := range 2500 {
		rand.Read(buf)
		p := filepath.Join(ws, fmt.Sprintf("d%02d/f%04d.bin", i%50, i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, buf, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ws, _ = filepath.EvalSymlinks(ws)
	state := t.TempDir()
	cfg := replConfig(t, remote, "victim", "200ms", "")
	d := startDaemon(t, state, "--config", cfg, "--watch", ws)
	killed := false
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) && !killed {
		for _, p := range descendants(d.cmd.Process.Pid) {
			if c := cmdline(p); strings.Contains(c, "pack-objects") || strings.Contains(c, "receive-pack") || strings.Contains(c, "unpack-objects") || strings.Contains(c, "index-pack") {
				time.Sleep(50 * time.Millisecond) // not a wait: the kill lands well inside the transfer
				procs := descendants(d.cmd.Process.Pid)
				_ = syscall.Kill(d.cmd.Process.Pid, syscall.SIGKILL)
				for _, q := range procs {
					_ = syscall.Kill(q, syscall.SIGKILL)
				}
				<-d.exited
				killed = true
				t.Logf("killed the daemon and %d processes of its push (%s)", len(procs), c)
				break
			}
		}
		// Not testsupport.Poll: a push's processes live briefly, so the
		// scan looks every 5 ms rather than ever less often.
		time.Sleep(5 * time.Millisecond)
	}
	if !killed {
		t.Fatalf("never saw the first push under way")
	}
	// The remote is consistent after the kill.
	if out, err := exec.Command("git", "--git-dir", remoteDir, "fsck", "--no-dangling").CombinedOutput(); err != nil {
		t.Fatalf("git fsck after the kill: %v\n%s", err, out)
	}
	d2 := startDaemon(t, state, "--config", cfg, "--watch", ws)
	gitDir := storeOf(t, d2, ws)
	waitArrived(t, d2, ws, remote, gitDir, "victim")
	if out, err := exec.Command("git", "--git-dir", remoteDir, "fsck", "--no-dangling").CombinedOutput(); err != nil {
		t.Fatalf("git fsck after the next push: %v\n%s", err, out)
	}
	// Every pushed commit is whole on the remote: its tree checks out.
	key := replicate.Key(ws)
	for ref := range lsRemote(t, remote, replicate.Base("victim", key)) {
		if out, err := exec.Command("git", "--git-dir", remoteDir, "rev-list", "--objects", "--missing=print", ref).Output(); err != nil || strings.Contains(string(out), "\n?") {
			t.Errorf("%s: objects missing on the remote (%v)", ref, err)
		}
	}
}

// TestReplicateOutage: the git daemon is stopped while checkpoints are
// made, then started again on the same port: the backlog goes in one push.
func TestReplicateOutage(t *testing.T) {
	srv := t.TempDir()
	bareRepo(t, srv, "fleet.git")
	gs := startGitServer(t, srv, true)
	remote := gs.url("fleet.git")
	ws := replWorkspace(t, "outage", 10)
	d := startDaemon(t, "", "--config", replConfig(t, remote, "h1", "200ms", "autosave = false"), "--watch", ws)
	gitDir := storeOf(t, d, ws)
	waitArrived(t, d, ws, remote, gitDir, "h1")

	gs.stop()
	for i := range 5 {
		write(t, filepath.Join(ws, "src/f000.txt"), "offline "+strconv.Itoa(i))
		args := []string{"checkpoint", ws, "--socket", d.socket, "--label", "offline " + strconv.Itoa(i)}
		if i == 2 {
			args = append(args, "--status", "completed", "--codon", "c1", "--run", "r1")
		}
		if out, err := runCairn(t, args...); err != nil {
			t.Fatalf("cairn checkpoint while offline: %v: %s", err, out)
		}
	}
	var before *api.ReplicationStatus
	waitFor(t, 30*time.Second, "the push fails while the remote is down", func() bool {
		before = replOf(t, d, ws)
		return before != nil && before.State == "failing" && before.LagCheckpoints == 5 && before.Failures >= 1 && before.LastError != ""
	})
	if !strings.Contains(d.log.String(), "replication push failed") {
		t.Errorf("no log line for the failed push")
	}
	t.Logf("while down: %+v", before)
	gs.start()
	waitArrived(t, d, ws, remote, gitDir, "h1")
	after := replOf(t, d, ws)
	if after.Pushes != before.Pushes+1 {
		t.Errorf("the backlog took %d pushes, want 1 (before %+v, after %+v)", after.Pushes-before.Pushes, before, after)
	}
	if after.LastError != "" || !after.NextRetry.IsZero() {
		t.Errorf("status after the outage: %+v", after)
	}
}

// TestReplicateRefused: remotes that refuse (a wrong URL, a git daemon
// without receive-pack, a server hook that declines every push): a clear
// error in status and the log, local checkpoints go on, attempts back off.
func TestReplicateRefused(t *testing.T) {
	srv := t.TempDir()
	bareRepo(t, srv, "ro.git")
	hooked := bareRepo(t, srv, "hooked.git")
	write(t, filepath.Join(hooked, "hooks", "pre-receive"), "#!/bin/sh\necho 'this mirror is read-only' >&2\nexit 1\n")
	if err := os.Chmod(filepath.Join(hooked, "hooks", "pre-receive"), 0o755); err != nil {
		t.Fatal(err)
	}
	ro := startGitServer(t, srv, false)
	rw := startGitServer(t, srv, true)
	for _, tc := range []struct {
		name, remote, want string
	}{
		{"wrong URL", "file://" + filepath.Join(srv, "nowhere.git"), "does not appear to be a git repository"},
		{"no receive-pack", ro.url("ro.git"), "service not enabled"},
		{"hook declines", rw.url("hooked.git"), "pre-receive hook declined"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := replWorkspace(t, "refused", 5)
			d := startDaemon(t, "", "--config", replConfig(t, tc.remote, "h1", "100ms", ""), "--watch", ws)
			storeOf(t, d, ws)
			var r *api.ReplicationStatus
			waitFor(t, 30*time.Second, "a failing replication", func() bool {
				r = replOf(t, d, ws)
				return r != nil && r.State == "failing" && r.LastError != ""
			})
			if !strings.Contains(r.LastError, tc.want) {
				t.Errorf("last error %q does not say %q", r.LastError, tc.want)
			}
			if r.NextRetry.IsZero() {
				t.Errorf("no next retry in %+v", r)
			}
			// Local checkpoints are unaffected.
			if out, err := runCairn(t, "checkpoint", ws, "--socket", d.socket, "--label", "still sealing"); err != nil {
				t.Fatalf("cairn checkpoint: %v: %s", err, out)
			}
			// Back off: over 5 more seconds, a handful of attempts (1s, 2s, 4s…), no busy loop.
			first := r.Failures
			time.Sleep(5 * time.Second) // not a wait: the window the attempts are counted over
			r = replOf(t, d, ws)
			if n := r.Failures - first; n > 4 {
				t.Errorf("%d attempts in 5 s: not backing off", n)
			}
			if r.LagCheckpoints < 2 {
				t.Errorf("lag %d checkpoints, want the baseline and the manual one", r.LagCheckpoints)
			}
			if !strings.Contains(d.log.String(), "replication push failed") || !strings.Contains(d.log.String(), tc.want) {
				t.Errorf("the log does not say why the push failed")
			}
			out, _ := runCairn(t, "status", "--socket", d.socket)
			if !strings.Contains(out, "replication error:") {
				t.Errorf("cairn status does not show the error:\n%s", out)
			}
		})
	}
}

// TestReplicateLifecycleAtOnce: with interval = 1h, a manual checkpoint
// waits, and a lifecycle checkpoint is pushed at once, with it.
func TestReplicateLifecycleAtOnce(t *testing.T) {
	remote := "file://" + bareRepo(t, t.TempDir(), "fleet.git")
	ws := replWorkspace(t, "lifecycle", 5)
	d := startDaemon(t, "", "--config", replConfig(t, remote, "h1", "1h", "autosave = false"), "--watch", ws)
	gitDir := storeOf(t, d, ws)
	waitArrived(t, d, ws, remote, gitDir, "h1") // the first sync at start
	key := replicate.Key(ws)

	write(t, filepath.Join(ws, "src/f000.txt"), "manual")
	if out, err := runCairn(t, "checkpoint", ws, "--socket", d.socket, "--label", "by hand"); err != nil {
		t.Fatalf("cairn checkpoint: %v: %s", err, out)
	}
	waitFor(t, 10*time.Second, "the manual checkpoint counted as lag", func() bool {
		r := replOf(t, d, ws)
		return r != nil && r.LagCheckpoints == 1
	})
	if ok, _ := arrived(t, remote, gitDir, "h1", key); ok {
		t.Fatalf("a manual checkpoint was pushed before the interval")
	}
	write(t, filepath.Join(ws, "src/f001.txt"), "lifecycle")
	if out, err := runCairn(t, "checkpoint", ws, "--socket", d.socket, "--status", "completed", "--codon", "c1", "--run", "r9"); err != nil {
		t.Fatalf("cairn checkpoint: %v: %s", err, out)
	}
	waitArrived(t, d, ws, remote, gitDir, "h1")
	if _, ok := lsRemote(t, remote, replicate.Base("h1", key))[replicate.Base("h1", key)+"heads/run-r9"]; !ok {
		t.Errorf("run branch not on the remote")
	}
}
