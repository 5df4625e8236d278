//go:build linux

package agent_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/client"
	"github.com/cairn-dev/cairn/agent/ui"
)

// panel is one `cairn ui` process, logged in: its cookie in the jar and
// its CSRF token at hand.
type panel struct {
	t    *testing.T
	base string
	hc   *http.Client
	csrf string
}

// openPanel starts cmd (a `cairn ui --no-open`), opens the one-time URL it
// prints and reads the session's CSRF token, as the page does.
func openPanel(t *testing.T, cmd *exec.Cmd) *panel {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errOut := &syncBuffer{}
	cmd.Stderr = errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if i := strings.Index(sc.Text(), "http://"); i >= 0 {
				found <- strings.TrimSpace(sc.Text()[i:])
				break
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	var login string
	select {
	case login = <-found:
	case <-time.After(20 * time.Second):
		t.Fatalf("cairn ui printed no URL within 20 s; stderr:\n%s", errOut.String())
	}
	u, err := url.Parse(login)
	if err != nil || u.Hostname() != "127.0.0.1" {
		t.Fatalf("cairn ui printed %q", login)
	}
	jar, _ := cookiejar.New(nil)
	p := &panel{t: t, base: "http://" + u.Host, hc: &http.Client{Jar: jar, Timeout: time.Minute}}
	if code, body := p.do(http.MethodGet, u.RequestURI(), nil); code != http.StatusOK {
		t.Fatalf("login: %d %s", code, body)
	}
	code, body := p.do(http.MethodGet, ui.SessionPath, nil)
	var s struct{ CSRF string }
	if code != http.StatusOK || json.Unmarshal(body, &s) != nil || s.CSRF == "" {
		t.Fatalf("session: %d %s", code, body)
	}
	p.csrf = s.CSRF
	return p
}

// do sends one request through the panel, with the CSRF header on anything
// but a GET, and returns the status and body.
func (p *panel) do(method, path string, body any) (int, []byte) {
	p.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, p.base+path, rd)
	if err != nil {
		p.t.Fatal(err)
	}
	if method != http.MethodGet {
		req.Header.Set(ui.CSRFHeader, p.csrf)
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := p.hc.Do(req)
	if err != nil {
		p.t.Fatalf("%s %s through the panel: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		p.t.Fatal(err)
	}
	return res.StatusCode, b
}

func (p *panel) status() api.Status {
	p.t.Helper()
	code, body := p.do(http.MethodGet, "/v1/status", nil)
	var st api.Status
	if code != http.StatusOK || json.Unmarshal(body, &st) != nil {
		p.t.Fatalf("status through the panel: %d %s", code, body)
	}
	return st
}

func (p *panel) timeline(dir string) (int, []byte) {
	p.t.Helper()
	return p.do(http.MethodGet, ui.Prefix+"timeline?"+url.Values{"workspace": {dir}}.Encode(), nil)
}

// filesOf is every regular file under dir (slash path → contents); any
// file or folder not owned by u fails the test.
func filesOf(t *testing.T, dir string, u testUser) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != u.uid || int(st.Gid) != u.gid {
			t.Errorf("%s belongs to %d:%d, not %s (%d:%d)", p, st.Uid, st.Gid, u.name, u.uid, u.gid)
		}
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(dir, p)
			files[filepath.ToSlash(rel)] = string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func sameFiles(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestPanelUnderRootDaemon: a root daemon serves alice's and bob's
// workspaces, each through its owner's worker. The panel alice runs (`cairn
// ui` as her) dials the socket with her credentials, so it shows and acts
// on her workspace only: her status, her timeline, a restore of her
// checkpoint (the files on disk exactly the checkpoint's, still hers);
// bob's timeline, listing, restore and undo are refused with the answer an
// unwatched folder gets, naming nothing of his. Root's panel sees both.
func TestPanelUnderRootDaemon(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the daemon serves two users' workspaces through their workers")
	}
	alice, bob := newUser(t), newUser(t)
	base := openBase(t)
	wa, wb := filepath.Join(base, "alice-ws"), filepath.Join(base, "bob-ws")
	ownedDir(t, alice, wa, map[string]string{"a.txt": "alice one\n"})
	ownedDir(t, bob, wb, map[string]string{"b.txt": "bob's secret\n"})
	d := startDaemon(t, filepath.Join(base, "state"), "--config", configFile(t, noAutosave), "--watch", wa, "--watch", wb)
	waitWatching(t, d, wa)
	waitWatching(t, d, wb)
	if st := d.status(); len(st.Workers) != 2 {
		t.Fatalf("want a worker for each of alice and bob, got %+v", st.Workers)
	}
	first, _ := d.workspace(wa)

	// Alice's second checkpoint: a.txt changed, new.txt added.
	ctx := context.Background()
	root := client.New(d.socket)
	defer root.Close()
	write(t, filepath.Join(wa, "a.txt"), "alice two\n")
	write(t, filepath.Join(wa, "new.txt"), "new\n")
	chownTree(t, wa, alice)
	waitPending(t, d, wa)
	if _, err := root.Checkpoint(ctx, api.CheckpointRequest{Workspace: wa, Label: "two"}); err != nil {
		t.Fatal(err)
	}
	bobList, err := root.List(ctx, wb)
	if err != nil || len(bobList.Records) == 0 {
		t.Fatalf("bob's listing as root: %v %+v", err, bobList)
	}
	bobSHA := bobList.Records[0].SHA

	ap := openPanel(t, asUser(alice, cairnBin, "ui", "--no-open", "--socket", d.socket))

	// Her status: her workspace only, nothing of the daemon's config.
	st := ap.status()
	if len(st.Workspaces) != 1 || st.Workspaces[0].Dir != wa {
		t.Errorf("alice's panel status: %+v, want only %s", st.Workspaces, wa)
	}
	if st.StateDir != "" || len(st.Workers) != 0 {
		t.Errorf("alice's panel shows the daemon's config: %+v", st)
	}

	// Her timeline: the graph, both checkpoints, the newest at HEAD.
	code, body := ap.timeline(wa)
	var tl ui.Timeline
	if code != http.StatusOK || json.Unmarshal(body, &tl) != nil {
		t.Fatalf("alice's timeline: %d %s", code, body)
	}
	if tl.Workspace != wa || len(tl.Nodes) != 2 || len(tl.Rows) == 0 || tl.Nodes[1].Record.ID != first.Last || tl.Head != tl.Nodes[0].Record.ID {
		t.Errorf("alice's timeline: %s", body)
	}

	// Bob's workspace, every way the panel could reach it: refused exactly
	// as a folder nobody watches, naming nothing of his.
	hidden := func(what string, code int, body []byte, missingCode int, missingBody []byte) {
		t.Helper()
		if code != http.StatusForbidden || code != missingCode || string(bytes.Replace(missingBody, []byte(wb+"-missing"), []byte(wb), 1)) != string(body) {
			t.Errorf("%s: %d %s; an unwatched folder: %d %s", what, code, body, missingCode, missingBody)
		}
		for _, secret := range []string{"b.txt", "bob's secret", bobSHA, bobSHA[:7], bob.name} {
			if bytes.Contains(body, []byte(secret)) {
				t.Errorf("%s reveals %q: %s", what, secret, body)
			}
		}
	}
	code, body = ap.timeline(wb)
	code2, body2 := ap.timeline(wb + "-missing")
	hidden("bob's timeline through alice's panel", code, body, code2, body2)
	code, body = ap.do(http.MethodGet, "/v1/list?workspace="+url.QueryEscape(wb), nil)
	code2, body2 = ap.do(http.MethodGet, "/v1/list?workspace="+url.QueryEscape(wb+"-missing"), nil)
	hidden("bob's listing through alice's panel", code, body, code2, body2)
	code, body = ap.do(http.MethodPost, "/v1/restore", api.RestoreRequest{Workspace: wb, Target: "c1"})
	code2, body2 = ap.do(http.MethodPost, "/v1/restore", api.RestoreRequest{Workspace: wb + "-missing", Target: "c1"})
	hidden("a restore of bob's workspace through alice's panel", code, body, code2, body2)
	code, body = ap.do(http.MethodPost, "/v1/undo", api.UndoRequest{Workspace: wb})
	code2, body2 = ap.do(http.MethodPost, "/v1/undo", api.UndoRequest{Workspace: wb + "-missing"})
	hidden("an undo of bob's workspace through alice's panel", code, body, code2, body2)
	if got := filesOf(t, wb, bob); !sameFiles(got, map[string]string{"b.txt": "bob's secret\n"}) {
		t.Errorf("bob's workspace after alice's refused requests: %v", got)
	}

	// Her restore of her first checkpoint: the work tree is exactly that
	// checkpoint's, every file still hers, and her status names the
	// pre-restore checkpoint as the last.
	code, body = ap.do(http.MethodPost, "/v1/restore", api.RestoreRequest{Workspace: wa, Target: first.Last})
	var res api.RestoreResult
	if code != http.StatusOK || json.Unmarshal(body, &res) != nil || res.PreRestore == nil {
		t.Fatalf("alice's restore through her panel: %d %s", code, body)
	}
	if got := filesOf(t, wa, alice); !sameFiles(got, map[string]string{"a.txt": "alice one\n"}) {
		t.Errorf("alice's workspace after the restore to %s: %v", first.Last, got)
	}
	if st := ap.status(); len(st.Workspaces) != 1 || st.Workspaces[0].Last != res.PreRestore.ID {
		t.Errorf("alice's status after the restore: %+v, want the last checkpoint %s", st.Workspaces, res.PreRestore.ID)
	}

	// Root's panel: both workspaces, bob's timeline too.
	rp := openPanel(t, exec.Command(cairnBin, "ui", "--no-open", "--socket", d.socket))
	dirs := map[string]bool{}
	for _, w := range rp.status().Workspaces {
		dirs[w.Dir] = true
	}
	if len(dirs) != 2 || !dirs[wa] || !dirs[wb] {
		t.Errorf("root's panel status: %v, want %s and %s", dirs, wa, wb)
	}
	code, body = rp.timeline(wb)
	if code != http.StatusOK || json.Unmarshal(body, &tl) != nil || tl.Workspace != wb || len(tl.Nodes) != 1 || tl.Nodes[0].Record.SHA != bobSHA {
		t.Errorf("bob's timeline through root's panel: %d %s", code, body)
	}
}
