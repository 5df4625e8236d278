package cli_test

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/agent/api"
)

// One exit code for one outcome, whatever the command: an unknown
// checkpoint is refused (5) by every command that takes one.
func TestUnknownCheckpointIsRefused(t *testing.T) {
	ws, env := t.TempDir(), cliEnv(t)
	lay(t, ws, map[string]string{"a.txt": "one\n"})
	mustCairn(t, env, "checkpoint", ws)
	for _, args := range [][]string{
		{"show", ws, "c99"},
		{"diff", ws, "c99"},
		{"restore", ws, "c99"},
		{"restore", ws, "c99", "--dry-run"},
		{"pin", ws, "c99"},
		{"verify", ws, "c99"},
		{"rollback", ws, "--sha", "abcdef12"},
		{"rollback", ws, "--codon", "nosuch"},
	} {
		if _, errOut, code := cairn(t, env, args...); code != 5 || !strings.Contains(errOut, "nosuch") && !strings.Contains(errOut, "c99") && !strings.Contains(errOut, "abcdef12") {
			t.Errorf("cairn %v: exit %d (%q), want 5 (refused) naming the target", args[:1], code, errOut)
		}
	}
}

// restore --path with a path that is in neither the target nor the work
// tree is refused, not "nothing to change"; a deleted file still comes back.
func TestRestorePathMatchingNothing(t *testing.T) {
	ws, env := t.TempDir(), cliEnv(t)
	lay(t, ws, map[string]string{"a.txt": "one\n", "sub/b.txt": "b\n"})
	mustCairn(t, env, "checkpoint", ws)
	for _, extra := range [][]string{nil, {"--dry-run"}} {
		args := append([]string{"restore", ws, "c1", "--path", "nosuchfile"}, extra...)
		out, errOut, code := cairn(t, env, args...)
		if code != 5 || !strings.Contains(errOut, "--path nosuchfile matches nothing") || strings.Contains(out, "nothing to change") {
			t.Errorf("cairn %v: exit %d, stdout %q, stderr %q; want 5 and the path named", args, code, out, errOut)
		}
	}
	// A file deleted since the checkpoint, and a folder, are restored.
	os.RemoveAll(filepath.Join(ws, "sub"))
	if _, errOut, code := cairn(t, env, "restore", ws, "c1", "--path", "sub"); code != 0 {
		t.Fatalf("restore --path sub: exit %d: %s", code, errOut)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "sub", "b.txt")); err != nil || string(b) != "b\n" {
		t.Errorf("sub/b.txt not restored: %q %v", b, err)
	}
	if _, errOut, code := cairn(t, env, "undo", ws, "--path", "nosuchfile"); code != 5 || !strings.Contains(errOut, "matches nothing") {
		t.Errorf("undo --path nosuchfile: exit %d (%s)", code, errOut)
	}
	// A path equal to the target is nothing to change, exit 0.
	if out, errOut, code := cairn(t, env, "restore", ws, "c1", "--path", "a.txt"); code != 0 || !strings.Contains(out, "nothing to change") {
		t.Errorf("restore --path a.txt: exit %d, %q %q", code, out, errOut)
	}
}

// README's relative time target (@-5m) and unit sizes for --max-file-size.
func TestRelativeTargetAndSizeFlag(t *testing.T) {
	ws, env := t.TempDir(), cliEnv(t)
	lay(t, ws, map[string]string{"a.txt": "one\n", "big.bin": strings.Repeat("x", 3000)})
	out, errOut, code := cairn(t, env, "checkpoint", ws, "--max-file-size", "2KiB", "--json")
	if code == 2 || !strings.Contains(out+errOut, "big.bin") {
		t.Fatalf("checkpoint --max-file-size 2KiB: exit %d, %s %s", code, out, errOut)
	}
	if out, errOut, code := cairn(t, env, "restore", ws, "@-0s", "--dry-run"); code != 0 || !strings.Contains(out, "c1") {
		t.Errorf("restore @-0s: exit %d, %q %q", code, out, errOut)
	}
	if _, errOut, code := cairn(t, env, "restore", ws, "@-5m", "--dry-run"); code != 5 || !strings.Contains(errOut, "unknown checkpoint") {
		t.Errorf("restore @-5m (no checkpoint that old): exit %d, %q; want 5", code, errOut)
	}
	if _, errOut, code := cairn(t, env, "checkpoint", ws, "--max-file-size", "lots"); code != 2 || !strings.Contains(errOut, "--max-file-size") {
		t.Errorf("--max-file-size lots: exit %d, %q", code, errOut)
	}
}

// fakeDaemon answers /v1/status with st on a Unix socket.
func fakeDaemon(t *testing.T, st api.Status) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "d.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(st)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return sock
}

// cairn status exits 1 when a workspace reports an error, with or without --json.
func TestStatusExitsNonZeroOnErrors(t *testing.T) {
	ok := api.Status{PID: 1, Workspaces: []api.WorkspaceStatus{{Dir: "/w", State: "watching"}}}
	bad := api.Status{PID: 1, Workspaces: []api.WorkspaceStatus{{Dir: "/w", State: "error", Error: "disk full"}}}
	for _, c := range []struct {
		st   api.Status
		code int
	}{{ok, 0}, {bad, 1}} {
		sock := fakeDaemon(t, c.st)
		for _, extra := range [][]string{nil, {"--json"}} {
			_, errOut, code := cairn(t, nil, append([]string{"status", "--socket", sock}, extra...)...)
			if code != c.code || (c.code == 1) != strings.Contains(errOut, "some workspaces report errors") {
				t.Errorf("status %v with error %q: exit %d (%q), want %d", extra, c.st.Workspaces[0].Error, code, errOut, c.code)
			}
		}
	}
}

// diff colours only when asked or on a terminal (never on a pipe, never
// with NO_COLOR); list shows pins; counts are plural only when not one.
func TestDiffColourListPinsPlurals(t *testing.T) {
	ws, env := t.TempDir(), cliEnv(t)
	lay(t, ws, map[string]string{"a.txt": "one\n"})
	mustCairn(t, env, "checkpoint", ws)
	// A size change: a same-size rewrite within the checkpoint's second is
	// not what this test is about.
	lay(t, ws, map[string]string{"a.txt": "two, longer\n"})
	if out := mustCairn(t, env, "diff", ws, "c1"); strings.Contains(out, "\x1b[") || !strings.Contains(out, "+two") {
		t.Errorf("diff through a pipe:\n%q", out)
	}
	if out := mustCairn(t, env, "diff", ws, "c1", "--color", "always"); !strings.Contains(out, "\x1b[32m+two, longer\x1b[0m") || !strings.Contains(out, "\x1b[31m-one\x1b[0m") {
		t.Errorf("diff --color always:\n%q", out)
	}
	if out := mustCairn(t, append(env, "NO_COLOR=1"), "diff", ws, "c1", "--color", "auto"); strings.Contains(out, "\x1b[") {
		t.Errorf("diff with NO_COLOR:\n%q", out)
	}
	mustCairn(t, env, "checkpoint", ws)
	mustCairn(t, env, "pin", ws, "c1")
	lines := strings.Split(strings.TrimSpace(mustCairn(t, env, "list", ws)), "\n")
	if len(lines) != 2 || strings.Contains(lines[0], "pinned") || !strings.Contains(lines[1], " · pinned") {
		t.Errorf("list does not show c1's pin:\n%s", strings.Join(lines, "\n"))
	}
	if out := mustCairn(t, env, "prune", ws, "--dry-run"); strings.Contains(out, "1 checkpoints") {
		t.Errorf("prune: %q", out)
	}
}
