//go:build linux

package agent_test

// Tests written as a local attacker would try the root daemon: an ordinary
// account (made by the test) that owns one watched workspace and nothing
// else. Each needs root and useradd; CI runs as root.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"math/rand"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/hankweave/hwsim"
	"github.com/cairn-dev/cairn/agent/hankweave/hwsim/hwsimtest"
)

// testUser is an unprivileged account made for one test.
type testUser struct {
	name     string
	uid, gid int
}

// newUser makes an account (removed when the test ends); it skips the test
// where that cannot be done.
func newUser(t testing.TB) testUser {
	t.Helper()
	name := fmt.Sprintf("cairnt%d", rand.Intn(100_000_000))
	makeAccount(t, "useradd", "userdel", name, "-M", "-N", "-s", "/usr/sbin/nologin")
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return testUser{name: name, uid: uid, gid: gid}
}

// newGroup makes a group (removed when the test ends) with members; it skips
// the test where that cannot be done.
func newGroup(t testing.TB, members ...testUser) (name string, gid int) {
	t.Helper()
	name = fmt.Sprintf("cairng%d", rand.Intn(100_000_000))
	makeAccount(t, "groupadd", "groupdel", name)
	for _, m := range members {
		if out, err := exec.Command("gpasswd", "-a", m.name, name).CombinedOutput(); err != nil {
			t.Fatalf("gpasswd: %v: %s", err, out)
		}
	}
	g, err := user.LookupGroup(name)
	if err != nil {
		t.Fatal(err)
	}
	gid, _ = strconv.Atoi(g.Gid)
	return name, gid
}

// makeAccount runs add (useradd, groupadd) for name, and del when the test
// ends; it skips the test when not root or when add is missing or fails.
func makeAccount(t testing.TB, add, del, name string, args ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	if _, err := exec.LookPath(add); err != nil {
		t.Skip("no " + add)
	}
	if out, err := exec.Command(add, append(args, name)...).CombinedOutput(); err != nil {
		t.Skipf("%s: %v: %s", add, err, out)
	}
	t.Cleanup(func() { _ = exec.Command(del, name).Run() })
}

// exchangeLoop swaps a and b (renameat2 RENAME_EXCHANGE) in a loop, as a
// user racing the daemon would, until the returned stop is called; stop
// returns once the loop has ended.
func exchangeLoop(a, b string) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			_ = unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
		}
	}()
	return func() { close(done); wg.Wait() }
}

// openBase is a folder every user may enter (t.TempDir's parents are
// root's 0700), removed when the test ends.
func openBase(t testing.TB) string {
	t.Helper()
	base, err := os.MkdirTemp("", "cairn-sec-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	return base
}

// ownedDir makes dir (and a file in it) belonging to u.
func ownedDir(t testing.TB, u testUser, dir string, files map[string]string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		write(t, filepath.Join(dir, name), body)
	}
	chownTree(t, dir, u)
}

func chownTree(t testing.TB, dir string, u testUser) {
	t.Helper()
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil {
			_ = os.Lchown(p, u.uid, u.gid)
		}
		return nil
	})
}

// rootOnly makes a folder only root may enter, holding one secret file.
func rootOnly(t *testing.T, dir, name, secret string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

var (
	attackerOnce sync.Once
	attackerPath string
)

// attacker is this test binary, copied where any user may run it; started
// with CAIRN_TEST_ATTACK it acts as a client of the daemon (attackerMain).
func attacker(t *testing.T) string {
	t.Helper()
	attackerOnce.Do(func() {
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(self)
		if err != nil {
			t.Fatal(err)
		}
		attackerPath = filepath.Join(filepath.Dir(cairnBin), "attacker.test")
		if err := os.WriteFile(attackerPath, b, 0o755); err != nil {
			t.Fatal(err)
		}
	})
	return attackerPath
}

// asUser is a command that runs as u.
func asUser(u testUser, name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(u.uid), Gid: uint32(u.gid)}}
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=/"}
	return cmd
}

// httpAs sends one request to the daemon as u and returns the status and body.
func httpAs(t *testing.T, u testUser, sock, method, path string, body any) (int, []byte) {
	t.Helper()
	raw := []byte{}
	if body != nil {
		raw, _ = json.Marshal(body)
	}
	cmd := asUser(u, attacker(t), "-test.run=^$")
	cmd.Env = append(cmd.Env, "CAIRN_TEST_ATTACK=http", "ATTACK_SOCK="+sock, "ATTACK_METHOD="+method,
		"ATTACK_PATH="+path, "ATTACK_BODY="+string(raw))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("request as %s: %v", u.name, err)
	}
	code, rest, _ := bytes.Cut(out, []byte("\n"))
	n, _ := strconv.Atoi(string(code))
	return n, rest
}

// attackerMain is what the copied test binary does when started as an attacker.
func attackerMain() int {
	sock := os.Getenv("ATTACK_SOCK")
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}
	switch os.Getenv("CAIRN_TEST_ATTACK") {
	case "http":
		c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: dial}}
		var body io.Reader
		if b := os.Getenv("ATTACK_BODY"); b != "" {
			body = strings.NewReader(b)
		}
		req, _ := http.NewRequest(os.Getenv("ATTACK_METHOD"), "http://cairn"+os.Getenv("ATTACK_PATH"), body)
		req.Header.Set(api.VersionHeader, api.Version)
		resp, err := c.Do(req)
		if err != nil {
			fmt.Printf("0\n%v", err)
			return 0
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		fmt.Printf("%d\n%s", resp.StatusCode, b)
		return 0
	case "conns":
		n, _ := strconv.Atoi(os.Getenv("ATTACK_N"))
		var conns []net.Conn
		deadline := time.Now().Add(60 * time.Second)
		for len(conns) < n && time.Now().Before(deadline) {
			c, err := net.DialTimeout("unix", sock, time.Second)
			if err != nil {
				continue
			}
			conns = append(conns, c)
		}
		fmt.Printf("ready %d\n", len(conns))
		_, _ = io.Copy(io.Discard, os.Stdin) // hold them until told to stop
		return 0
	case "events":
		// Print the first event within ATTACK_WAIT, or "none".
		wait, _ := time.ParseDuration(os.Getenv("ATTACK_WAIT"))
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		c := &http.Client{Transport: &http.Transport{DialContext: dial}}
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://cairn/v1/events", nil)
		resp, err := c.Do(req)
		if err != nil {
			fmt.Println("error", err)
			return 1
		}
		defer resp.Body.Close()
		fmt.Println("subscribed")
		sc := bufio.NewScanner(resp.Body)
		if sc.Scan() {
			fmt.Println(sc.Text())
			return 0
		}
		fmt.Println("none")
		return 0
	case "read":
		if _, err := os.ReadFile(os.Getenv("ATTACK_PATH")); err != nil {
			fmt.Print(err)
			return 1
		}
		return 0
	}
	return 2
}

// eventsAs subscribes to the event stream as u and delivers the first event
// (or "none" when wait passes); it returns once subscribed.
func eventsAs(t *testing.T, u testUser, sock string, wait time.Duration) <-chan string {
	t.Helper()
	cmd := asUser(u, attacker(t), "-test.run=^$")
	cmd.Env = append(cmd.Env, "CAIRN_TEST_ATTACK=events", "ATTACK_SOCK="+sock, "ATTACK_WAIT="+wait.String())
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(out)
	if l, err := rd.ReadString('\n'); err != nil || strings.TrimSpace(l) != "subscribed" {
		t.Fatalf("events as %s: %q %v", u.name, l, err)
	}
	ch := make(chan string, 1)
	go func() {
		l, _ := rd.ReadString('\n')
		_ = cmd.Wait()
		ch <- strings.TrimSpace(l)
	}()
	return ch
}

// statusAs is /v1/status as u sees it.
func statusAs(t *testing.T, u testUser, sock string) api.Status {
	t.Helper()
	code, body := httpAs(t, u, sock, "GET", "/v1/status", nil)
	if code != 200 {
		t.Fatalf("status as %s: %d %s", u.name, code, body)
	}
	var st api.Status
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// waitWatching waits until the daemon reports dir watched with a checkpoint.
func waitWatching(t testing.TB, d *daemon, dir string) {
	t.Helper()
	waitFor(t, 30*time.Second, dir+" watched with a baseline", func() bool {
		ws, ok := d.workspace(dir)
		return ok && ws.Last != "" && ws.State == "watching"
	})
}

// storesHolding lists the stores under roots whose history holds a path named name.
func storesHolding(t *testing.T, name string, roots ...string) []string {
	t.Helper()
	var hits []string
	for _, root := range roots {
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			if _, err := os.Stat(filepath.Join(p, "objects")); err != nil {
				return nil
			}
			if _, err := os.Stat(filepath.Join(p, "HEAD")); err != nil {
				return nil
			}
			cmd := exec.Command("git", "rev-list", "--all", "--objects")
			cmd.Env = []string{"GIT_DIR=" + p, "GIT_CONFIG_NOSYSTEM=1", "HOME=/", "PATH=" + os.Getenv("PATH")}
			out, _ := cmd.Output()
			for _, l := range strings.Split(string(out), "\n") {
				if strings.HasSuffix(l, "/"+name) || strings.HasSuffix(l, " "+name) {
					hits = append(hits, p)
					break
				}
			}
			return filepath.SkipDir
		})
	}
	return hits
}

// TestSecurityWorkerRunsAsOwner: a root daemon serves a user's workspace in a
// worker process running as that user, never as root; the user's own
// requests reach it, another user's status shows only their own.
func TestSecurityWorkerRunsAsOwner(t *testing.T) {
	alice, bob := newUser(t), newUser(t)
	base := openBase(t)
	wa, wb := filepath.Join(base, "alice-ws"), filepath.Join(base, "bob-ws")
	ownedDir(t, alice, wa, map[string]string{"a.txt": "alice's\n"})
	ownedDir(t, bob, wb, map[string]string{"b.txt": "bob's\n"})
	state := filepath.Join(base, "state")
	d := startDaemon(t, state, "--watch", wa, "--watch", wb)
	waitWatching(t, d, wa)
	waitWatching(t, d, wb)

	st := d.status()
	if len(st.Workers) != 2 {
		t.Fatalf("want 2 workers, got %+v", st.Workers)
	}
	for _, w := range st.Workers {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", w.PID))
		if err != nil {
			t.Fatalf("worker %d: %v", w.PID, err)
		}
		// Uid: real effective saved fs — every one the owner's; no capabilities.
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.Fields(l)
			switch {
			case len(f) == 5 && f[0] == "Uid:":
				for _, id := range f[1:] {
					if id != strconv.Itoa(int(w.UID)) {
						t.Errorf("worker %d runs with %s, want uid %d everywhere", w.PID, l, w.UID)
					}
				}
			case len(f) == 2 && (f[0] == "CapEff:" || f[0] == "CapPrm:"):
				if f[1] != "0000000000000000" {
					t.Errorf("worker %d keeps capabilities: %s", w.PID, l)
				}
			}
		}
	}

	// Each user sees only their own workspace, and nothing of the config.
	for _, c := range []struct {
		u    testUser
		own  string
		none string
	}{{alice, wa, wb}, {bob, wb, wa}} {
		got := statusAs(t, c.u, d.socket)
		if len(got.Workspaces) != 1 || got.Workspaces[0].Dir != c.own {
			t.Errorf("%s's status: %+v, want only %s", c.u.name, got.Workspaces, c.own)
		}
		if got.StateDir != "" || len(got.Roots) != 0 || len(got.Workers) != 0 {
			t.Errorf("%s's status shows the daemon's config: %+v", c.u.name, got)
		}
		// Acting on the other's workspace looks exactly like an unwatched one.
		code, body := httpAs(t, c.u, d.socket, "POST", "/v1/checkpoint", api.CheckpointRequest{Workspace: c.none})
		code2, body2 := httpAs(t, c.u, d.socket, "POST", "/v1/checkpoint", api.CheckpointRequest{Workspace: c.none + "-missing"})
		if code != 403 || code2 != 403 || strings.Replace(string(body2), "-missing", "", 1) != string(body) {
			t.Errorf("%s on another's workspace: %d %s; on a missing one: %d %s", c.u.name, code, body, code2, body2)
		}
		if code, body := httpAs(t, c.u, d.socket, "GET", "/v1/events?workspace="+c.none, nil); code != 403 {
			t.Errorf("%s's events of another's workspace: %d %s", c.u.name, code, body)
		}
		// Their own checkpoint works, through their worker.
		code, body = httpAs(t, c.u, d.socket, "POST", "/v1/checkpoint", api.CheckpointRequest{Workspace: c.own, Label: "mine"})
		if code != 200 {
			t.Errorf("%s's own checkpoint: %d %s", c.u.name, code, body)
		}
	}

	// Events from a worker reach root and the owner, never another user.
	evAlice, evBob := eventsAs(t, alice, d.socket, 10*time.Second), eventsAs(t, bob, d.socket, 4*time.Second)
	if code, body := httpAs(t, alice, d.socket, "POST", "/v1/checkpoint", api.CheckpointRequest{Workspace: wa, Label: "seen"}); code != 200 {
		t.Fatalf("alice's checkpoint: %d %s", code, body)
	}
	if got := <-evAlice; !strings.Contains(got, `"checkpoint.sealed"`) || !strings.Contains(got, wa) {
		t.Errorf("alice's event stream: %q", got)
	}
	if got := <-evBob; strings.Contains(got, wa) {
		t.Errorf("bob saw alice's event: %q", got)
	}

	// Plain-layout stores are private: the state directory cannot be listed,
	// each owner's folder is 0700 and theirs.
	for _, p := range []string{state, filepath.Join(state, "users")} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o066 != 0 {
			t.Errorf("%s is %v: others may list or write it", p, fi.Mode().Perm())
		}
	}
	for _, u := range []testUser{alice, bob} {
		p := filepath.Join(state, "users", strconv.Itoa(u.uid))
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		sys := fi.Sys().(*syscall.Stat_t)
		if fi.Mode().Perm() != 0o700 || int(sys.Uid) != u.uid {
			t.Errorf("%s: %v owned by %d, want 0700 owned by %d", p, fi.Mode().Perm(), sys.Uid, u.uid)
		}
	}
	out, err := exec.Command("find", filepath.Join(state, "users"), "-mindepth", "1", "-maxdepth", "1", "-perm", "/077").CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) != 0 {
		t.Errorf("owner folders open to others: %s %v", out, err)
	}
	// Bob cannot read a byte of alice's store.
	var ledgerPath string
	_ = filepath.WalkDir(filepath.Join(state, "users", strconv.Itoa(alice.uid)), func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == "ledger.jsonl" {
			ledgerPath = p
		}
		return nil
	})
	if ledgerPath == "" {
		t.Fatal("no ledger in alice's folder")
	}
	cmd := asUser(bob, attacker(t), "-test.run=^$")
	cmd.Env = append(cmd.Env, "CAIRN_TEST_ATTACK=read", "ATTACK_PATH="+ledgerPath)
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Errorf("bob read alice's ledger %s", ledgerPath)
	} else if !strings.Contains(string(out), "permission denied") {
		t.Errorf("bob reading alice's ledger: %v %s", err, out)
	}
}

// TestSecurityFolderSwappedForLink: a watched folder renamed away and
// replaced by a link to a root-only folder is released, never sealed; status
// says why.
func TestSecurityFolderSwappedForLink(t *testing.T) {
	alice := newUser(t)
	base := openBase(t)
	ws := filepath.Join(base, "ws")
	ownedDir(t, alice, ws, map[string]string{"a.txt": "a\n"})
	secretDir := filepath.Join(base, "rootonly")
	secret := rootOnly(t, secretDir, "root-secret.txt", "ROOT ONLY\n")
	state := filepath.Join(base, "state")
	d := startDaemon(t, state, "--watch", ws)
	waitWatching(t, d, ws)

	// As alice could: her folder away, a link in its place.
	if err := os.Rename(ws, ws+"-away"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secretDir, ws); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the linked workspace released and refused", func() bool {
		st := d.status()
		for _, w := range st.Workspaces {
			if w.Dir == ws {
				return false
			}
		}
		for _, r := range st.Refused {
			if r.Dir == ws && strings.Contains(r.Reason, "symbolic link") {
				return true
			}
		}
		return false
	})
	// Several more discovery passes: still never sealed, nothing of root's taken.
	for i := 0; i < 3; i++ {
		st := d.status()
		for _, w := range st.Workspaces {
			if w.Dir == ws {
				t.Fatalf("the link is watched again: %+v", w)
			}
		}
		// Not a wait: no status says a pass happened, so the test lets three go by.
		time.Sleep(2100 * time.Millisecond) // the 2 s discovery pass, observed three times
	}
	if hits := storesHolding(t, "root-secret.txt", state, base); len(hits) > 0 {
		t.Fatalf("root's file sealed into %v", hits)
	}
	// The link is refused over the socket too, and the secret is untouched.
	if code, body := call(t, d.socket, "POST", "/v1/watch", api.WorkspaceRequest{Workspace: ws}); code == 200 {
		t.Errorf("watching the link: %d %v", code, body)
	}
	if b, err := os.ReadFile(secret); err != nil || string(b) != "ROOT ONLY\n" {
		t.Errorf("secret: %q %v", b, err)
	}
}

// TestSecurityPathChecks: every endpoint checks workspace paths the same
// way, lexically, before anything is resolved.
func TestSecurityPathChecks(t *testing.T) {
	alice, bob := newUser(t), newUser(t)
	base := openBase(t)
	ws := filepath.Join(base, "ws")
	ownedDir(t, alice, ws, map[string]string{"a.txt": "a\n"})
	private := filepath.Join(base, "alice-private")
	ownedDir(t, alice, filepath.Join(private, "exists"), nil)
	if err := os.Chmod(private, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "ws-link")
	if err := os.Symlink(ws, link); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(base, "state")
	d := startDaemon(t, state, "--watch", ws)
	waitWatching(t, d, ws)

	for _, p := range []string{base + "/x/../ws", "/" + ws, ws + "/", "ws", ws + "/."} {
		for _, ep := range []struct{ method, path string }{{"POST", "/v1/checkpoint"}, {"POST", "/v1/restore"}, {"GET", "/v1/list?workspace="}, {"POST", "/v1/watch"}} {
			var body any
			path := ep.path
			if ep.method == "POST" {
				body = map[string]any{"workspace": p, "target": "c1"}
			} else {
				path += p
			}
			if code, out := call(t, d.socket, ep.method, path, body); code != 400 {
				t.Errorf("%s %s with %q: %d %v, want 400", ep.method, ep.path, p, code, out)
			}
		}
	}
	// A link to a watched workspace is not that workspace.
	if code, out := call(t, d.socket, "POST", "/v1/checkpoint", api.CheckpointRequest{Workspace: link}); code != 403 {
		t.Errorf("checkpoint through a link: %d %v", code, out)
	}
	// What exists in alice's 0700 folder is not told to bob.
	c1, b1 := httpAs(t, bob, d.socket, "POST", "/v1/watch", api.WorkspaceRequest{Workspace: filepath.Join(private, "exists")})
	c2, b2 := httpAs(t, bob, d.socket, "POST", "/v1/watch", api.WorkspaceRequest{Workspace: filepath.Join(private, "missing")})
	if c1 != c2 || strings.Replace(string(b2), "missing", "exists", 1) != string(b1) {
		t.Errorf("bob tells existing from missing: %d %s / %d %s", c1, b1, c2, b2)
	}
}

// TestSecurityConnectionFlood: one user holding thousands of connections
// does not keep another user (or root) from being served.
func TestSecurityConnectionFlood(t *testing.T) {
	alice, bob := newUser(t), newUser(t)
	base := openBase(t)
	wa := filepath.Join(base, "alice-ws")
	ownedDir(t, alice, wa, map[string]string{"a.txt": "a\n"})
	state := filepath.Join(base, "state")
	d := startDaemon(t, state, "--watch", wa)
	waitWatching(t, d, wa)

	var lim syscall.Rlimit
	_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	n := min(20000, int(lim.Max)-100)
	flood := asUser(bob, attacker(t), "-test.run=^$")
	flood.Env = append(flood.Env, "CAIRN_TEST_ATTACK=conns", "ATTACK_SOCK="+d.socket, "ATTACK_N="+strconv.Itoa(n))
	stdin, _ := flood.StdinPipe()
	stdout, _ := flood.StdoutPipe()
	if err := flood.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); _ = flood.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("bob: %s", strings.TrimSpace(line))

	// Alice and root are served while bob holds his connections.
	if st := statusAs(t, alice, d.socket); len(st.Workspaces) != 1 {
		t.Errorf("alice's status during the flood: %+v", st)
	}
	code, body := httpAs(t, alice, d.socket, "POST", "/v1/checkpoint", api.CheckpointRequest{Workspace: wa, Label: "during the flood"})
	if code != 200 {
		t.Errorf("alice's checkpoint during the flood: %d %s", code, body)
	}
	if _, ok := d.workspace(wa); !ok {
		t.Error("root's status lost the workspace during the flood")
	}
	if !strings.Contains(d.log.String(), "connection refused: this user holds the most connections allowed") {
		t.Error("the cap was never logged")
	}
}

// TestSecurityFIFOsAndHugeFiles: runtime files that are FIFOs, links to
// /dev/zero or 200 MB do not hang or exhaust the daemon; status answers for
// root and other users, another workspace still seals, SIGTERM stops it.
func TestSecurityFIFOsAndHugeFiles(t *testing.T) {
	alice, bob := newUser(t), newUser(t)
	base := openBase(t)
	hank := func(name string, setup func(hw string)) string {
		dir := filepath.Join(base, name)
		ownedDir(t, alice, filepath.Join(dir, "agentRoot"), map[string]string{"a.txt": "a\n"})
		if err := os.MkdirAll(filepath.Join(dir, ".hankweave", "events"), 0o755); err != nil {
			t.Fatal(err)
		}
		setup(filepath.Join(dir, ".hankweave"))
		chownTree(t, dir, alice)
		return dir
	}
	fifo := func(p string) {
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	wsFifoLock := hank("fifo-lock", func(hw string) { fifo(filepath.Join(hw, "runtime.lock")) })
	wsFifoState := hank("fifo-state", func(hw string) { fifo(filepath.Join(hw, "state.json")) })
	wsZero := hank("zero-state", func(hw string) {
		if err := os.Symlink("/dev/zero", filepath.Join(hw, "state.json")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("/dev/zero", filepath.Join(hw, "runtime.lock")); err != nil {
			t.Fatal(err)
		}
	})
	wsHuge := hank("huge-state", func(hw string) {
		f, err := os.Create(filepath.Join(hw, "state.json"))
		if err != nil {
			t.Fatal(err)
		}
		_ = f.Truncate(200 << 20) // sparse: cheap to make, 200 MB to read
		f.Close()
	})
	wb := filepath.Join(base, "bob-ws")
	ownedDir(t, bob, wb, map[string]string{"b.txt": "b\n"})
	state := filepath.Join(base, "state")
	d := startDaemon(t, state, "--watch", wsFifoLock, "--watch", wsFifoState, "--watch", wsZero, "--watch", wsHuge, "--watch", wb)
	waitWatching(t, d, wb)

	// Give the daemon time to read every runtime file a few times.
	deadline := time.Now().Add(6 * time.Second)
	for time.Now().Before(deadline) {
		for _, u := range []testUser{alice, bob} {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			start := time.Now()
			code, _ := httpAsCtx(ctx, t, u, d.socket)
			cancel()
			if code != 200 {
				t.Fatalf("status as %s did not answer within 5 s (%s): %d", u.name, time.Since(start), code)
			}
		}
		time.Sleep(500 * time.Millisecond) // not a wait: status is asked while the daemon reads, for 6 s
	}
	st := d.status()
	for _, w := range st.Workers {
		if peak := vmHWM(t, w.PID); peak > 150<<20 {
			t.Errorf("worker %d (uid %d) peaked at %d MiB", w.PID, w.UID, peak>>20)
		}
	}
	for _, dir := range []string{wsFifoLock, wsFifoState, wsZero, wsHuge} {
		ws, ok := d.workspace(dir)
		if !ok {
			t.Errorf("%s missing from status", dir)
			continue
		}
		t.Logf("%s: %s %s", filepath.Base(dir), ws.State, ws.Error)
	}
	code, body := httpAs(t, bob, d.socket, "POST", "/v1/checkpoint", api.CheckpointRequest{Workspace: wb, Label: "still served"})
	if code != 200 {
		t.Errorf("bob's checkpoint beside the broken workspaces: %d %s", code, body)
	}
	if took, code := d.stop(syscall.SIGTERM); code != 0 {
		t.Errorf("SIGTERM: exit %d after %s", code, took)
	}
}

// httpAsCtx is GET /v1/status as u, given up when ctx ends.
func httpAsCtx(ctx context.Context, t *testing.T, u testUser, sock string) (int, []byte) {
	t.Helper()
	cmd := asUser(u, attacker(t), "-test.run=^$")
	cmd.Env = append(cmd.Env, "CAIRN_TEST_ATTACK=http", "ATTACK_SOCK="+sock, "ATTACK_METHOD=GET", "ATTACK_PATH=/v1/status")
	done := make(chan struct{})
	var out []byte
	go func() { out, _ = cmd.Output(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-done
		return 0, nil
	}
	code, rest, _ := bytes.Cut(out, []byte("\n"))
	n, _ := strconv.Atoi(string(code))
	return n, rest
}

// vmHWM is a process's peak resident memory in bytes.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// TestSecurityRootGlobs: `/` and `/**` as watch roots are refused, the
// daemon keeps serving and stops promptly.
func TestSecurityRootGlobs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	base := openBase(t)
	ws := filepath.Join(base, "ws")
	write(t, filepath.Join(ws, "a.txt"), "a\n")
	d := startDaemon(t, filepath.Join(base, "state"), "--watch", "/", "--watch", "/**", "--watch", "/proc/*", "--watch", ws)
	waitWatching(t, d, ws)
	st := d.status()
	for _, root := range []string{"/", "/**", "/proc/*"} {
		found := false
		for _, r := range st.Refused {
			found = found || r.Dir == root
		}
		if !found {
			t.Errorf("watch root %s not refused: %+v", root, st.Refused)
		}
	}
	if len(st.Workspaces) != 1 {
		t.Errorf("workspaces: %+v", st.Workspaces)
	}
	if took, code := d.stop(syscall.SIGTERM); code != 0 {
		t.Errorf("SIGTERM: exit %d after %s", code, took)
	}
}

// TestSecurityPathRestoreRace: while path restores run, the user swaps the
// restored folder with a link to a root folder (renameat2 exchange in a
// loop); root's files are never touched.
func TestSecurityPathRestoreRace(t *testing.T) {
	alice := newUser(t)
	base := openBase(t)
	ws := filepath.Join(base, "ws")
	ownedDir(t, alice, ws, map[string]string{"d/keep.txt": "keep\n"})
	rootDir := filepath.Join(base, "rootdir")
	if err := os.MkdirAll(rootDir, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(rootDir, "victim.txt"), "root's\n")
	write(t, filepath.Join(rootDir, "keep.txt"), "root's keep\n")
	state := filepath.Join(base, "state")
	d := startDaemon(t, state, "--watch", ws)
	waitWatching(t, d, ws)
	code, out := call(t, d.socket, "POST", "/v1/checkpoint", api.CheckpointRequest{Workspace: ws, Label: "without victim"})
	if code != 200 {
		t.Fatalf("checkpoint: %d %v", code, out)
	}
	without := out["id"].(string)
	write(t, filepath.Join(ws, "d/victim.txt"), "alice's\n")
	chownTree(t, ws, alice)
	code, out = call(t, d.socket, "POST", "/v1/checkpoint", api.CheckpointRequest{Workspace: ws, Label: "with victim"})
	if code != 200 {
		t.Fatalf("checkpoint: %d %v", code, out)
	}
	with := out["id"].(string)

	link := filepath.Join(ws, "dlink")
	if err := os.Symlink(rootDir, link); err != nil {
		t.Fatal(err)
	}
	_ = os.Lchown(link, alice.uid, alice.gid)
	stopExchange := exchangeLoop(filepath.Join(ws, "d"), link)
	end := time.Now().Add(4 * time.Second)
	restores := 0
	for time.Now().Before(end) {
		for _, target := range []string{without, with} {
			call(t, d.socket, "POST", "/v1/restore", api.RestoreRequest{Workspace: ws, Target: target, Paths: []string{"d"}})
			restores++
		}
	}
	stopExchange()
	t.Logf("%d path restores under the exchange loop", restores)
	for name, want := range map[string]string{"victim.txt": "root's\n", "keep.txt": "root's keep\n"} {
		p := filepath.Join(rootDir, name)
		b, err := os.ReadFile(p)
		if err != nil || string(b) != want {
			t.Errorf("root's %s: %q %v", name, b, err)
		}
		if fi, err := os.Lstat(p); err == nil && fi.Sys().(*syscall.Stat_t).Uid != 0 {
			t.Errorf("root's %s changed owner", name)
		}
	}
}

// TestSecurityStateLinksOnRollback: after a rollback with no live runtime,
// cairn records the continuation in state.json. With state.json.bak a link
// to a root-owned file, that file is never written; with state.json a link to
// a root-only file, its bytes never reach a file the user can read.
func TestSecurityStateLinksOnRollback(t *testing.T) {
	alice := newUser(t)
	for _, c := range []struct {
		name string
		// plant turns the runtime's files into links, as alice could.
		plant func(t *testing.T, hw, victim string)
	}{
		{"bak links to a root file", func(t *testing.T, hw, victim string) {
			_ = os.Remove(filepath.Join(hw, "state.json.bak"))
			if err := os.Symlink(victim, filepath.Join(hw, "state.json.bak")); err != nil {
				t.Fatal(err)
			}
		}},
		{"state links to a root file", func(t *testing.T, hw, victim string) {
			b, err := os.ReadFile(filepath.Join(hw, "state.json"))
			if err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(hw, "state.json.bak"), string(b))
			_ = os.Remove(filepath.Join(hw, "state.json"))
			if err := os.Symlink(victim, filepath.Join(hw, "state.json")); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			base := openBase(t)
			victimDir := filepath.Join(base, "etc")
			if err := os.MkdirAll(victimDir, 0o755); err != nil {
				t.Fatal(err)
			}
			victim := filepath.Join(victimDir, "root-secret")
			const secret = "ROOT-ONLY-BYTES-7f3a9c"
			if err := os.WriteFile(victim, []byte(secret+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			execDir := filepath.Join(base, "exec")
			plan := hwsim.Plan(hwsim.Codon{ID: "a", Name: "Codon A", Files: []string{"**"}})
			sim := hwsimtest.New(t, execDir, plan, hwsim.WithClock(hwClock()))
			chownTree(t, execDir, alice)
			d := startDaemon(t, filepath.Join(base, "state"), "--watch", execDir)
			waitWatching(t, d, execDir)
			run := sim.StartRun()
			chownTree(t, execDir, alice)
			sim.StartCodon("a")
			sim.WriteFile("a.txt", "a\n")
			sim.CompleteCodon("a")
			chownTree(t, execDir, alice)
			waitFor(t, 30*time.Second, "codon a's completed checkpoint", func() bool {
				code, out := call(t, d.socket, "GET", "/v1/list?workspace="+execDir, nil)
				recs, _ := out["records"].([]any)
				for _, r := range recs {
					m, _ := r.(map[string]any)
					if code == 200 && m["kind"] == "completed" && m["runId"] == run {
						return true
					}
				}
				return false
			})
			sim.Shutdown()
			chownTree(t, execDir, alice)
			hw := filepath.Join(execDir, ".hankweave")
			c.plant(t, hw, victim)
			_ = os.Lchown(filepath.Join(hw, "state.json"), alice.uid, alice.gid)
			_ = os.Lchown(filepath.Join(hw, "state.json.bak"), alice.uid, alice.gid)

			code, body := command(t, d.socket, execDir, "rollback.toCodon", map[string]any{"codonId": "a", "checkpointType": "start"})
			t.Logf("rollback: %d %v", code, body)

			if b, err := os.ReadFile(victim); err != nil || string(b) != secret+"\n" {
				t.Errorf("the root file changed: %q %v", b, err)
			}
			if fi, err := os.Stat(victim); err != nil || fi.Sys().(*syscall.Stat_t).Uid != 0 || fi.Mode().Perm() != 0o600 {
				t.Errorf("the root file's owner or mode changed: %v", err)
			}
			_ = filepath.WalkDir(execDir, func(p string, de fs.DirEntry, err error) error {
				if err != nil || !de.Type().IsRegular() {
					return nil
				}
				if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(secret)) {
					t.Errorf("root's bytes copied into %s", p)
				}
				return nil
			})
			if _, ok := d.workspace(execDir); !ok {
				t.Error("the workspace is gone from status")
			}
		})
	}
}

// TestSecurityWorkerFailures: a worker that dies is restarted with its
// workspaces; a hung one costs status at most its timeout and stalls no
// other user.
func TestSecurityWorkerFailures(t *testing.T) {
	alice, bob := newUser(t), newUser(t)
	base := openBase(t)
	wa, wb := filepath.Join(base, "alice-ws"), filepath.Join(base, "bob-ws")
	ownedDir(t, alice, wa, map[string]string{"a.txt": "a\n"})
	ownedDir(t, bob, wb, map[string]string{"b.txt": "b\n"})
	d := startDaemon(t, filepath.Join(base, "state"), "--watch", wa, "--watch", wb)
	waitWatching(t, d, wa)
	waitWatching(t, d, wb)
	pidOf := func(uid int) int {
		for _, w := range d.status().Workers {
			if int(w.UID) == uid && w.State == "running" {
				return w.PID
			}
		}
		return 0
	}

	// Hung: alice's worker stopped. Status still answers, says so; bob is served.
	pa := pidOf(alice.uid)
	if err := syscall.Kill(pa, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	code, body := httpAsCtx(ctx, t, bob, d.socket)
	cancel()
	if code != 200 {
		t.Errorf("bob's status with alice's worker hung: %d %s", code, body)
	}
	ws, _ := d.workspace(wa)
	if ws.State != "failed" || !strings.Contains(ws.Error, "not answering") {
		t.Errorf("alice's workspace with her worker hung: %+v", ws)
	}
	if code, body := httpAs(t, bob, d.socket, "POST", "/v1/checkpoint", api.CheckpointRequest{Workspace: wb}); code != 200 {
		t.Errorf("bob's checkpoint with alice's worker hung: %d %s", code, body)
	}
	_ = syscall.Kill(pa, syscall.SIGCONT)

	// Dead: killed outright, it comes back with its workspace.
	if err := syscall.Kill(pa, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "alice's worker restarted", func() bool {
		p := pidOf(alice.uid)
		return p != 0 && p != pa
	})
	waitFor(t, 30*time.Second, "alice's workspace served again", func() bool {
		code, _ := call(t, d.socket, "POST", "/v1/checkpoint", api.CheckpointRequest{Workspace: wa, Label: "after the restart"})
		return code == 200
	})
	for _, w := range d.status().Workers {
		if int(w.UID) == alice.uid && w.Restarts != 1 {
			t.Errorf("alice's worker: %+v, want 1 restart", w)
		}
	}
}

// TestSecurityOldStoreMovesToOwner: a plain-layout store an earlier cairn
// kept in the shared stores folder (owned by the workspace's owner) moves
// into the owner's private folder, history intact.
func TestSecurityOldStoreMovesToOwner(t *testing.T) {
	alice := newUser(t)
	base := openBase(t)
	ws := filepath.Join(base, "ws")
	write(t, filepath.Join(ws, "a.txt"), "a\n")
	state := filepath.Join(base, "state")
	if out, err := runCairn(t, "checkpoint", ws, "--state-dir", state, "--label", "made by an older cairn"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	old, _ := filepath.Glob(filepath.Join(state, "stores", "ws-*"))
	if len(old) != 1 {
		t.Fatalf("old store: %v", old)
	}
	// As the previous release left it: the workspace and its store alice's.
	chownTree(t, ws, alice)
	chownTree(t, old[0], alice)
	// As root, cairn no longer works on alice's workspace itself.
	if out, err := runCairn(t, "list", ws, "--state-dir", state); err == nil || !strings.Contains(out, "sudo -u") {
		t.Errorf("root's direct list of alice's workspace: %v %s", err, out)
	}
	d := startDaemon(t, state, "--watch", ws)
	waitFor(t, 30*time.Second, "the old checkpoint listed through alice's worker", func() bool {
		code, out := call(t, d.socket, "GET", "/v1/list?workspace="+ws, nil)
		recs, _ := out["records"].([]any)
		for _, r := range recs {
			if m, _ := r.(map[string]any); code == 200 && m["label"] == "made by an older cairn" {
				return true
			}
		}
		return false
	})
	moved := filepath.Join(state, "users", strconv.Itoa(alice.uid), "stores", filepath.Base(old[0]))
	if fi, err := os.Stat(moved); err != nil || !fi.IsDir() {
		t.Errorf("store not in alice's folder: %v", err)
	}
	if _, err := os.Lstat(old[0]); err == nil {
		t.Errorf("old store still in the shared folder")
	}
}

// TestSecurityArchiveRestoreRace: while rollbacks bring archived files back
// from rigArchive/, the user swaps the destination folder with a link to a
// root folder in a loop; nothing lands in, or leaves, root's folder.
func TestSecurityArchiveRestoreRace(t *testing.T) {
	alice := newUser(t)
	base := openBase(t)
	rootDir := filepath.Join(base, "rootdir")
	write(t, filepath.Join(rootDir, "keep.txt"), "root's\n")
	execDir := filepath.Join(base, "exec")
	plan := hwsim.Plan(
		hwsim.Codon{ID: "a", Name: "Codon A", Files: []string{"**"}},
		hwsim.Codon{ID: "b", Name: "Codon B", Files: []string{"**"}},
	)
	sim := hwsimtest.New(t, execDir, plan, hwsim.WithClock(hwClock()))
	chownTree(t, execDir, alice)
	d := startDaemon(t, filepath.Join(base, "state"), "--watch", execDir)
	waitWatching(t, d, execDir)
	sim.StartRun()
	sim.StartCodon("a")
	sim.WriteFile("dir/a.txt", "a\n")
	sim.CompleteCodon("a")
	sim.StartCodon("b")
	sim.WriteFile("dir/out.md", "b's output\n")
	sim.CompleteCodon("b")
	sim.Shutdown()
	chownTree(t, execDir, alice)
	var shaA, shaB string
	waitFor(t, 30*time.Second, "both codons' checkpoints", func() bool {
		_, out := call(t, d.socket, "GET", "/v1/list?workspace="+execDir, nil)
		recs, _ := out["records"].([]any)
		shaA, shaB = "", ""
		for _, r := range recs {
			m, _ := r.(map[string]any)
			if m["kind"] == "completed" && m["codonId"] == "a" {
				shaA, _ = m["sha"].(string)
			}
			if m["kind"] == "completed" && m["codonId"] == "b" {
				shaB, _ = m["sha"].(string)
			}
		}
		return shaA != "" && shaB != ""
	})
	root := filepath.Join(execDir, "agentRoot")
	link := filepath.Join(root, "dlink")
	if err := os.Symlink(rootDir, link); err != nil {
		t.Fatal(err)
	}
	_ = os.Lchown(link, alice.uid, alice.gid)

	stopExchange := exchangeLoop(filepath.Join(root, "dir"), link)
	end := time.Now().Add(5 * time.Second)
	rounds := 0
	for time.Now().Before(end) {
		// The runtime archived b's output again: file and manifest entry.
		write(t, filepath.Join(execDir, "rigArchive/b/dir/out.md"), "b's output\n")
		manifest := map[string]any{"version": "1.0.0", "entries": []map[string]any{
			{"sourcePath": "dir/out.md", "archivePath": "rigArchive/b/dir/out.md", "codonId": "b", "checkpointSha": shaB, "timestamp": "t"},
		}}
		b, _ := json.Marshal(manifest)
		write(t, filepath.Join(execDir, ".hankweave/archive-manifest.json"), string(b))
		chownTree(t, filepath.Join(execDir, "rigArchive"), alice)
		_ = os.Lchown(filepath.Join(execDir, ".hankweave/archive-manifest.json"), alice.uid, alice.gid)
		command(t, d.socket, execDir, "rollback.toCheckpoint", map[string]any{"checkpointSha": shaA})
		call(t, d.socket, "POST", "/v1/undo", api.WorkspaceRequest{Workspace: execDir})
		rounds++
	}
	stopExchange()
	t.Logf("%d rollbacks with archive restores under the exchange loop", rounds)
	entries, err := os.ReadDir(rootDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "keep.txt" {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("root's folder now holds %v", names)
	}
	if b, err := os.ReadFile(filepath.Join(rootDir, "keep.txt")); err != nil || string(b) != "root's\n" {
		t.Errorf("root's keep.txt: %q %v", b, err)
	}
}

// BenchmarkForwarded is what the hop to a worker costs a request: GET
// /v1/list of a root-owned workspace (served by the supervisor itself) and of
// a user's (forwarded to their worker), over one kept-alive connection.
// Needs root: go test -run '^$' -bench Forwarded ./agent/
func BenchmarkForwarded(b *testing.B) {
	alice := newUser(b)
	base := openBase(b)
	wr, wa := filepath.Join(base, "root-ws"), filepath.Join(base, "alice-ws")
	write(b, filepath.Join(wr, "a.txt"), "a\n")
	ownedDir(b, alice, wa, map[string]string{"a.txt": "a\n"})
	d := startDaemon(b, filepath.Join(base, "state"), "--watch", wr, "--watch", wa)
	waitWatching(b, d, wr)
	waitWatching(b, d, wa)
	c := sockClient(d.socket)
	for _, bc := range []struct{ name, dir string }{{"supervisor", wr}, {"worker", wa}} {
		b.Run(bc.name, func(b *testing.B) {
			req, _ := http.NewRequest("GET", "http://cairn/v1/list?workspace="+bc.dir, nil)
			for b.Loop() {
				resp, err := c.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("%s: %s", bc.dir, resp.Status)
				}
			}
		})
	}
}
