//go:build linux

package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/client"
	"github.com/cairn-dev/cairn/restore/ckpt"
)

// TestVerifyThroughDaemon asks the real daemon, on its socket, to verify a
// workspace's checkpoints: GET /v1/verify answers under the workspace's
// configured excludes, and `cairn verify` exits 0 when the checkpoint holds
// what git would record and 4 when it does not. Without the daemon the
// command reads the store itself, with the store's default patterns.
func TestVerifyThroughDaemon(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "README.md"), "hello\n")
	write(t, filepath.Join(dir, "src", "main.go"), "package main\n")
	write(t, filepath.Join(dir, ".gitignore"), "*.log\n")
	write(t, filepath.Join(dir, "secret", "key.txt"), "excluded by the config\n")
	cfg := configFile(t, noAutosave+"excludes = [\"secret\"]\n")
	state := t.TempDir()
	d := startDaemon(t, state, "--watch", dir, "--config", cfg)
	base := waitRecord(t, dir, state, "the baseline", func(r ckpt.Record) bool { return r.Kind == ckpt.KindBaseline })

	c := client.New(d.socket)
	ctx := context.Background()
	v, err := c.Verify(ctx, dir, "")
	if err != nil {
		t.Fatalf("GET /v1/verify: %v", err)
	}
	if !v.Clean() || v.ID != base.ID || v.SHA != base.SHA {
		t.Fatalf("verify right after the baseline: %+v", v)
	}
	cairnVerify := func(args ...string) (string, int) {
		t.Helper()
		out, err := runCairn(t, append([]string{"verify", dir}, args...)...)
		var ee *exec.ExitError
		switch {
		case err == nil:
			return out, 0
		case errors.As(err, &ee):
			return out, ee.ExitCode()
		}
		t.Fatalf("cairn verify: %v", err)
		return "", -1
	}
	if out, code := cairnVerify("--socket", d.socket, "--state-dir", state); code != 0 {
		t.Fatalf("cairn verify after the baseline: exit %d\n%s", code, out)
	}

	// What no checkpoint looks at is no difference; an edit is.
	write(t, filepath.Join(dir, "secret", "other.txt"), "excluded\n")
	write(t, filepath.Join(dir, "debug.log"), "ignored\n")
	write(t, filepath.Join(dir, "src", "main.go"), "package main\n\nfunc main() {}\n")
	v, err = c.Verify(ctx, dir, base.ID)
	if err != nil {
		t.Fatalf("GET /v1/verify?id=%s: %v", base.ID, err)
	}
	if len(v.Differences) != 1 || v.Differences[0].Path != "src/main.go" || v.Differences[0].Status != ckpt.VerifyChanged || len(v.Missing) != 0 {
		t.Fatalf("verify after an edit: %+v", v)
	}
	out, code := cairnVerify(base.ID, "--socket", d.socket, "--state-dir", state)
	if code != 4 || !strings.Contains(out, `changed "src/main.go"`) {
		t.Fatalf("cairn verify after an edit: exit %d, want 4\n%s", code, out)
	}
	if _, err := c.Verify(ctx, dir, "c999"); err == nil {
		t.Error("verify of an unknown checkpoint answered")
	} else if ce := (*client.Error)(nil); !errors.As(err, &ce) || ce.Code != "UNKNOWN_CHECKPOINT" {
		t.Errorf("verify c999: %v, want UNKNOWN_CHECKPOINT", err)
	}
	if _, err := c.Verify(ctx, filepath.Join(dir, "src"), ""); err == nil {
		t.Error("verify of a folder the daemon does not watch answered")
	} else if ce := (*client.Error)(nil); !errors.As(err, &ce) || ce.Code != "FORBIDDEN" {
		t.Errorf("verify of an unwatched folder: %v, want FORBIDDEN", err)
	}

	// A checkpoint of the edit verifies clean again, through the daemon.
	if out, err := runCairn(t, "checkpoint", dir, "--socket", d.socket, "--state-dir", state); err != nil {
		t.Fatalf("cairn checkpoint: %v\n%s", err, out)
	}
	if out, code := cairnVerify("--socket", d.socket, "--state-dir", state); code != 0 {
		t.Fatalf("cairn verify after a checkpoint: exit %d\n%s", code, out)
	}

	// Without the daemon: the store's default patterns (no configured
	// excludes), so the files of secret/ are on disk and in no checkpoint.
	d.stop(syscall.SIGTERM)
	cmd := exec.Command(cairnBin, "verify", dir, "--json", "--socket", filepath.Join(state, "none.sock"), "--state-dir", state)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 4 {
		t.Fatalf("cairn verify without the daemon: %v, want exit 4\n%s%s", err, stdout.String(), stderr.String())
	}
	var off api.Verification
	if err := json.Unmarshal(stdout.Bytes(), &off); err != nil {
		t.Fatalf("cairn verify --json: %v\n%s", err, stdout.String())
	}
	var added []string
	for _, d := range off.Differences {
		added = append(added, d.Status+" "+d.Path)
	}
	if strings.Join(added, ", ") != "added secret/key.txt, added secret/other.txt" || !slices.Equal(off.Patterns, []string{"**"}) {
		t.Errorf("offline verify (patterns %q) found %q, want the two files of secret/", off.Patterns, added)
	}
}

// TestVerifyThroughWorker: a root daemon forwards /v1/verify of a user's
// workspace to the worker that serves it, as /v1/show goes: the owner and
// root get the answer, another user the refusal an unwatched folder gets.
func TestVerifyThroughWorker(t *testing.T) {
	alice, bob := newUser(t), newUser(t)
	base := openBase(t)
	wa := filepath.Join(base, "alice-ws")
	ownedDir(t, alice, wa, map[string]string{"a.txt": "alice's\n"})
	state := filepath.Join(base, "state")
	cfg := configFile(t, noAutosave)
	d := startDaemon(t, state, "--watch", wa, "--config", cfg)
	waitWatching(t, d, wa)
	if len(d.status().Workers) != 1 {
		t.Fatalf("want alice's worker, got %+v", d.status().Workers)
	}
	path := "/v1/verify?workspace=" + wa
	code, body := httpAs(t, alice, d.socket, "GET", path, nil)
	var v api.Verification
	if code != 200 || json.Unmarshal(body, &v) != nil || !v.Clean() || v.Files != 1 {
		t.Fatalf("alice's verify: %d %s", code, body)
	}
	write(t, filepath.Join(wa, "a.txt"), "changed behind the checkpoint\n")
	code, body = httpAs(t, alice, d.socket, "GET", path, nil)
	if code != 200 || json.Unmarshal(body, &v) != nil || len(v.Differences) != 1 || v.Differences[0].Path != "a.txt" {
		t.Fatalf("alice's verify after an edit: %d %s", code, body)
	}
	if rv, err := client.New(d.socket).Verify(context.Background(), wa, ""); err != nil || len(rv.Differences) != 1 {
		t.Errorf("root's verify: %+v %v", rv, err)
	}
	code, body = httpAs(t, bob, d.socket, "GET", path, nil)
	code2, body2 := httpAs(t, bob, d.socket, "GET", path+"-missing", nil)
	if code != 403 || code2 != 403 || strings.Replace(string(body2), "-missing", "", 1) != string(body) {
		t.Errorf("bob's verify of alice's workspace: %d %s; of a missing one: %d %s", code, body, code2, body2)
	}
}
