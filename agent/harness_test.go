package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/client"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

var cairnBin string

func TestMain(m *testing.M) {
	if os.Getenv("CAIRN_TEST_ATTACK") != "" {
		os.Exit(attackerMain())
	}
	dir, err := os.MkdirTemp("", "cairn-agent-test")
	if err != nil {
		panic(err)
	}
	// Workers and the security tests' users run the binaries from here.
	if err := os.Chmod(dir, 0o755); err != nil {
		panic(err)
	}
	cairnBin = filepath.Join(dir, "cairn")
	// The daemon is built with the race detector; CAIRN_TEST_NORACE=1 builds
	// it plain, for benchmarks (go test -bench) that time the daemon itself.
	// The cairnfault tag gives it the test hooks the shipped build lacks
	// (CAIRN_TEST_MAX_WATCHES: testhooks_on.go).
	build := []string{"build", "-race", "-tags", "cairnfault", "-o", cairnBin, "github.com/cairn-dev/cairn/cmd/cairn"}
	if os.Getenv("CAIRN_TEST_NORACE") != "" {
		build = slices.Delete(build, 1, 2)
	}
	if out, err := exec.Command("go", build...).CombinedOutput(); err != nil {
		panic(string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// syncBuffer collects a daemon's log.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// daemon is a real `cairn daemon` process.
type daemon struct {
	t        testing.TB
	cmd      *exec.Cmd
	log      *syncBuffer
	state    string
	socket   string
	args     []string
	exited   chan struct{}
	exitCode int
}

// startDaemon starts the binary with args plus a private state dir and
// socket, and waits until its socket answers.
func startDaemon(t testing.TB, state string, args ...string) *daemon {
	t.Helper()
	if state == "" {
		state = t.TempDir()
	}
	d := &daemon{t: t, state: state, socket: filepath.Join(state, "cairn.sock"), log: &syncBuffer{}, args: args}
	d.start()
	t.Cleanup(func() {
		d.stop(syscall.SIGTERM)
		if t.Failed() {
			t.Logf("daemon log:\n%s", d.log.String())
		}
	})
	return d
}

func (d *daemon) start() {
	d.t.Helper()
	full := append([]string{"daemon", "--state-dir", d.state, "--socket", d.socket}, d.args...)
	d.cmd = exec.Command(cairnBin, full...)
	d.cmd.Env = append(os.Environ(), "CAIRN_LOG_LEVEL=debug")
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	d.exited = make(chan struct{})
	if err := d.cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	go func() {
		err := d.cmd.Wait()
		d.exitCode = d.cmd.ProcessState.ExitCode()
		_ = err
		close(d.exited)
	}()
	c := client.New(d.socket)
	waitFor(d.t, 20*time.Second, "daemon socket answers", func() bool {
		select {
		case <-d.exited:
			d.t.Fatalf("daemon exited with %d:\n%s", d.exitCode, d.log.String())
		default:
		}
		return c.Running(context.Background())
	})
}

// stop signals the daemon and waits (at most 15 s) for it to exit.
func (d *daemon) stop(sig syscall.Signal) (time.Duration, int) {
	select {
	case <-d.exited:
		return 0, d.exitCode
	default:
	}
	start := time.Now()
	_ = d.cmd.Process.Signal(sig)
	select {
	case <-d.exited:
	case <-time.After(15 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.exited
		d.t.Errorf("daemon did not exit within 15 s of %v", sig)
	}
	return time.Since(start), d.exitCode
}

func (d *daemon) status() api.Status {
	d.t.Helper()
	st, err := client.New(d.socket).Status(context.Background())
	if err != nil {
		d.t.Fatal(err)
	}
	return st
}

func (d *daemon) workspace(dir string) (api.WorkspaceStatus, bool) {
	for _, w := range d.status().Workspaces {
		if w.Dir == dir {
			return w, true
		}
	}
	return api.WorkspaceStatus{}, false
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	delay := 10 * time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for: %s", within, what)
		}
		time.Sleep(delay)
		delay = min(delay*2, 200*time.Millisecond)
	}
}

// ledger reads a workspace's records with `cairn list --json` (oldest first).
func ledger(t *testing.T, dir, state string) []ckpt.Record {
	t.Helper()
	cmd := exec.Command(cairnBin, "list", dir, "--json", "--state-dir", state)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("cairn list: %v: %s", err, errb.String())
	}
	var recs []ckpt.Record
	if err := json.Unmarshal(out.Bytes(), &recs); err != nil {
		t.Fatal(err)
	}
	for i, j := 0, len(recs)-1; i < j; i, j = i+1, j-1 {
		recs[i], recs[j] = recs[j], recs[i]
	}
	return recs
}

// waitRecord waits for a ledger record that match accepts and returns it.
func waitRecord(t *testing.T, dir, state, what string, match func(ckpt.Record) bool) ckpt.Record {
	t.Helper()
	var got ckpt.Record
	waitFor(t, 20*time.Second, what, func() bool {
		for _, r := range ledger(t, dir, state) {
			if match(r) {
				got = r
				return true
			}
		}
		return false
	})
	return got
}

// git runs plain git on a store and returns trimmed stdout.
func git(t *testing.T, gitDir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Env = []string{"GIT_DIR=" + gitDir, "HOME=" + t.TempDir(), "GIT_CONFIG_NOSYSTEM=1", "PATH=" + os.Getenv("PATH"), "LC_ALL=C"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// treeFiles lists a commit's files.
func treeFiles(t *testing.T, gitDir, sha string) []string {
	out := git(t, gitDir, "ls-tree", "-r", "--name-only", sha)
	if out == "" {
		return nil
	}
	return strings.Split(out, "\n")
}

func write(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func kinds(recs []ckpt.Record) string {
	var b strings.Builder
	for _, r := range recs {
		fmt.Fprintf(&b, "%s:%s/%s ", r.ID, r.Kind, r.CodonID)
	}
	return b.String()
}

// runCairn runs the binary to completion and returns its combined output.
func runCairn(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command(cairnBin, args...).CombinedOutput()
	return string(out), err
}
