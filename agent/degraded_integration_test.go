//go:build linux

package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/client"
	"github.com/cairn-dev/cairn/agent/config"
	"github.com/cairn-dev/cairn/snapshot"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// Degraded mode, seal failures and their recovery, as a user sees them
// through the real daemon: status, the ledger, the log and the CLI.

// degradedWorkspace is a plain workspace with four folders. Under
// CAIRN_TEST_MAX_WATCHES=2 the daemon watches the root and a/ (the walk is
// lexical); b/, c/ and d/ hit the limit and stay unwatched.
func degradedWorkspace(t *testing.T) string {
	t.Helper()
	ws := filepath.Join(t.TempDir(), "ws")
	for _, d := range []string{"a", "b", "c", "d"} {
		write(t, filepath.Join(ws, d, "f.txt"), d+"\n")
	}
	t.Setenv("CAIRN_TEST_MAX_WATCHES", "2")
	return ws
}

// waitState polls the daemon's status until dir's entry satisfies ok.
func waitState(t *testing.T, d *daemon, dir, what string, ok func(api.WorkspaceStatus) bool) api.WorkspaceStatus {
	t.Helper()
	var got api.WorkspaceStatus
	waitFor(t, 30*time.Second, what, func() bool {
		w, found := d.workspace(dir)
		got = w
		return found && ok(w)
	})
	return got
}

// waitSealed waits until status shows dir's first checkpoint, then returns
// its baseline from the ledger (read before that, the store may not exist).
func waitSealed(t *testing.T, d *daemon, dir string) ckpt.Record {
	t.Helper()
	waitState(t, d, dir, "a first checkpoint", func(w api.WorkspaceStatus) bool { return w.Last != "" })
	return waitBaseline(t, dir, d.state)
}

// settle waits until a watched edit is autosaved: the seals the limit's
// overflow asked for are behind, so the next edit in an unwatched folder
// can only be found by what the test runs next.
func settle(t *testing.T, d *daemon, ws string) {
	t.Helper()
	write(t, filepath.Join(ws, "a", "settle.txt"), "watched\n")
	gitDir := plainGitDir(t, d.state, ws)
	waitRecord(t, ws, d.state, "the autosave of a watched edit", func(r ckpt.Record) bool {
		return r.Kind == ckpt.KindAutosave && r.SHA != "" && hasFile(t, gitDir, r.SHA, "a/settle.txt")
	})
}

func hasFile(t *testing.T, gitDir, sha, name string) bool {
	return slices.Contains(treeFiles(t, gitDir, sha), name)
}

// Issue 4: with part of the tree unwatched, a manual checkpoint reconciles
// the whole tree: an edit in an unwatched folder is in it, and counted.
func TestDegradedCheckpointSeesUnwatchedEdit(t *testing.T) {
	ws := degradedWorkspace(t)
	// A long interval: only the manual checkpoint can find the edit.
	cfg := configFile(t, "reconcile_interval = \"10m\"\n"+fastAutosave)
	d := startDaemon(t, "", "--config", cfg, "--watch", ws)
	waitSealed(t, d, ws)
	st := waitState(t, d, ws, "state degraded", func(w api.WorkspaceStatus) bool { return w.State == "degraded" })
	if st.Unwatched != 3 || !slices.Equal(st.UnwatchedDirs, []string{"b", "c", "d"}) || st.StaleUpTo != "10m0s" ||
		st.NextReconcile.IsZero() || st.NextRewatch.IsZero() || !strings.Contains(st.Error, "fs.inotify.max_user_watches") {
		t.Fatalf("degraded status = %+v, want 3 unwatched (b, c, d), staleUpTo 10m0s, next reconcile and rewatch, the sysctl", st)
	}
	settle(t, d, ws)

	write(t, filepath.Join(ws, "c", "new.txt"), "unwatched edit\n")
	out, err := cairnJSON(t, "checkpoint", ws, "--socket", d.socket, "--label", "by hand", "--json")
	if err != nil {
		t.Fatalf("cairn checkpoint: %v\n%s", err, out)
	}
	var rec ckpt.Record
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &rec); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if rec.State != ckpt.StateOK || rec.Added != 1 || !hasFile(t, plainGitDir(t, d.state, ws), rec.SHA, "c/new.txt") {
		t.Fatalf("manual checkpoint in a degraded workspace = %+v, want c/new.txt added", rec)
	}
}

// Issue 5: a degraded workspace reconciles every reconcile_interval, so an
// edit in an unwatched folder is sealed long before the first re-watch
// attempt (30 s), and status says how stale the view may be.
func TestDegradedPeriodicReconcile(t *testing.T) {
	ws := degradedWorkspace(t)
	cfg := configFile(t, "reconcile_interval = \"1s\"\n"+fastAutosave)
	d := startDaemon(t, "", "--config", cfg, "--watch", ws)
	waitSealed(t, d, ws)
	st := waitState(t, d, ws, "state degraded", func(w api.WorkspaceStatus) bool { return w.State == "degraded" })
	if st.StaleUpTo != "1s" || st.NextReconcile.IsZero() {
		t.Fatalf("status = %+v, want staleUpTo 1s and a next reconcile", st)
	}
	settle(t, d, ws)

	write(t, filepath.Join(ws, "d", "later.txt"), "found by a reconcile\n")
	gitDir := plainGitDir(t, d.state, ws)
	// Well within the first re-watch attempt: only the periodic reconcile can seal it.
	var rec ckpt.Record
	waitFor(t, 15*time.Second, "an autosave holding d/later.txt", func() bool {
		for _, r := range ledger(t, ws, d.state) {
			if r.Kind == ckpt.KindAutosave && r.SHA != "" && hasFile(t, gitDir, r.SHA, "d/later.txt") {
				rec = r
				return true
			}
		}
		return false
	})
	if rec.State != ckpt.StateOK {
		t.Errorf("reconcile autosave = %+v, want ok", rec)
	}
	st = waitState(t, d, ws, "a last reconcile in status", func(w api.WorkspaceStatus) bool { return !w.LastReconcile.IsZero() })
	if st.State != "degraded" {
		t.Errorf("state %q after a reconcile, want degraded (the watch is still incomplete)", st.State)
	}
	// The watch limit is the workspace's error: status exits 1 (README, "Exit codes").
	out, err := runCairn(t, "status", "--socket", d.socket)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(out, "unwatched: 3 folders (b, c, d)") || !strings.Contains(out, "up to 1s stale") {
		t.Errorf("cairn status (%v, want exit 1) does not say what is unwatched and how stale:\n%s", err, out)
	}
}

// reconcile_interval is the config's key; it reaches every workspace's settings.
func TestReconcileIntervalConfig(t *testing.T) {
	c, err := config.Parse("c.toml", "reconcile_interval = \"3s\"\n[[watch]]\npath = \"/srv/x\"\n")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Defaults.ReconcileInterval.Duration; got != 3*time.Second {
		t.Errorf("defaults reconcile interval = %s, want 3s", got)
	}
	if got := config.DefaultSettings().ReconcileInterval.Duration; got != 10*time.Second {
		t.Errorf("default reconcile interval = %s, want 10s", got)
	}
	for _, bad := range []string{"reconcile_interval = \"1ms\"\n", "[defaults]\nreconcile_interval = \"3s\"\n"} {
		if _, err := config.Parse("c.toml", bad); err == nil {
			t.Errorf("config %q accepted", bad)
		}
	}
}

// Issue 10: a seal that fails through the daemon keeps its reason: the CLI
// prints it as the direct path does, and the API answers {code, message}
// with the failed record.
func TestCheckpointFailureReasonThroughDaemon(t *testing.T) {
	ws := filepath.Join(t.TempDir(), "ws")
	write(t, filepath.Join(ws, "f.txt"), "x\n")
	d := startDaemon(t, "", "--watch", ws)
	waitSealed(t, d, ws)

	out, err := runCairn(t, "checkpoint", ws, "--socket", d.socket, "--run", "bad..run")
	if err == nil || !strings.Contains(out, `run id "bad..run" cannot name a branch`) || strings.Contains(out, "daemon answered") {
		t.Fatalf("cairn checkpoint with a bad run id through the daemon (%v):\n%s\nwant the reason", err, out)
	}
	rec, err := client.New(d.socket).Checkpoint(context.Background(), api.CheckpointRequest{Workspace: ws, RunID: "bad..run"})
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Code != "SEAL_FAILED" || ce.Status != http.StatusInternalServerError ||
		!strings.Contains(ce.Message, "cannot name a branch") {
		t.Fatalf("API error = %#v, want SEAL_FAILED with the reason", err)
	}
	if rec.ID == "" || rec.State != ckpt.StateFailed || !strings.Contains(rec.Error, "cannot name a branch") {
		t.Errorf("failed record = %+v, want the ledger's failed record", rec)
	}
}

// Issue 9: a file over max_file_size is named as soon as a seal sees it,
// though the autosave that saw it has nothing else to seal.
func TestOversizedFileNamed(t *testing.T) {
	ws := filepath.Join(t.TempDir(), "ws")
	write(t, filepath.Join(ws, "small.txt"), "x\n")
	cfg := configFile(t, fastAutosave+"max_file_size = \"1KiB\"\n")
	d := startDaemon(t, "", "--config", cfg, "--watch", ws)
	waitSealed(t, d, ws)

	write(t, filepath.Join(ws, "big.bin"), strings.Repeat("b", 4096))
	st := waitState(t, d, ws, "big.bin named in status", func(w api.WorkspaceStatus) bool {
		return len(w.Skipped) == 1 && w.Skipped[0].Path == "big.bin"
	})
	if !strings.Contains(st.Skipped[0].Reason, "(4.0 KiB)") || !strings.Contains(st.Skipped[0].Reason, "1.0 KiB limit") {
		t.Errorf("skipped = %+v, want the size", st.Skipped)
	}
	waitFor(t, 10*time.Second, "a log line naming big.bin", func() bool {
		for _, l := range strings.Split(d.log.String(), "\n") {
			if strings.Contains(l, "larger than max_file_size") && strings.Contains(l, "big.bin") {
				return true
			}
		}
		return false
	})
	out, _ := runCairn(t, "status", "--socket", d.socket)
	if !strings.Contains(out, `not checkpointed: "big.bin"`) {
		t.Errorf("cairn status does not name big.bin:\n%s", out)
	}

	// Back under the limit, it is checkpointed and no longer named.
	write(t, filepath.Join(ws, "big.bin"), "small now\n")
	waitState(t, d, ws, "big.bin no longer named", func(w api.WorkspaceStatus) bool { return len(w.Skipped) == 0 })
}

// Issue 7: a workspace whose store could not be opened at first shows
// watching (no error) once it opens.
func TestStatusRecoversAfterOpenFailure(t *testing.T) {
	ws := filepath.Join(t.TempDir(), "ws")
	write(t, filepath.Join(ws, "f.txt"), "x\n")
	state := t.TempDir()
	real, err := filepath.EvalSymlinks(ws)
	if err != nil {
		t.Fatal(err)
	}
	// A file where the store's folder goes: the store cannot be created.
	block := filepath.Join(state, "stores", snapshot.PlainStoreName(real))
	write(t, block, "in the way\n")
	d := startDaemon(t, state, "--watch", ws)
	waitState(t, d, ws, "state failed", func(w api.WorkspaceStatus) bool { return w.State == "failed" && w.Error != "" })

	if err := os.Remove(block); err != nil {
		t.Fatal(err)
	}
	st := waitState(t, d, ws, "state watching", func(w api.WorkspaceStatus) bool { return w.State == "watching" })
	if st.Error != "" {
		t.Errorf("recovered workspace still reports %q", st.Error)
	}
	waitSealed(t, d, ws)
}

// Issue 7: a store deleted under a running daemon is noticed, recreated with
// a new baseline that says history was lost, and sealing goes on.
func TestDeletedStoreRecreated(t *testing.T) {
	ws := filepath.Join(t.TempDir(), "ws")
	write(t, filepath.Join(ws, "f.txt"), "x\n")
	d := startDaemon(t, "", "--config", configFile(t, fastAutosave), "--watch", ws)
	first := waitSealed(t, d, ws)
	gitDir := plainGitDir(t, d.state, ws)
	if err := os.RemoveAll(filepath.Dir(gitDir)); err != nil {
		t.Fatal(err)
	}

	st := waitState(t, d, ws, "the store recreated", func(w api.WorkspaceStatus) bool {
		return w.Notice != "" && w.Last != "" && w.State == "watching"
	})
	if !strings.Contains(st.Notice, "deleted") || !strings.Contains(st.Notice, "lost") || st.Error != "" {
		t.Errorf("status after recreation = %+v, want a notice that history was lost, no error", st)
	}
	recs := ledger(t, ws, d.state)
	if len(recs) == 0 || recs[0].Kind != ckpt.KindBaseline || !strings.Contains(recs[0].Label, "history is lost") ||
		recs[0].SHA == first.SHA || !hasFile(t, gitDir, recs[0].SHA, "f.txt") {
		t.Fatalf("ledger after recreation: %+v, want a new baseline holding f.txt, labelled history lost", recs)
	}
	if !strings.Contains(d.log.String(), "the store was deleted") {
		t.Error("the log does not say the store was deleted")
	}

	write(t, filepath.Join(ws, "g.txt"), "after\n")
	waitRecord(t, ws, d.state, "an autosave in the new store", func(r ckpt.Record) bool {
		return r.Kind == ckpt.KindAutosave && r.State == ckpt.StateOK && hasFile(t, gitDir, r.SHA, "g.txt")
	})
}

// Issue 6: an autosave that fails (a full disk) keeps its changes and is
// retried with backoff: once space is freed they are sealed with no new
// edit, and status goes from failed back to watching. Needs root to mount
// a small tmpfs for the state directory.
func TestFailedAutosaveRetried(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs")
	}
	state := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", state).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", state).Run() })
	ws := filepath.Join(t.TempDir(), "ws")
	write(t, filepath.Join(ws, "f.txt"), "x\n")
	// The disk floor would pause autosaves before the disk is full: off, so
	// the seal really fails.
	d := startDaemon(t, state, "--config", configFile(t, "disk_floor = \"off\"\n"+fastAutosave), "--watch", ws)
	waitSealed(t, d, ws)

	filler := filepath.Join(state, "filler")
	fill(t, filler)
	for i := range 20 {
		write(t, filepath.Join(ws, "pending", "p"+string(rune('a'+i))+".txt"), strings.Repeat("change ", 200))
	}
	st := waitState(t, d, ws, "state failed with the changes kept", func(w api.WorkspaceStatus) bool {
		return w.State == "failed" && w.Failures > 0 && w.Pending > 0 && !w.RetryAt.IsZero()
	})
	if !strings.Contains(strings.ToLower(st.Error), "no space left") {
		t.Errorf("error = %q, want the reason (no space left)", st.Error)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	gitDir := plainGitDir(t, state, ws)
	waitFor(t, 60*time.Second, "the retried autosave holding the 20 changes", func() bool {
		for _, r := range ledger(t, ws, state) {
			if r.Kind == ckpt.KindAutosave && r.State == ckpt.StateOK && r.Added == 20 &&
				hasFile(t, gitDir, r.SHA, "pending/pt.txt") {
				return true
			}
		}
		return false
	})
	st = waitState(t, d, ws, "state watching", func(w api.WorkspaceStatus) bool { return w.State == "watching" })
	if st.Error != "" || st.Pending != 0 || !st.RetryAt.IsZero() {
		t.Errorf("status after the retry = %+v, want no error, nothing pending, no retry", st)
	}
}

// fill writes path until its file system is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for n := len(buf); n > 0; {
		if _, err := f.Write(buf[:n]); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			n /= 2
		}
	}
}

// Issue 13: a workspace folder removed while watched is reported as gone,
// in the log and (until discovery releases it) in status; no seal is tried
// on it, so no misleading git error and no failed record.
func TestWorkspaceFolderGone(t *testing.T) {
	ws := filepath.Join(t.TempDir(), "ws")
	write(t, filepath.Join(ws, "f.txt"), "x\n")
	d := startDaemon(t, "", "--config", configFile(t, fastAutosave), "--watch", ws)
	waitSealed(t, d, ws)
	ledgerFile := filepath.Join(filepath.Dir(plainGitDir(t, d.state, ws)), "ledger.jsonl")

	if err := os.RemoveAll(ws); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the log saying the folder is gone", func() bool {
		return strings.Contains(d.log.String(), "the workspace folder is gone")
	})
	waitFor(t, 20*time.Second, "the workspace released", func() bool {
		_, found := d.workspace(ws)
		return !found
	})
	// Status keeps saying so while the root still names the folder.
	waitFor(t, 20*time.Second, "status saying the folder is gone", func() bool {
		for _, r := range d.status().Refused {
			if r.Dir == ws && strings.Contains(r.Reason, "gone") {
				return true
			}
		}
		return false
	})
	if strings.Contains(d.log.String(), "fork/exec") || strings.Contains(d.log.String(), "seal failed") {
		t.Errorf("a seal was tried on the removed folder:\n%s", d.log.String())
	}
	b, err := os.ReadFile(ledgerFile)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), `"failed"`) {
		t.Errorf("ledger has a failed record for the removed folder:\n%s", b)
	}
}
