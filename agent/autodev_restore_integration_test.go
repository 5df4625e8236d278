package agent_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/agent/api"
)

// TestAutodevRestoreTakesTheSharedPath: a restore and an undo of an autodev
// workspace over the socket take the path every layout's take
// (workspace.Restore, restore.Run): the answers are the layout's own (the
// seed's line, the branch the dirty tree was parked on, its refusals), and
// the restore is announced on the event stream as every restore is.
func TestAutodevRestoreTakesTheSharedPath(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(base, "repo")
	write(t, filepath.Join(dir, "a.txt"), "one\n")
	autodevGit(t, dir, "init", "-q")
	autodevGit(t, dir, "add", "-A")
	autodevGit(t, dir, "commit", "-q", "-m", "user: first")
	first := autodevGit(t, dir, "rev-parse", "HEAD")
	d := startDaemon(t, "", "--config", configFile(t, fmt.Sprintf("[[watch]]\npath = %q\nlayout = \"autodev\"\n", dir)))
	waitFor(t, 30*time.Second, "the workspace watched", func() bool {
		ws, ok := d.workspace(dir)
		return ok && ws.State == "watching"
	})
	if code, body := call(t, d.socket, "POST", "/v1/checkpoint", api.CheckpointRequest{Workspace: dir, Label: "first"}); code != 200 || body["id"] != "c1" {
		t.Fatalf("checkpoint: %d %v", code, body)
	}

	// The event stream, subscribed before the restore.
	events := subscribe(t, d.socket, dir)

	// The layout's refusals, in its words and codes.
	for _, c := range []struct {
		req        api.RestoreRequest
		code       int
		err, words string
	}{
		{api.RestoreRequest{Workspace: dir, Target: "c1", DryRun: true}, 400, "BAD_REQUEST", "the autodev layout has no dry run: a restore is git reset --hard, after parking a dirty tree"},
		{api.RestoreRequest{Workspace: dir, Target: "c9"}, 404, "UNKNOWN_CHECKPOINT", "Restore failed: unknown checkpoint: c9"},
	} {
		if code, body := call(t, d.socket, "POST", "/v1/restore", c.req); code != c.code || body["code"] != c.err || body["message"] != c.words {
			t.Errorf("restore %+v: %d %v, want %d %s %q", c.req, code, body, c.code, c.err, c.words)
		}
	}
	if code, body := call(t, d.socket, "POST", "/v1/undo", api.UndoRequest{Workspace: dir, DryRun: true}); code != 400 || body["code"] != "BAD_REQUEST" {
		t.Errorf("dry undo: %d %v", code, body)
	}

	// A dirty tree: parked, then reset to c1.
	write(t, filepath.Join(dir, "a.txt"), "work in progress\n")
	code, body := call(t, d.socket, "POST", "/v1/restore", api.RestoreRequest{Workspace: dir, Target: "c1"})
	saved, _ := body["savedOn"].(string)
	pre, _ := body["preRestore"].(map[string]any)
	if code != 200 || body["layout"] != "autodev" || !strings.HasPrefix(saved, "autodev/pre-restore-") || pre["id"] != "c2" ||
		body["message"] != fmt.Sprintf("Restored to %q (%s); saved on %s.", "first", first[:7], saved) {
		t.Fatalf("restore: %d %v", code, body)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "one\n" {
		t.Fatalf("a.txt after the restore: %q", b)
	}
	// Announced as every restore is: started, then completed at c1.
	var seen []string
	deadline := time.After(20 * time.Second)
	for done := false; !done; {
		select {
		case ev, open := <-events:
			if !open {
				t.Fatalf("the event stream ended; seen %v", seen)
			}
			seen = append(seen, ev.Type)
			if ev.Type == api.EvRollbackCompleted {
				data, _ := json.Marshal(ev.Data)
				var rc api.RollbackCompleted
				if err := json.Unmarshal(data, &rc); err != nil || rc.Checkpoint != first {
					t.Errorf("rollback.completed %s, want checkpoint %s", data, first)
				}
				done = true
			}
		case <-deadline:
			t.Fatalf("no rollback.completed event; seen %v", seen)
		}
	}
	if len(seen) < 2 || seen[len(seen)-2] != api.EvRollbackStarted {
		t.Errorf("events %v, want rollback.started, then rollback.completed", seen)
	}

	// Undo: the parked work is back, and nothing was parked this time.
	code, body = call(t, d.socket, "POST", "/v1/undo", api.UndoRequest{Workspace: dir})
	if msg, _ := body["message"].(string); code != 200 || !strings.HasPrefix(msg, "Restored to ") || strings.Contains(msg, "saved on") || body["savedOn"] != nil {
		t.Fatalf("undo: %d %v", code, body)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "work in progress\n" {
		t.Fatalf("a.txt after the undo: %q", b)
	}
}

// TestAutodevRestoreOffline: without a daemon, cairn restore and undo with
// --layout autodev take the same path (checkpoints.RunAutodev) and print the
// seed's lines; an unknown id and a dry run are refused as before.
func TestAutodevRestoreOffline(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir, state := filepath.Join(base, "repo"), filepath.Join(base, "state")
	write(t, filepath.Join(dir, "a.txt"), "one\n")
	autodevGit(t, dir, "init", "-q")
	autodevGit(t, dir, "add", "-A")
	autodevGit(t, dir, "commit", "-q", "-m", "user: first")
	first := autodevGit(t, dir, "rev-parse", "HEAD")
	flags := []string{"--layout", "autodev", "--state-dir", state, "--socket", filepath.Join(base, "none.sock")}
	cairn := func(args ...string) (string, string, int) { return cairnRun(t, append(args, flags...)...) }

	if out, errOut, code := cairn("checkpoint", dir, "--label", "first"); code != 0 {
		t.Fatalf("checkpoint (%d): %s%s", code, out, errOut)
	}
	if _, errOut, code := cairn("restore", dir, "c9"); code != 5 || errOut != "Restore failed: unknown checkpoint: c9\n" {
		t.Fatalf("unknown id (%d): %q", code, errOut)
	}
	if _, errOut, code := cairn("restore", dir, "c1", "--dry-run"); code == 0 || !strings.Contains(errOut, "no --dry-run") {
		t.Fatalf("dry run (%d): %q", code, errOut)
	}
	write(t, filepath.Join(dir, "a.txt"), "work in progress\n")
	out, errOut, code := cairn("restore", dir, "c1")
	if code != 0 || !strings.HasPrefix(out, fmt.Sprintf("Restored to %q (%s); saved on autodev/pre-restore-", "first", first[:7])) || !strings.HasSuffix(out, ".\n") {
		t.Fatalf("restore (%d): %q %s", code, out, errOut)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "one\n" {
		t.Fatalf("a.txt after the restore: %q", b)
	}
	out, errOut, code = cairn("undo", dir)
	if code != 0 || !strings.HasPrefix(out, "Restored to ") || strings.Contains(out, "saved on") {
		t.Fatalf("undo (%d): %q %s", code, out, errOut)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "work in progress\n" {
		t.Fatalf("a.txt after the undo: %q", b)
	}
}
