package cli_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/agent/api"
)

// TestDoctor: a healthy setup (a sealed plain-layout store, no daemon) exits
// 0; a lock file naming a dead process is reported with its fix and exit 6.
func TestDoctor(t *testing.T) {
	ws, state := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"CAIRN_STATE_DIR=" + state}
	if out, se, code := cairn(t, env, "checkpoint", ws, "--state-dir", state); code != 0 {
		t.Fatalf("checkpoint: %d %s %s", code, out, se)
	}
	sock := filepath.Join(state, "cairn.sock")
	args := []string{"doctor", "--state-dir", state, "--socket", sock, ws}
	out, se, code := cairn(t, env, args...)
	if code != 0 {
		t.Fatalf("healthy doctor: exit %d\n%s%s", code, out, se)
	}
	if !strings.Contains(out, "ok   git") || !strings.Contains(out, "healthy") {
		t.Errorf("healthy doctor output:\n%s", out)
	}

	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	locks, _ := filepath.Glob(filepath.Join(state, "stores", "*", "store.git", "cairn", "lock"))
	if len(locks) != 1 {
		t.Fatalf("store lock files: %v", locks)
	}
	if err := os.WriteFile(locks[0], []byte(strconv.Itoa(dead.Process.Pid)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, code = cairn(t, env, args...)
	if code != 6 {
		t.Errorf("doctor with a stale lock: exit %d, want 6\n%s", code, out)
	}
	if !strings.Contains(out, "FAIL lock") || !strings.Contains(out, "stale lock "+locks[0]) || !strings.Contains(out, "fix: rm "+locks[0]) {
		t.Errorf("stale lock not reported with its fix:\n%s", out)
	}
}

// stubDaemon answers /v1/status on a Unix socket with st, as a daemon would.
func stubDaemon(t *testing.T, st api.Status) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "cairn.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != api.PathPrefix+"status" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set(api.VersionHeader, api.Version)
		json.NewEncoder(w).Encode(st)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return sock
}

type doctorReport struct {
	Problems int
	Findings []struct {
		Check   string
		Problem bool
		Message string
	}
}

// TestDoctorUsesTheDaemon: with a daemon running, the inotify check counts
// every folder its workspaces' watches need (minus configured excludes and
// .git), not the folders a degraded watch holds now, and names the degraded
// workspace; the state directory checked is the daemon's, not the flag's.
// As root, a user's workspace is not walked and a store under
// <state>/users/ is not opened.
func TestDoctorUsesTheDaemon(t *testing.T) {
	ws, state, other := t.TempDir(), t.TempDir(), t.TempDir()
	for i := range 40 {
		if err := os.MkdirAll(filepath.Join(ws, fmt.Sprintf("d%02d", i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{".git/objects", "node_modules/pkg"} { // never watched
		if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(cfg, []byte("[defaults]\nexcludes = [\"node_modules\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"CAIRN_STATE_DIR=" + state}
	if out, se, code := cairn(t, env, "checkpoint", ws, "--state-dir", state, "--socket", filepath.Join(other, "none.sock")); code != 0 {
		t.Fatalf("checkpoint: %d %s %s", code, out, se)
	}
	stores, _ := filepath.Glob(filepath.Join(state, "stores", "*", "store.git"))
	if len(stores) != 1 {
		t.Fatalf("stores: %v", stores)
	}
	st := api.Status{PID: os.Getpid(), StateDir: state, Config: cfg, Workspaces: []api.WorkspaceStatus{{
		Dir: ws, Layout: "plain", WorkTree: ws, Store: stores[0], State: "degraded", Watches: 3,
		Error: "inotify watch limit reached (fs.inotify.max_user_watches = 8192, no space left on device) watching d03",
	}}}
	wantFolders, wantWorkspaces, wantWatched := 41, 1, 3 // ws and d00…d39
	var userStore string
	if os.Geteuid() == 0 {
		// A workspace of another user, with a store under <state>/users/ that
		// root must leave alone (it would fail the check if opened).
		uws := t.TempDir()
		if err := os.Mkdir(filepath.Join(uws, "deep"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(uws, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		userStore = filepath.Join(state, "users", "65534", "stores", "u-0123", "store.git")
		if err := os.MkdirAll(userStore, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(userStore, "HEAD"), []byte("ref: refs/heads/main\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		st.Workspaces = append(st.Workspaces, api.WorkspaceStatus{Dir: uws, Layout: "plain", WorkTree: uws,
			Store: userStore, State: "watching", Watches: 7})
		wantFolders, wantWorkspaces, wantWatched = 48, 2, 10
	}
	sock := stubDaemon(t, st)

	out, se, code := cairn(t, env, "doctor", "--socket", sock, "--state-dir", other, "--json")
	var rep doctorReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("doctor --json: %v\n%s%s", err, out, se)
	}
	if code != 6 {
		t.Errorf("doctor with a degraded workspace: exit %d, want 6\n%s", code, out)
	}
	var inotifyCount, degraded, stateChecked, storeChecked bool
	want := fmt.Sprintf("%d folders in %d workspaces (%d watched now)", wantFolders, wantWorkspaces, wantWatched)
	for _, f := range rep.Findings {
		switch {
		case f.Check == "inotify" && strings.Contains(f.Message, want):
			inotifyCount = true
		case f.Check == "inotify" && f.Problem && strings.Contains(f.Message, ws+": the daemon could not watch every folder"):
			degraded = true
		case f.Check == "state" && strings.HasPrefix(f.Message, state+" "):
			stateChecked = true
		case f.Check == "store" && !f.Problem && strings.Contains(f.Message, stores[0]+" healthy"):
			storeChecked = true
		}
		if f.Check == "state" && strings.Contains(f.Message, other) {
			t.Errorf("doctor checked the --state-dir %s, not the daemon's %s: %s", other, state, f.Message)
		}
		if userStore != "" && f.Problem && strings.Contains(f.Message, userStore) {
			t.Errorf("doctor as root opened a user's store: %s", f.Message)
		}
	}
	if !inotifyCount {
		t.Errorf("inotify finding does not count %q:\n%s", want, out)
	}
	if !degraded {
		t.Errorf("degraded workspace not reported:\n%s", out)
	}
	if !stateChecked || !storeChecked {
		t.Errorf("the daemon's state directory %s (state %v, store %v) was not checked:\n%s", state, stateChecked, storeChecked, out)
	}
}
