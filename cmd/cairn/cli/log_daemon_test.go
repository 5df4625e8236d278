package cli_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/platform/testsupport"
)

type logGraph struct {
	Nodes []struct {
		ID, Kind, Parent string
		Column           int
		Head             bool
	}
	Edges []struct{ From, To, Parent, Hidden string }
}

// TestLogThroughDaemon: `cairn log` draws the same graph through a running
// daemon as from the store directly, ← HEAD included, and --limit, --all
// and the flags' errors behave.
func TestLogThroughDaemon(t *testing.T) {
	ws, state := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("a\n"), 0o644)
	cfg := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(cfg, []byte("[defaults]\nautosave = false\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(state, "cairn.sock")
	d := exec.Command(cairnBin, "daemon", "--config", cfg, "--watch", ws, "--state-dir", state, "--socket", sock)
	d.Env = append(os.Environ(), "CAIRN_STATE_DIR="+state)
	var dlog strings.Builder
	d.Stderr = &dlog
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			d.Process.Signal(syscall.SIGTERM)
			d.Wait()
		}
	}
	t.Cleanup(stop)

	// Through the daemon only: an empty --state-dir holds no store, so a
	// graph can come from the daemon alone.
	viaDaemon := []string{"--socket", sock, "--state-dir", t.TempDir()}
	logJSON := func(extra ...string) logGraph {
		t.Helper()
		var g logGraph
		out := mustCairn(t, nil, append([]string{"log", ws, "--json"}, extra...)...)
		if err := json.Unmarshal([]byte(out), &g); err != nil {
			t.Fatalf("log --json: %v\n%s", err, out)
		}
		return g
	}
	sealed := func() bool { // the baseline, once the daemon has opened the store
		out, _, code := cairn(t, nil, append([]string{"log", ws}, viaDaemon...)...)
		return code == 0 && strings.Contains(out, "c1")
	}
	if !testsupport.Poll(20*time.Second, sealed) {
		t.Fatalf("the daemon sealed no baseline:\n%s", dlog.String())
	}
	mustCairn(t, nil, "checkpoint", ws, "--label", "one", "--socket", sock)
	os.WriteFile(filepath.Join(ws, "b.txt"), []byte("b\n"), 0o644)
	mustCairn(t, nil, "checkpoint", ws, "--label", "two", "--socket", sock)
	mustCairn(t, nil, "restore", ws, "c1", "--socket", sock)
	os.WriteFile(filepath.Join(ws, "c.txt"), []byte("c\n"), 0o644)
	mustCairn(t, nil, "checkpoint", ws, "--label", "three", "--socket", sock)

	out := mustCairn(t, nil, append([]string{"log", ws}, viaDaemon...)...)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	want := []string{"○ + c5", "│ ○ ⤿ c4", "│ ○ + c3", "│ ○ + c2", "├─╯", "○ ─ c1"}
	if len(lines) != len(want) || !strings.HasSuffix(lines[0], "← HEAD") {
		t.Fatalf("log through the daemon:\n%s", out)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d: %q, want it to start %q\n%s", i, lines[i], w, out)
		}
	}
	daemon := logJSON(viaDaemon...)
	limited := logJSON(append(viaDaemon, "--limit", "2")...)
	stop()

	direct := logJSON("--socket", filepath.Join(state, "none.sock"), "--state-dir", state)
	a, _ := json.Marshal(daemon)
	b, _ := json.Marshal(direct)
	if string(a) != string(b) || len(direct.Nodes) != 5 {
		t.Errorf("through the daemon:\n%s\ndirectly:\n%s", a, b)
	}
	if len(limited.Nodes) != 2 || len(limited.Edges) != 2 || limited.Edges[0].Hidden != "limit" || limited.Edges[1].Hidden != "limit" {
		t.Errorf("--limit 2: %+v", limited)
	}

	for _, args := range [][]string{{"log"}, {"log", ws, "--limit", "-1"}, {"log", ws, "--color", "sometimes"}} {
		if _, errOut, code := cairn(t, nil, args...); code != 2 || errOut == "" {
			t.Errorf("cairn %v: exit %d, %q; want exit 2 and a reason", args, code, errOut)
		}
	}
}
