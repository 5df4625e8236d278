package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
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
	"github.com/cairn-dev/cairn/platform/testsupport"
)

// evBuffer collects a process's output while it runs.
type evBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *evBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *evBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// lines is the complete lines written so far.
func (s *evBuffer) lines() []string {
	out := s.String()
	if i := strings.LastIndexByte(out, '\n'); i >= 0 {
		return strings.Split(out[:i], "\n")
	}
	return nil
}

// evProc is a cairn process running in the background.
type evProc struct {
	cmd            *exec.Cmd
	stdout, stderr *evBuffer
	exited         chan struct{}
}

func startCairn(t *testing.T, env []string, args ...string) *evProc {
	t.Helper()
	p := &evProc{cmd: exec.Command(cairnBin, args...), stdout: &evBuffer{}, stderr: &evBuffer{}, exited: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.stop(t, syscall.SIGTERM)
		if t.Failed() {
			t.Logf("cairn %v:\nstdout:\n%s\nstderr:\n%s", args, p.stdout, p.stderr)
		}
	})
	return p
}

// stop signals the process and waits for it; its exit code.
func (p *evProc) stop(t *testing.T, sig syscall.Signal) int {
	t.Helper()
	select {
	case <-p.exited:
		return p.cmd.ProcessState.ExitCode()
	default:
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.exited:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
		t.Errorf("cairn %v did not exit within 20 s of %v", p.cmd.Args[1:], sig)
	}
	return p.cmd.ProcessState.ExitCode()
}

// waitErr waits until the process's stderr holds s.
func (p *evProc) waitErr(t *testing.T, s string) {
	t.Helper()
	testsupport.WaitFor(t, 30*time.Second, fmt.Sprintf("stderr of cairn %v to say %q", p.cmd.Args[1:], s), func() bool { return strings.Contains(p.stderr.String(), s) })
}

// waitLine waits for a line of stdout that match accepts, and returns it.
func (p *evProc) waitLine(t *testing.T, what string, match func(string) bool) string {
	t.Helper()
	var got string
	testsupport.WaitFor(t, 30*time.Second, what, func() bool {
		i := slices.IndexFunc(p.stdout.lines(), match)
		if i >= 0 {
			got = p.stdout.lines()[i]
		}
		return i >= 0
	})
	return got
}

// startEventsDaemon starts the real daemon on state's socket, watching dirs,
// and waits until it watches every one of them.
func startEventsDaemon(t *testing.T, state string, dirs ...string) *evProc {
	t.Helper()
	sock := filepath.Join(state, "cairn.sock")
	args := []string{"daemon", "--state-dir", state, "--socket", sock}
	for _, d := range dirs {
		args = append(args, "--watch", d)
	}
	d := startCairn(t, []string{"CAIRN_LOG_LEVEL=debug"}, args...)
	c := client.New(sock)
	defer c.Close()
	testsupport.WaitFor(t, 30*time.Second, "the daemon to watch "+strings.Join(dirs, ", "), func() bool {
		select {
		case <-d.exited:
			t.Fatalf("daemon exited:\n%s", d.stderr)
		default:
		}
		st, err := c.Status(context.Background())
		watching := 0
		for _, w := range st.Workspaces {
			if slices.Contains(dirs, w.Dir) && w.State == "watching" {
				watching++
			}
		}
		return err == nil && watching == len(dirs)
	})
	return d
}

// eventsWorkspace is a folder for the daemon to watch, by its real path.
func eventsWorkspace(t *testing.T) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// checkpointVia seals a manual checkpoint through the daemon and returns its id.
func checkpointVia(t *testing.T, env []string, dir, label string) string {
	t.Helper()
	var rec record
	if err := json.Unmarshal([]byte(mustCairn(t, env, "checkpoint", dir, "--label", label, "--json")), &rec); err != nil || rec.ID == "" {
		t.Fatalf("checkpoint %s: %v %+v", label, err, rec)
	}
	return rec.ID
}

// TestEventsFollowsDaemonRestart: cairn events started before the daemon
// waits for it (--wait), prints a line for a checkpoint, says once that the
// daemon went away when it stops, reconnects when a new daemon answers on
// the same socket, prints that daemon's checkpoint, and exits 0 on SIGINT.
func TestEventsFollowsDaemonRestart(t *testing.T) {
	ws, state := eventsWorkspace(t), t.TempDir()
	sock := filepath.Join(state, "cairn.sock")
	env := []string{"CAIRN_STATE_DIR=" + state, "CAIRN_SOCKET=" + sock}
	tail := startCairn(t, nil, "events", "--socket", sock, "--wait")
	tail.waitErr(t, "cairn: waiting for a daemon on "+sock+"…")

	d := startEventsDaemon(t, state, ws)
	tail.waitErr(t, "cairn: connected\n")
	sealed := func(id, label string) func(string) bool {
		return func(l string) bool {
			return strings.Contains(l, "  "+ws+"  sealed "+id+" manual \""+label+"\" ok (")
		}
	}
	id := checkpointVia(t, env, ws, "one")
	tail.waitLine(t, "the line of checkpoint "+id, sealed(id, "one"))

	if code := d.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("daemon exited %d:\n%s", code, d.stderr)
	}
	tail.waitErr(t, "cairn: daemon went away; reconnecting…\n")
	startEventsDaemon(t, state, ws)
	tail.waitErr(t, "cairn: reconnected\n")
	os.WriteFile(filepath.Join(ws, "b.txt"), []byte("b\n"), 0o644)
	id = checkpointVia(t, env, ws, "two")
	line := tail.waitLine(t, "the line of checkpoint "+id+" after the restart", sealed(id, "two"))
	if _, err := time.Parse("15:04:05", strings.SplitN(line, "  ", 2)[0]); err != nil {
		t.Errorf("line %q does not start with the time: %v", line, err)
	}

	if code := tail.stop(t, syscall.SIGINT); code != 0 {
		t.Errorf("cairn events exited %d on SIGINT", code)
	}
	errOut := tail.stderr.String()
	if n := strings.Count(errOut, "went away"); n != 1 {
		t.Errorf("said %d times that the daemon went away, want once:\n%s", n, errOut)
	}
	if n := strings.Count(errOut, "reconnected"); n != 1 {
		t.Errorf("said %d times that it reconnected, want once:\n%s", n, errOut)
	}
}

// TestEventsJSONAndWorkspace: --json prints every event as one JSON line;
// --workspace gets only that workspace's.
func TestEventsJSONAndWorkspace(t *testing.T) {
	ws1, ws2, state := eventsWorkspace(t), eventsWorkspace(t), t.TempDir()
	sock := filepath.Join(state, "cairn.sock")
	env := []string{"CAIRN_STATE_DIR=" + state, "CAIRN_SOCKET=" + sock}
	all := startCairn(t, nil, "events", "--socket", sock, "--wait", "--json")
	only := startCairn(t, nil, "events", "--socket", sock, "--wait", "--json", "--workspace", ws2)
	for _, p := range []*evProc{all, only} {
		p.waitErr(t, "waiting for a daemon")
	}
	startEventsDaemon(t, state, ws1, ws2)
	for _, p := range []*evProc{all, only} {
		p.waitErr(t, "cairn: connected\n")
	}
	id1 := checkpointVia(t, env, ws1, "in-one")
	id2 := checkpointVia(t, env, ws2, "in-two")

	type event struct {
		Type, Workspace string
		Time            time.Time
		Data            record
	}
	sealed := func(ws, id string) func(string) bool {
		return func(l string) bool {
			var ev event
			return json.Unmarshal([]byte(l), &ev) == nil && ev.Type == api.EvCheckpointSealed && ev.Workspace == ws && ev.Data.ID == id
		}
	}
	all.waitLine(t, "the event of "+id1+" in "+ws1, sealed(ws1, id1))
	all.waitLine(t, "the event of "+id2+" in "+ws2, sealed(ws2, id2))
	// ws1's event was published before ws2's: had it been sent, it came first.
	only.waitLine(t, "the event of "+id2+" in "+ws2+" with --workspace", sealed(ws2, id2))
	for name, p := range map[string]*evProc{"--json": all, "--json --workspace": only} {
		for _, l := range p.stdout.lines() {
			var ev event
			if err := json.Unmarshal([]byte(l), &ev); err != nil || ev.Type == "" || ev.Time.IsZero() {
				t.Errorf("%s: line %q is not an event: %v", name, l, err)
			}
			if p == only && ev.Workspace != ws2 {
				t.Errorf("--workspace %s printed an event of %s: %s", ws2, ev.Workspace, l)
			}
		}
	}
	for _, p := range []*evProc{all, only} {
		if code := p.stop(t, syscall.SIGTERM); code != 0 {
			t.Errorf("cairn %v exited %d on SIGTERM", p.cmd.Args[1:], code)
		}
	}
}

// TestEventsNoDaemon: without --wait, no daemon at the start is an error that
// names the socket and --wait.
func TestEventsNoDaemon(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	_, errOut, code := cairn(t, nil, "events", "--socket", sock)
	if code != 1 || !strings.Contains(errOut, "no daemon answers on "+sock+" (no socket there)") || !strings.Contains(errOut, "--wait") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
	if _, errOut, code := cairn(t, nil, "events", "extra"); code != 2 {
		t.Errorf("an argument: exit %d, stderr %q", code, errOut)
	}
}

// stubEvents serves GET /v1/events on a Unix socket: the first stream sends
// first and ends, as the daemon does with a client it drops; later ones send
// then and stay open.
func stubEvents(t *testing.T, first, then []string) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "cairn.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	n := 0
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != api.PathPrefix+"events" {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		n++
		lines, hold := then, n > 1
		if !hold {
			lines = first
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-ndjson")
		for _, l := range lines {
			fmt.Fprintln(w, l)
		}
		w.(http.Flusher).Flush()
		if hold {
			<-r.Context().Done()
		}
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return sock
}

// TestEventsLinesAndDropped: each type of event has its line; --json prints
// the daemon's lines as sent; a client the daemon drops for reading too
// slowly says so and reconnects.
func TestEventsLinesAndDropped(t *testing.T) {
	const at = `"time":"2026-01-02T03:04:05.5Z"`
	first := []string{
		`{"type":"checkpoint.sealed","workspace":"/srv/x/exec",` + at + `,"data":{"id":"c12","sha":"0123456789abcdef","kind":"autosave","time":"2026-01-02T03:04:05Z","durationMs":34,"changed":1,"added":0,"removed":0,"state":"ok"}}`,
		`{"type":"checkpoint.sealed","workspace":"/srv/x/exec",` + at + `,"data":{"id":"c13","kind":"completed","codonId":"write","runId":"1-abcde","time":"2026-01-02T03:04:05Z","durationMs":7,"changed":0,"added":0,"removed":0,"state":"failed","error":"disk full"}}`,
		`{"type":"checkpoint.sealed","workspace":"/srv/x/exec",` + at + `,"data":{"id":"c14","kind":"manual","label":"before","time":"2026-01-02T03:04:05Z","durationMs":20,"changed":2,"added":0,"removed":0,"state":"racy","issues":[{"path":"a","reason":"changed"},{"path":"b","reason":"changed"}]}}`,
		`{"type":"rollback.started","workspace":"/srv/x/exec",` + at + `,"data":{"fromRun":"1-abcde","fromCodon":"write","toCodon":"plan","toCheckpoint":"fedcba9876543210","checkpointType":"completed","codonsToProcess":2}}`,
		`{"type":"rollback.progress","workspace":"/srv/x/exec",` + at + `,"data":{"currentStep":2,"totalSteps":5,"message":"writing files"}}`,
		`{"type":"rollback.archiveRestore","workspace":"/srv/x/exec",` + at + `,"data":{"restoredPaths":["a","b"],"failedPaths":["c"],"status":"partial"}}`,
		`{"type":"rollback.completed","workspace":"/srv/x/exec",` + at + `,"data":{"fromRun":"1-abcde","toRun":"2-fghij","checkpoint":"fedcba9876543210","codonId":"plan","codonName":"Plan","checkpointType":"completed","autoRestart":true}}`,
		`{"type":"error","workspace":"/srv/x/exec",` + at + `,"data":{"code":"WORKSPACE_GONE","message":"the folder was removed"}}`,
		`{"type":"replica.lag","workspace":"/srv/x/exec",` + at + `,"data":{"seconds":3}}`,
		`{"type":"error",` + at + `,"data":{"code":"EVENTS_DROPPED","message":"this client read events too slowly and was dropped"}}`,
	}
	then := []string{
		`{"type":"checkpoint.sealed","workspace":"/srv/y",` + at + `,"data":{"id":"c1","kind":"baseline","label":"first watched","time":"2026-01-02T03:04:05Z","durationMs":5,"changed":0,"added":1,"removed":0,"state":"ok"}}`,
		`{"type":"rollback.started","workspace":"/srv/y",` + at + `,"data":{"fromRun":"","fromCodon":"","toCodon":"","toCheckpoint":"fedcba9876543210","checkpointType":"manual","codonsToProcess":0}}`,
		`{"type":"rollback.completed","workspace":"/srv/y",` + at + `,"data":{"fromRun":"","toRun":"","checkpoint":"fedcba9876543210","codonId":"","codonName":"","checkpointType":"manual","autoRestart":false}}`,
		`{"type":"checkpoint.sealed","workspace":"/srv/y",` + at + `,"data":{"id":"c2","kind":"manual","time":"2026-01-02T03:04:05Z","durationMs":5,"changed":1,"added":0,"removed":0,"state":"racy","issues":[{"path":"a","reason":"changed"}]}}`,
	}
	readable := []string{
		`03:04:05  /srv/x/exec  sealed c12 autosave ok (34 ms)`,
		`03:04:05  /srv/x/exec  sealed c13 completed write/1-abcde failed (7 ms): disk full`,
		`03:04:05  /srv/x/exec  sealed c14 manual "before" racy (20 ms): 2 paths not held as they are on disk`,
		`03:04:05  /srv/x/exec  rollback started: to fedcba9 completed (codon plan), 2 codons to process`,
		`03:04:05  /srv/x/exec  rollback 2/5 writing files`,
		`03:04:05  /srv/x/exec  rollback restored 2 paths from rigArchive partial, 1 failed`,
		`03:04:05  /srv/x/exec  rollback completed: at fedcba9 completed (codon plan), continues as run 2-fghij, restarting`,
		`03:04:05  /srv/x/exec  error WORKSPACE_GONE: the folder was removed`,
		`03:04:05  /srv/x/exec  replica.lag {"seconds":3}`,
		`03:04:05  —  events dropped: this client read events too slowly and was dropped`,
		`03:04:05  /srv/y  sealed c1 baseline "first watched" ok (5 ms)`,
		`03:04:05  /srv/y  restore started: to fedcba9 manual`,
		`03:04:05  /srv/y  restore completed: at fedcba9 manual`,
		`03:04:05  /srv/y  sealed c2 manual racy (5 ms): 1 path not held as it is on disk`,
	}
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"readable", nil, readable},
		{"json", []string{"--json"}, append(slices.Clone(first), then...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sock := stubEvents(t, first, then)
			tail := startCairn(t, []string{"TZ=UTC"}, append([]string{"events", "--socket", sock}, tc.args...)...)
			testsupport.WaitFor(t, 30*time.Second, "every line", func() bool { return len(tail.stdout.lines()) >= len(tc.want) })
			tail.waitErr(t, "cairn: reconnected\n")
			if code := tail.stop(t, syscall.SIGINT); code != 0 {
				t.Errorf("exit %d on SIGINT", code)
			}
			if got := tail.stdout.lines(); !slices.Equal(got, tc.want) {
				t.Errorf("stdout:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			errOut := tail.stderr.String()
			if !strings.Contains(errOut, "cairn: the daemon dropped this client for reading events too slowly; events were lost; reconnecting…\n") ||
				strings.Contains(errOut, "went away") {
				t.Errorf("stderr:\n%s", errOut)
			}
		})
	}
}
