package agent_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// TestPlainWorkspaceBaselineAndAutosave: a plain folder gets a baseline when
// first watched, then autosaves after quiet periods, each equal to the disk.
func TestPlainWorkspaceBaselineAndAutosave(t *testing.T) {
	ws, state := t.TempDir(), t.TempDir()
	write(t, filepath.Join(ws, "a.txt"), "a\n")
	cfg := filepath.Join(t.TempDir(), "cairn.toml")
	write(t, cfg, "[defaults]\nautosave_quiet = \"200ms\"\nautosave_max_wait = \"2s\"\n")
	d := startDaemon(t, state, "--config", cfg, "--watch", ws)

	base := waitRecord(t, ws, state, "baseline", func(r ckpt.Record) bool { return r.Kind == ckpt.KindBaseline })
	if base.State != ckpt.StateOK || base.Added != 1 {
		t.Fatalf("baseline %+v", base)
	}
	write(t, filepath.Join(ws, "b.txt"), "b\n")
	write(t, filepath.Join(ws, "deep/er/c.txt"), "c\n") // a new folder: watched, then walked
	auto := waitRecord(t, ws, state, "autosave with b.txt and c.txt", func(r ckpt.Record) bool {
		return r.Kind == ckpt.KindAutosave && r.Added == 2
	})
	ws0, _ := d.workspace(ws)
	gitDir := ws0.Store
	if got := treeFiles(t, gitDir, auto.SHA); !slices.Equal(got, []string{"a.txt", "b.txt", "deep/er/c.txt"}) {
		t.Errorf("autosave tree %v", got)
	}
	if !strings.HasPrefix(auto.Ref, "refs/cairn/autosave/") || auto.Parent != base.SHA {
		t.Errorf("autosave ref %s parent %s", auto.Ref, auto.Parent)
	}
	os.Remove(filepath.Join(ws, "a.txt"))
	del := waitRecord(t, ws, state, "autosave recording the deletion", func(r ckpt.Record) bool {
		return r.Kind == ckpt.KindAutosave && r.Removed == 1
	})
	if got := treeFiles(t, gitDir, del.SHA); !slices.Equal(got, []string{"b.txt", "deep/er/c.txt"}) {
		t.Errorf("after delete: %v", got)
	}
	if took, code := d.stop(syscall.SIGTERM); code != 0 || took.Seconds() > 10 {
		t.Errorf("SIGTERM: exit %d after %s", code, took)
	}
}

// TestBadWorkspaceFailsAlone: a workspace that cannot be opened fails alone;
// the other one is sealed normally, and status says what is wrong.
func TestBadWorkspaceFailsAlone(t *testing.T) {
	good, state := t.TempDir(), t.TempDir()
	bad := filepath.Join(t.TempDir(), "exec")
	// A Hankweave workspace whose checkpoints folder is a file: no store can be made there.
	write(t, filepath.Join(bad, ".hankweave/checkpoints"), "not a folder")
	d := startDaemon(t, state, "--watch", good, "--watch", bad)
	waitRecord(t, good, state, "baseline of the good workspace", func(r ckpt.Record) bool { return r.Kind == ckpt.KindBaseline })
	waitFor(t, 10e9, "bad workspace reported failed", func() bool {
		w, ok := d.workspace(bad)
		return ok && w.State == "failed" && w.Error != ""
	})
	if w, _ := d.workspace(good); w.State != "watching" {
		t.Errorf("good workspace %+v", w)
	}
}

// TestSecondDaemonRefused: one daemon per state directory.
func TestSecondDaemonRefused(t *testing.T) {
	state := t.TempDir()
	startDaemon(t, state)
	out, err := runCairn(t, "daemon", "--state-dir", state, "--socket", filepath.Join(t.TempDir(), "s"))
	if err == nil || !strings.Contains(out, "another cairn daemon") {
		t.Errorf("second daemon: %v: %s", err, out)
	}
}

// TestConfigReload: a config change is applied without a restart; a bad one
// keeps the old config running and status says why.
func TestConfigReload(t *testing.T) {
	ws1, ws2, state := t.TempDir(), t.TempDir(), t.TempDir()
	cfg := filepath.Join(t.TempDir(), "cairn.toml")
	write(t, cfg, "[[watch]]\npath = \""+ws1+"\"\n")
	d := startDaemon(t, state, "--config", cfg)
	waitRecord(t, ws1, state, "baseline of ws1", func(r ckpt.Record) bool { return r.Kind == ckpt.KindBaseline })

	write(t, cfg, "[[watch]]\npath = \""+ws1+"\"\n[[watch]]\npath = \""+ws2+"\"\n")
	waitRecord(t, ws2, state, "baseline of ws2 after the config changed", func(r ckpt.Record) bool { return r.Kind == ckpt.KindBaseline })

	write(t, cfg, "[[watch]]\npath = \"relative/path\"\n")
	waitFor(t, 10e9, "status reports the refused config", func() bool {
		st := d.status()
		return strings.Contains(st.ConfigErr, "cairn.toml:2") && strings.Contains(st.ConfigErr, "absolute") && len(st.Workspaces) == 2
	})
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if st := d.status(); len(st.Workspaces) != 2 {
		t.Errorf("after SIGHUP with a bad config: %+v", st.Workspaces)
	}
}

// TestInvalidConfigRefusedAtStart names the file, line and reason.
func TestInvalidConfigRefusedAtStart(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "cairn.toml")
	write(t, cfg, "[defaults]\nlayout = \"git\"\n")
	out, err := runCairn(t, "daemon", "--config", cfg, "--state-dir", t.TempDir(), "--socket", filepath.Join(t.TempDir(), "s"))
	if err == nil || !strings.Contains(out, cfg+":2") || !strings.Contains(out, "layout") {
		t.Errorf("bad config at start: %v: %s", err, out)
	}
}

// TestSocketSafety: a second daemon (other state directory) on a socket a
// live daemon answers is refused; a path that is not a socket is never replaced.
func TestSocketSafety(t *testing.T) {
	d := startDaemon(t, "")
	out, err := runCairn(t, "daemon", "--state-dir", t.TempDir(), "--socket", d.socket)
	if err == nil || !strings.Contains(out, "already answers on "+d.socket) {
		t.Errorf("second daemon on a live socket: %v: %s", err, out)
	}
	if st := d.status(); st.PID == 0 {
		t.Error("first daemon stopped answering")
	}
	notSock := filepath.Join(t.TempDir(), "plain-file")
	write(t, notSock, "keep me")
	out, err = runCairn(t, "daemon", "--state-dir", t.TempDir(), "--socket", notSock)
	if err == nil || !strings.Contains(out, "not a socket") {
		t.Errorf("daemon on a regular file: %v: %s", err, out)
	}
	if b, _ := os.ReadFile(notSock); string(b) != "keep me" {
		t.Errorf("regular file at the socket path replaced: %q", b)
	}
}
