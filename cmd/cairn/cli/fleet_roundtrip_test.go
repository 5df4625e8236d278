//go:build unix

package cli_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/replicate"
	"github.com/cairn-dev/cairn/platform/testsupport"
)

// Fleet replication through real daemons, both ends: host A is a running
// `cairn daemon` that seals and pushes a workspace's checkpoints; host B (a
// state directory of its own, an empty folder, no daemon) lists the remote,
// fetches the workspace and restores every checkpoint, byte for byte equal
// to what A's store holds. Over file:// and over `git daemon`.

// cairnDaemon is a real `cairn daemon` standing for one host.
type cairnDaemon struct {
	sock string
	env  []string // for the CLI: this host's state directory and socket
	cmd  *exec.Cmd
	done chan struct{}
	log  *evBuffer
}

// startHostDaemon starts `cairn daemon` with cfg watching ws, with a state
// directory and a HOME of its own; it is stopped when the test ends.
func startHostDaemon(t *testing.T, cfg, ws string) *cairnDaemon {
	t.Helper()
	state := t.TempDir()
	d := &cairnDaemon{sock: filepath.Join(state, "cairn.sock"), log: &evBuffer{}, done: make(chan struct{})}
	d.env = []string{"CAIRN_STATE_DIR=" + state, "CAIRN_SOCKET=" + d.sock, "HOME=" + t.TempDir()}
	d.cmd = exec.Command(cairnBin, "daemon", "--config", cfg, "--watch", ws, "--state-dir", state, "--socket", d.sock)
	d.cmd.Env = append(os.Environ(), d.env...)
	d.cmd.Stderr = d.log
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.cmd.Wait(); close(d.done) }()
	t.Cleanup(func() {
		d.stop()
		if t.Failed() {
			t.Logf("daemon log:\n%s", d.log.String())
		}
	})
	return d
}

// stop ends the daemon (SIGTERM) and waits for it.
func (d *cairnDaemon) stop() {
	select {
	case <-d.done:
		return
	default:
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	<-d.done
}

// workspace is ws as the daemon's status shows it (false until it is there).
func (d *cairnDaemon) workspace(t *testing.T, ws string) (api.WorkspaceStatus, bool) {
	t.Helper()
	out, _, code := cairn(t, d.env, "status", "--json")
	var st api.Status
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil {
		return api.WorkspaceStatus{}, false
	}
	for _, w := range st.Workspaces {
		if w.Dir == ws {
			return w, true
		}
	}
	return api.WorkspaceStatus{}, false
}

// treeState is what fileState would read from the work tree of commit sha in
// gitDir: path → executable bit and sha256, from the store's own blobs.
func treeState(t *testing.T, gitDir, sha string) map[string]string {
	t.Helper()
	env := []string{"GIT_DIR=" + gitDir}
	out := map[string]string{}
	for _, e := range strings.Split(fleetGit(t, nil, env, "ls-tree", "-r", "-z", "--full-tree", sha), "\x00") {
		if e == "" {
			continue
		}
		meta, path, _ := strings.Cut(e, "\t")
		f := strings.Fields(meta) // mode type object
		if len(f) != 3 || f[1] != "blob" {
			t.Fatalf("%s: unexpected tree entry %q", sha, e)
		}
		x := os.FileMode(0)
		switch f[0] {
		case "100755":
			x = 0o100
		case "100644":
		default:
			t.Fatalf("%s: %s has mode %s; this test writes regular files only", sha, path, f[0])
		}
		blob, err := gitRaw(gitDir, "cat-file", "blob", f[2]).Output()
		if err != nil {
			t.Fatalf("cat-file %s (%s): %v", f[2], path, err)
		}
		sum := sha256.Sum256(blob)
		out[path] = fmt.Sprintf("%s %s", x, hex.EncodeToString(sum[:]))
	}
	return out
}

// gitRaw is git on gitDir, output untouched (fleetGit trims it: blobs must
// stay byte for byte).
func gitRaw(gitDir string, args ...string) *exec.Cmd {
	cmd := exec.Command("git", args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "GIT_DIR=" + gitDir, "GIT_CONFIG_NOSYSTEM=1", "LC_ALL=C", "HOME=" + gitDir}
	return cmd
}

// roundTripWorkspace lays the first files of host A's workspace: text, a
// binary with every byte value, an executable, an empty file, nested folders.
func roundTripWorkspace(t *testing.T) string {
	t.Helper()
	ws := filepath.Join(t.TempDir(), "project")
	bin := make([]byte, 0, 3*256)
	for i := range 3 * 256 {
		bin = append(bin, byte(i*37))
	}
	for rel, c := range map[string]struct {
		content string
		mode    os.FileMode
	}{
		"README.md":              {"# project\n", 0o644},
		"src/main.go":            {"package main\n", 0o644},
		"src/pkg/deep/util.go":   {"package deep\n", 0o644},
		"bin/build.sh":           {"#!/bin/sh\necho build\n", 0o755},
		"data/blob.bin":          {string(bin), 0o644},
		"data/empty":             {"", 0o644},
		"docs/with space/n.txt":  {"a name with a space\n", 0o644},
		"docs/ünïcode/naïve.txt": {"non-ASCII names\n", 0o644},
	} {
		writeMode(t, filepath.Join(ws, rel), c.content, c.mode)
	}
	real, err := filepath.EvalSymlinks(ws)
	if err != nil {
		t.Fatal(err)
	}
	return real
}

func writeMode(t *testing.T, p, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

func TestFleetRoundTripThroughDaemons(t *testing.T) {
	for _, tc := range []struct {
		name string
		// remote makes an empty bare repository and returns its URL.
		remote func(t *testing.T) string
		// from names the workspace for fleet fetch.
		from func(key, path string) string
	}{
		{"file", func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "remote.git")
			fleetGit(t, nil, nil, "init", "--quiet", "--bare", p)
			return "file://" + p
		}, func(key, _ string) string { return "alpha/" + key }},
		{"git daemon", func(t *testing.T) string {
			base := t.TempDir()
			fleetGit(t, nil, nil, "init", "--quiet", "--bare", filepath.Join(base, "remote.git"))
			return startGitDaemon(t, base, "--enable=receive-pack") + "/remote.git"
		}, func(_, path string) string { return "alpha" + path }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fleetRoundTrip(t, tc.remote(t), tc.from)
		})
	}
}

func fleetRoundTrip(t *testing.T, remote string, from func(key, path string) string) {
	// Host A: a daemon that replicates to the remote as "alpha".
	ws := roundTripWorkspace(t)
	cfg := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("[defaults]\nautosave = false\n\n[defaults.replicate]\n"+
		"remote = %q\nhost = \"alpha\"\ninterval = \"200ms\"\n", remote)), 0o644); err != nil {
		t.Fatal(err)
	}
	a := startHostDaemon(t, cfg, ws)
	sealed := map[string]map[string]string{} // id → the work tree when it was sealed
	var w api.WorkspaceStatus
	if !testsupport.Poll(30*time.Second, func() bool {
		var ok bool
		w, ok = a.workspace(t, ws)
		return ok && w.Last == "c1"
	}) {
		t.Fatalf("timed out waiting for the baseline: %+v", w)
	}
	sealed["c1"] = fileState(t, ws) // autosave is off: nothing changed since
	checkpoint := func(args ...string) string {
		t.Helper()
		var rec record
		out := mustCairn(t, a.env, append([]string{"checkpoint", ws, "--json"}, args...)...)
		if err := json.Unmarshal([]byte(out), &rec); err != nil || rec.ID == "" {
			t.Fatalf("checkpoint %v: %v %s", args, err, out)
		}
		sealed[rec.ID] = fileState(t, ws)
		return rec.ID
	}
	// Added and changed, deeper folders, a new executable.
	writeMode(t, filepath.Join(ws, "README.md"), "# project\n\nchanged\n", 0o644)
	writeMode(t, filepath.Join(ws, "src/pkg/deep/er/more.go"), "package er\n", 0o644)
	writeMode(t, filepath.Join(ws, "bin/test.sh"), "#!/bin/sh\necho test\n", 0o755)
	checkpoint("--label", "added and changed")
	// Deleted, a binary changed, executable bits turned off and on.
	must(t, os.Remove(filepath.Join(ws, "src/main.go")))
	must(t, os.RemoveAll(filepath.Join(ws, "docs/with space")))
	writeMode(t, filepath.Join(ws, "data/blob.bin"), "\x00\xff\x00binary\r\n\x1a", 0o644)
	must(t, os.Chmod(filepath.Join(ws, "bin/build.sh"), 0o644))
	must(t, os.Chmod(filepath.Join(ws, "src/pkg/deep/util.go"), 0o755))
	checkpoint("--label", "deleted and modes")
	// A lifecycle checkpoint: a run branch on the remote.
	writeMode(t, filepath.Join(ws, "out/result.txt"), "done\n", 0o644)
	checkpoint("--status", "completed", "--codon", "build", "--run", "r1")
	// A folder emptied entirely.
	must(t, os.RemoveAll(filepath.Join(ws, "src")))
	last := checkpoint("--label", "src gone")

	var aWS api.WorkspaceStatus
	if !testsupport.Poll(60*time.Second, func() bool {
		w, ok := a.workspace(t, ws)
		aWS = w
		r := w.Replication
		return ok && r != nil && r.State == "idle" && r.LagCheckpoints == 0 && r.LastPushed == last
	}) {
		t.Fatalf("timed out waiting for replication lag 0: %+v", aWS.Replication)
	}
	var aRecs []record
	if err := json.Unmarshal([]byte(mustCairn(t, a.env, "list", ws, "--json")), &aRecs); err != nil {
		t.Fatal(err)
	}
	if len(aRecs) != len(sealed) {
		t.Fatalf("A lists %d checkpoints, %d were made", len(aRecs), len(sealed))
	}
	// What each checkpoint holds, read from A's store; it is what A's work
	// tree was when sealed.
	want := map[string]map[string]string{}
	for _, r := range aRecs {
		want[r.ID] = treeState(t, aWS.Store, r.SHA)
		if !equalState(want[r.ID], sealed[r.ID]) {
			t.Fatalf("%s in A's store: %v\nA's work tree when sealed: %v", r.ID, want[r.ID], sealed[r.ID])
		}
	}
	key := aWS.Replication.Key
	if key != replicate.Key(ws) {
		t.Errorf("status key %q, want %q", key, replicate.Key(ws))
	}
	// Host A is gone: B reads the remote only.
	a.stop()

	// Host B: a state directory of its own, no daemon, an empty folder.
	b := fleetEnv(t)
	out := mustCairn(t, b, "fleet", "list", "--remote", remote)
	line := ""
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "alpha ") {
			line = l
		}
	}
	if !strings.Contains(line, " "+ws+" ") || !strings.Contains(line, " "+key+" ") ||
		!strings.Contains(line, " "+strconv.Itoa(len(aRecs))+" ") || !strings.Contains(line, last+" manual") {
		t.Errorf("fleet list: alpha's workspace %s (%s) with %d checkpoints, newest %s:\n%s", ws, key, len(aRecs), last, out)
	}
	var l fleetListJSON
	if err := json.Unmarshal([]byte(mustCairn(t, b, "fleet", "list", "--remote", remote, "--json")), &l); err != nil {
		t.Fatal(err)
	}
	if len(l.Workspaces) != 1 || l.Workspaces[0].Manifest == nil {
		t.Fatalf("fleet list --json: %+v", l)
	}
	if m := l.Workspaces[0].Manifest; m.Host != "alpha" || m.Key != key || m.Workspace != ws || m.Layout != "plain" ||
		m.Checkpoints != len(aRecs) || m.Newest == nil || m.Newest.ID != last || m.Newest.SHA != aRecs[0].SHA {
		t.Errorf("manifest on the remote: %+v", m)
	}

	dst := t.TempDir()
	mustCairn(t, b, "fleet", "fetch", "--remote", remote, "--from", from(key, ws), dst)
	if got := fileState(t, dst); len(got) != 0 {
		t.Errorf("fetch wrote files: %v", got)
	}
	var bRecs []record
	if err := json.Unmarshal([]byte(mustCairn(t, b, "list", dst, "--json")), &bRecs); err != nil {
		t.Fatal(err)
	}
	if len(bRecs) != len(aRecs) {
		t.Fatalf("B lists %d checkpoints, A %d", len(bRecs), len(aRecs))
	}
	for i, w := range aRecs {
		g := bRecs[i]
		if g.ID != w.ID || g.Kind != w.Kind || g.Label != w.Label || g.SHA != w.SHA || g.RunID != w.RunID || g.CodonID != w.CodonID {
			t.Errorf("B's record %d: %+v, want A's %+v", i, g, w)
		}
	}
	if l := lineOf(mustCairn(t, b, "list", dst), last); !strings.Contains(l, "← HEAD") {
		t.Errorf("B's list: %s should be ← HEAD, where A's work tree was: %q", last, l)
	}
	// Every checkpoint of A restores on B to the very same bytes and modes,
	// oldest first, then back to the first (files added since go away).
	ids := make([]string, 0, len(aRecs)+1)
	for i := len(aRecs) - 1; i >= 0; i-- {
		ids = append(ids, aRecs[i].ID)
	}
	for _, id := range append(ids, ids[0]) {
		mustCairn(t, b, "restore", dst, id)
		if got := fileState(t, dst); !equalState(got, want[id]) {
			t.Fatalf("B restored %s: %v\nA's checkpoint: %v", id, got, want[id])
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
