//go:build unix

package service_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/platform/service"
	"github.com/cairn-dev/cairn/platform/testsupport"
)

// TestServiceRoundTrip installs cairn for real through this machine's service
// manager (SysV here, systemd or launchd elsewhere), under a name of its own so
// it never meets a real install: install → start → status answers → a
// workspace gets its baseline → stop → uninstall, leaving nothing behind.
func TestServiceRoundTrip(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("installs a system service: needs root (CI runs as root)")
	}
	if testing.Short() {
		t.Skip("builds cairn and installs a real service")
	}
	kind, err := service.Detect()
	if err != nil {
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	tmp := t.TempDir()
	bin := filepath.Join(tmp, "bin", "cairn")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/cairn-dev/cairn/cmd/cairn")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build cairn: %v\n%s", err, out)
	}
	state, sock, ws := filepath.Join(tmp, "state"), filepath.Join(tmp, "run", "cairn.sock"), filepath.Join(tmp, "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(tmp, "config.toml")
	toml := fmt.Sprintf("state_dir = %q\nsocket = %q\nlog_level = \"debug\"\n\n[[watch]]\npath = %q\n", state, sock, ws)
	if err := os.WriteFile(cfg, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}

	name := "cairn-test-" + randomHex(4)
	m, err := service.New(service.Config{Name: name, Executable: bin, ConfigPath: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("service %s, unit %s, logs %s", m, m.UnitPath(), m.LogsTo())
	cairn := func(args ...string) (string, error) {
		out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
		return string(out), err
	}
	svc := func(action string) {
		t.Helper()
		out, err := cairn("service", action, "--name", name, "--config", cfg)
		if err != nil {
			t.Fatalf("cairn service %s: %v\n%s\nlog:\n%s", action, err, out, readLog(m))
		}
		t.Logf("cairn service %s: %s", action, strings.TrimSpace(out))
	}
	t.Cleanup(func() { // a failed run must not leave a service behind
		if m.Installed() {
			_ = m.Uninstall()
		}
		if kind != service.KindSystemd {
			os.Remove(m.Unit().LogPath)
			os.Remove(filepath.Dir(m.Unit().LogPath)) // only if empty
		}
	})

	svc("install")
	if !m.Installed() {
		t.Fatalf("no %s after install", m.UnitPath())
	}
	svc("start")

	var st struct{ PID int }
	deadline, _ := ctx.Deadline()
	if !testsupport.Poll(time.Until(deadline), func() bool {
		out, err := cairn("status", "--socket", sock, "--json")
		return err == nil && json.Unmarshal([]byte(out), &st) == nil && st.PID > 0
	}) {
		t.Fatalf("timed out waiting for cairn status to answer on %s; log:\n%s", sock, readLog(m))
	}
	if !testsupport.Poll(time.Until(deadline), func() bool {
		out, err := cairn("list", ws, "--json", "--state-dir", state)
		var recs []struct{ Kind string }
		if err != nil || json.Unmarshal([]byte(out), &recs) != nil {
			return false
		}
		for _, r := range recs {
			if r.Kind == "baseline" {
				return true
			}
		}
		return false
	}) {
		t.Fatalf("timed out waiting for a baseline checkpoint of %s; log:\n%s", ws, readLog(m))
	}
	out, err := cairn("service", "status", "--name", name, "--config", cfg)
	if !strings.Contains(out, ": running") || !strings.Contains(out, state) || !strings.Contains(out, sock) || err != nil {
		t.Errorf("service status while running (%v):\n%s", err, out)
	}
	statusIs(t, cairn, "running", 0, "--name", name, "--config", cfg)

	svc("stop")
	if alive(st.PID) {
		t.Errorf("daemon pid %d still alive after stop", st.PID)
	}
	out, _ = cairn("service", "status", "--name", name, "--config", cfg)
	if !strings.Contains(out, ": stopped") {
		t.Errorf("service status after stop:\n%s", out)
	}
	statusIs(t, cairn, "stopped", 3, "--name", name, "--config", cfg)
	if log := readLog(m); kind != service.KindSystemd && !strings.Contains(log, `"message":"cairn daemon started"`) {
		t.Errorf("log file %s lacks the daemon's JSON lines:\n%s", m.Unit().LogPath, log)
	}

	svc("uninstall")
	if _, err := os.Stat(m.UnitPath()); !os.IsNotExist(err) {
		t.Errorf("%s left behind after uninstall (%v)", m.UnitPath(), err)
	}
	statusIs(t, cairn, "not installed", 4, "--name", name, "--config", cfg)
	if links, _ := filepath.Glob("/etc/rc?.d/*" + name); len(links) > 0 {
		t.Errorf("init links left behind: %v", links)
	}
	if pids := processesOf(bin); len(pids) > 0 {
		t.Errorf("processes of %s left behind: %v", bin, pids)
	}
}

// statusIs checks `cairn service status --json`: the state, and the exit
// code systemctl would give (0 running, 3 stopped, 4 not installed).
func statusIs(t *testing.T, cairn func(...string) (string, error), state string, code int, args ...string) {
	t.Helper()
	out, err := cairn(append([]string{"service", "status", "--json"}, args...)...)
	got := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		got = ee.ExitCode()
	}
	var st struct {
		State      string
		ExitStatus int `json:"exit_status"`
	}
	if jerr := json.Unmarshal([]byte(out), &st); jerr != nil || st.State != state || got != code || st.ExitStatus != code {
		t.Errorf("service status --json: exit %d, %+v (%v), want %q and exit %d:\n%s", got, st, jerr, state, code, out)
	}
}

func readLog(m *service.Manager) string {
	b, _ := os.ReadFile(m.Unit().LogPath)
	return string(b)
}

// alive: the process exists and is not a zombie nobody reaped.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true // no /proc (macOS): kill -0 said it exists
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && len(s) > i+2 {
		return s[i+2] != 'Z'
	}
	return true
}

// processesOf lists live processes running the binary at path (Linux /proc).
func processesOf(path string) []int {
	var pids []int
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		if exe, err := os.Readlink(d + "/exe"); err == nil && strings.TrimSuffix(exe, " (deleted)") == path {
			var pid int
			fmt.Sscan(filepath.Base(d), &pid)
			if alive(pid) {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
