//go:build unix

package cli_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/agent/replicate"
	"github.com/cairn-dev/cairn/snapshot"

	"github.com/cairn-dev/cairn/platform/testsupport"
	"github.com/cairn-dev/cairn/restore/ckpt"
)

// The read side of fleet replication, end to end: a remote built by hand
// under the layout (refs pushed with plain git, manifests written the way
// the push side writes them), read by the real binary.

// fleetGit runs the machine's git with an environment of its own.
func fleetGit(t *testing.T, stdin []byte, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	home := t.TempDir()
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "XDG_CONFIG_HOME=" + home,
		"GIT_CONFIG_NOSYSTEM=1", "LC_ALL=C",
		"GIT_AUTHOR_NAME=push", "GIT_AUTHOR_EMAIL=push@example.com",
		"GIT_COMMITTER_NAME=push", "GIT_COMMITTER_EMAIL=push@example.com"}, env...)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("git %q: %v\n%s", args, err, errOut.String())
	}
	return strings.TrimSpace(out.String())
}

// fileState is every regular file under root: path → mode and sha256.
func fileState(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if !fi.Mode().IsRegular() {
			out[filepath.ToSlash(rel)] = fi.Mode().String()
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		out[filepath.ToSlash(rel)] = fmt.Sprintf("%s %s", fi.Mode().Perm()&0o100, hex.EncodeToString(sum[:]))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// fleetSource is a workspace with a real store, and the files each of its
// checkpoints holds.
type fleetSource struct {
	dir   string
	st    *snapshot.Store
	files map[string]map[string]string // ledger id → fileState
}

func newFleetSource(t *testing.T) *fleetSource {
	dir := t.TempDir()
	st, err := snapshot.Open(context.Background(), dir, snapshot.Options{Layout: snapshot.LayoutPlain, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &fleetSource{dir: dir, st: st, files: map[string]map[string]string{}}
}

func (s *fleetSource) write(t *testing.T, rel, content string, mode os.FileMode) {
	t.Helper()
	p := filepath.Join(s.dir, rel)
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	os.Chmod(p, mode)
}

func (s *fleetSource) seal(t *testing.T, req snapshot.SealRequest) ckpt.Record {
	t.Helper()
	rec, err := s.st.Seal(context.Background(), req)
	if err != nil || rec.SHA == "" {
		t.Fatalf("seal %+v: %v %+v", req, err, rec)
	}
	s.files[rec.ID] = fileState(t, s.dir)
	return rec
}

// restoreTo restores the source to rec (a pre-restore checkpoint is sealed
// of what was there) and returns the pre-restore record.
func (s *fleetSource) restoreTo(t *testing.T, rec ckpt.Record) ckpt.Record {
	t.Helper()
	before := fileState(t, s.dir)
	out, err := s.st.Restore(context.Background(), ckpt.Request{Target: rec.SHA, Label: rec.ID})
	if err != nil || out.PreRestore == nil {
		t.Fatalf("restore to %s: %v", rec.ID, err)
	}
	s.files[out.PreRestore.ID] = before
	return *out.PreRestore
}

// push puts the source's refs and a manifest on remote under host, as the
// push side does: refs under the workspace's prefix, then a parentless
// commit whose tree is manifest.json.
func (s *fleetSource) push(t *testing.T, remote, host string, withManifest bool) replicate.Manifest {
	t.Helper()
	key := replicate.Key(s.st.WorkTree())
	base := replicate.Base(host, key)
	fleetGit(t, nil, []string{"GIT_DIR=" + s.st.GitDir()}, "push", "--quiet", "--atomic", remote,
		"refs/heads/*:"+base+"heads/*", "refs/cairn/*:"+base+"cairn/*")
	recs := s.st.Records()
	m := replicate.Manifest{Version: replicate.ManifestVersion, Host: host, Key: key, Workspace: s.st.WorkTree(),
		Layout: "plain", UID: os.Getuid(), Pushed: time.Now().UTC().Add(-2 * time.Minute), Position: s.st.Position()}
	for _, r := range recs {
		if r.SHA != "" {
			m.Checkpoints++
			m.Newest = &replicate.Newest{ID: r.ID, SHA: r.SHA, Kind: string(r.Kind), Label: r.Label, Time: r.Time}
		}
	}
	refs := strings.Split(fleetGit(t, nil, []string{"GIT_DIR=" + remote}, "for-each-ref", "--format=%(refname)", base), "\n")
	m.Refs = len(refs)
	if !withManifest {
		return m
	}
	b, _ := json.MarshalIndent(m, "", "  ")
	g := []string{"GIT_DIR=" + remote}
	blob := fleetGit(t, b, g, "hash-object", "-w", "--stdin")
	tree := fleetGit(t, []byte("100644 blob "+blob+"\t"+replicate.ManifestFile+"\n"), g, "mktree")
	commit := fleetGit(t, []byte("manifest of "+host+"/"+key+"\n"), g, "commit-tree", tree)
	fleetGit(t, nil, g, "update-ref", replicate.ManifestRef(host, key), commit)
	return m
}

// fleetRemote is a bare repository holding two hosts: alpha with a rich
// workspace, beta with a small one and one whose manifest is missing.
type fleetRemote struct {
	path        string
	alpha, beta *fleetSource
	alphaM      replicate.Manifest
	betaM       replicate.Manifest
	orphanKey   string
}

func newFleetRemote(t *testing.T) *fleetRemote {
	srv := t.TempDir()
	r := &fleetRemote{path: filepath.Join(srv, "fleet.git")}
	fleetGit(t, nil, nil, "init", "--quiet", "--bare", r.path)

	a := newFleetSource(t)
	a.write(t, "README.md", "# project\n", 0o644)
	a.write(t, "src/main.go", "package main\n", 0o644)
	a.write(t, "run.sh", "#!/bin/sh\necho hi\n", 0o755)
	bin := make([]byte, 4096)
	for i := range bin {
		bin[i] = byte(i * 7)
	}
	a.write(t, "data/blob.bin", string(bin), 0o644)
	base := a.seal(t, snapshot.SealRequest{Kind: ckpt.KindBaseline, Label: "watch started"})
	run := "1753110463686-yayna"
	a.seal(t, snapshot.SealRequest{Kind: ckpt.KindRigSetup, CodonID: "rig", CodonName: "Rig setup", RunID: run, StartSHA: base.SHA})
	a.write(t, "src/main.go", "package main\n\nfunc main() {}\n", 0o644)
	a.write(t, "src/util.go", "package main\n", 0o644)
	done := a.seal(t, snapshot.SealRequest{Kind: ckpt.KindCompleted, CodonID: "write", CodonName: "Write code", RunID: run})
	a.write(t, "notes.txt", "autosaved\n", 0o644)
	a.seal(t, snapshot.SealRequest{Kind: ckpt.KindAutosave})
	os.Remove(filepath.Join(a.dir, "src/util.go"))
	a.write(t, "run.sh", "#!/bin/sh\necho bye\n", 0o755)
	a.seal(t, snapshot.SealRequest{Kind: ckpt.KindError, CodonID: "test", CodonName: "Run tests", RunID: run})
	a.write(t, "notes.txt", "autosaved again\n", 0o644)
	a.seal(t, snapshot.SealRequest{Kind: ckpt.KindAutosave})
	a.restoreTo(t, done) // a pre-restore checkpoint; the position is now done's
	a.write(t, "after.txt", "after the restore\n", 0o644)
	a.seal(t, snapshot.SealRequest{Kind: ckpt.KindManual, Label: "after restore"})
	r.alpha, r.alphaM = a, a.push(t, r.path, "alpha", true)

	b := newFleetSource(t)
	b.write(t, "x.txt", "x\n", 0o644)
	b.seal(t, snapshot.SealRequest{Kind: ckpt.KindManual, Label: "one"})
	b.write(t, "x.txt", "xx\n", 0o644)
	b.seal(t, snapshot.SealRequest{Kind: ckpt.KindAutosave})
	r.beta, r.betaM = b, b.push(t, r.path, "beta", true)
	// Refs without a manifest (a push cut short before it).
	r.orphanKey = "orphan-0123456789abcdef"
	fleetGit(t, nil, []string{"GIT_DIR=" + b.st.GitDir()}, "push", "--quiet", r.path,
		"refs/heads/main:"+replicate.Base("beta", r.orphanKey)+"heads/main")
	return r
}

// fleetEnv is cliEnv with a home of its own (git reads the user's config there).
func fleetEnv(t *testing.T) []string {
	return append(cliEnv(t), "HOME="+t.TempDir())
}

type fleetListJSON struct {
	Remote     string
	Workspaces []replicate.FleetWorkspace
}

func TestFleetList(t *testing.T) {
	r := newFleetRemote(t)
	env := fleetEnv(t)
	out := mustCairn(t, env, "fleet", "list", "--remote", r.path)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "HOST") {
		t.Fatalf("fleet list: want a header and 3 workspaces:\n%s", out)
	}
	for i, want := range []struct{ host, path, key, count, newest string }{
		{"alpha", r.alpha.st.WorkTree(), r.alphaM.Key, strconv.Itoa(r.alphaM.Checkpoints), r.alphaM.Newest.ID + " manual"},
		{"beta", r.beta.st.WorkTree(), r.betaM.Key, strconv.Itoa(r.betaM.Checkpoints), r.betaM.Newest.ID + " autosave"},
		{"beta", "—", r.orphanKey, "—", "—"},
	} {
		f := lines[i+1]
		if !strings.HasPrefix(f, want.host+" ") || !strings.Contains(f, " "+want.path+" ") || !strings.Contains(f, " "+want.key+" ") ||
			!strings.Contains(f, " "+want.count+" ") || !strings.Contains(f, want.newest) {
			t.Errorf("line %d %q: want %+v", i+1, f, want)
		}
	}
	if !strings.Contains(lines[1], "2m ago") || !strings.Contains(lines[3], "no manifest; 1 ref") {
		t.Errorf("pushed age or the missing manifest's note:\n%s", out)
	}

	var l fleetListJSON
	if err := json.Unmarshal([]byte(mustCairn(t, env, "fleet", "list", "--remote", r.path, "--json")), &l); err != nil {
		t.Fatal(err)
	}
	if len(l.Workspaces) != 3 || l.Remote != r.path {
		t.Fatalf("fleet list --json: %+v", l)
	}
	got := l.Workspaces[0]
	if got.Manifest == nil || got.Manifest.Position != r.alphaM.Position || got.Manifest.Workspace != r.alphaM.Workspace || got.Refs != r.alphaM.Refs+1 {
		t.Errorf("alpha: %+v (manifest %+v), want %+v", got, got.Manifest, r.alphaM)
	}
	if o := l.Workspaces[2]; o.Manifest != nil || o.Note != "no manifest" || o.Refs != 1 {
		t.Errorf("orphan: %+v", o)
	}

	// One host only; a remote with nothing replicated.
	out = mustCairn(t, env, "fleet", "list", "--remote", r.path, "--host", "beta")
	if strings.Contains(out, "alpha") || strings.Count(out, "beta") != 2 {
		t.Errorf("--host beta:\n%s", out)
	}
	empty := filepath.Join(t.TempDir(), "empty.git")
	fleetGit(t, nil, nil, "init", "--quiet", "--bare", empty)
	if out := mustCairn(t, env, "fleet", "list", "--remote", empty); !strings.Contains(out, "no replicated workspaces") {
		t.Errorf("empty remote: %q", out)
	}
}

// TestFleetFetchRoundTrip: a workspace fetched into an empty folder lists
// the same checkpoints, restores each of them byte for byte, and undoes.
func TestFleetFetchRoundTrip(t *testing.T) {
	r := newFleetRemote(t)
	env := fleetEnv(t)
	dst := filepath.Join(t.TempDir(), "restored")
	out := mustCairn(t, env, "fleet", "fetch", "--remote", r.path, "--from", "alpha/"+r.alphaM.Key, dst, "--json")
	var res struct {
		Workspace, From, Source, Position string
		Checkpoints                       int
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Checkpoints != r.alphaM.Checkpoints ||
		res.Position != r.alphaM.Position || res.Source != r.alphaM.Workspace {
		t.Fatalf("fetch: %v %+v\n%s", err, res, out)
	}
	if len(fileState(t, dst)) != 0 {
		t.Errorf("fetch wrote files into %s", dst)
	}
	checkSameLedger(t, env, dst, r.alpha)

	// ← HEAD is where the source's work tree was.
	head := restoreHead(r.alpha)
	if out := mustCairn(t, env, "list", dst); !strings.Contains(lineOf(out, head), "← HEAD") {
		t.Errorf("list: %s should be ← HEAD:\n%s", head, out)
	}

	// Every checkpoint restores to the very files it held on the source.
	ids := make([]string, 0, len(r.alpha.files))
	for _, rec := range r.alpha.st.Records() {
		ids = append(ids, rec.ID)
	}
	for _, id := range ids {
		mustCairn(t, env, "restore", dst, id)
		if got, want := fileState(t, dst), r.alpha.files[id]; !equalState(got, want) {
			t.Fatalf("restore %s: files %v\nwant %v", id, got, want)
		}
	}
	last := ids[len(ids)-1]
	mustCairn(t, env, "restore", dst, ids[1])
	mustCairn(t, env, "undo", dst)
	if got, want := fileState(t, dst), r.alpha.files[last]; !equalState(got, want) {
		t.Errorf("undo: files %v\nwant %v (%s)", got, want, last)
	}
	// A fetched store goes on checkpointing after the fetched ids.
	var rec struct{ ID string }
	json.Unmarshal([]byte(mustCairn(t, env, "checkpoint", dst, "--json")), &rec)
	if n, _ := ckpt.LedgerNum(rec.ID); n <= len(ids) {
		t.Errorf("a checkpoint after the fetch took id %s", rec.ID)
	}

	// The store is no longer empty: a second fetch is refused, not merged.
	_, errOut, code := cairn(t, env, "fleet", "fetch", "--remote", r.path, "--from", "alpha/"+r.alphaM.Key, dst)
	if code != 5 || !strings.Contains(errOut, "already has checkpoints") {
		t.Errorf("fetch into a store with checkpoints: exit %d, %s", code, errOut)
	}

	// Refs without a single checkpoint: said, not passed off as a fetch.
	if _, errOut, code := cairn(t, env, "fleet", "fetch", "--remote", r.path, "--from", "beta/"+r.orphanKey, t.TempDir()); code != 1 || !strings.Contains(errOut, "holds no checkpoints") {
		t.Errorf("fetch of refs without checkpoints: exit %d, %s", code, errOut)
	}

	// The original path and the folder's name find it too; an existing folder
	// with files is fine (they stay, untracked until a checkpoint).
	for _, from := range []string{"beta" + r.beta.st.WorkTree(), "beta/" + filepath.Base(r.beta.st.WorkTree())} {
		dst := t.TempDir()
		os.WriteFile(filepath.Join(dst, "local.txt"), []byte("mine\n"), 0o644)
		mustCairn(t, env, "fleet", "fetch", "--remote", r.path, "--from", from, dst)
		checkSameLedger(t, env, dst, r.beta)
		mustCairn(t, env, "restore", dst, "c1")
		want := maps(r.beta.files["c1"], map[string]string{"local.txt": fileState(t, dst)["local.txt"]})
		if got := fileState(t, dst); !equalState(got, want) || got["local.txt"] == "" {
			t.Errorf("--from %s, restore c1: %v, want %v", from, got, want)
		}
	}
}

// restoreHead is the id the source's list marks ← HEAD.
func restoreHead(s *fleetSource) string {
	pos := s.st.Position()
	id := ""
	for _, r := range s.st.Records() {
		if r.SHA == pos {
			id = r.ID
		}
	}
	return id
}

func lineOf(list, id string) string {
	for _, l := range strings.Split(list, "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[1] == id {
			return l
		}
	}
	return ""
}

func maps(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

func equalState(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// checkSameLedger: cairn list in dst shows the source's ids, kinds, labels,
// commits, runs and codons, newest first.
func checkSameLedger(t *testing.T, env []string, dst string, src *fleetSource) {
	t.Helper()
	var got []record
	if err := json.Unmarshal([]byte(mustCairn(t, env, "list", dst, "--json")), &got); err != nil {
		t.Fatal(err)
	}
	want := src.st.Records()
	slices.Reverse(want)
	if len(got) < len(want) {
		t.Fatalf("list: %d records, want %d", len(got), len(want))
	}
	got = got[len(got)-len(want):] // a checkpoint made since comes first
	for i, w := range want {
		g := got[i]
		if g.ID != w.ID || g.Kind != string(w.Kind) || g.Label != w.Label || g.SHA != w.SHA || g.RunID != w.RunID || g.CodonID != w.CodonID {
			t.Errorf("record %d: %+v, want %+v", i, g, w)
		}
	}
}

// TestFleetFetchErrors: an unknown host or workspace, and a remote that does
// not exist, say so and create nothing; a password in the URL is never printed.
func TestFleetFetchErrors(t *testing.T) {
	r := newFleetRemote(t)
	state := filepath.Join(t.TempDir(), "state")
	env := []string{"CAIRN_STATE_DIR=" + state, "CAIRN_SOCKET=" + filepath.Join(t.TempDir(), "none.sock"), "HOME=" + t.TempDir()}
	dst := filepath.Join(t.TempDir(), "new")
	missing := filepath.Join(t.TempDir(), "nowhere.git")
	for _, c := range []struct {
		remote, from string
		code         int
		says         []string
	}{
		{r.path, "gamma/x", 1, []string{`no host "gamma" has replicated workspaces there`}},
		{r.path, "alpha/nope", 1, []string{`host alpha has no workspace "nope" there`, r.alphaM.Key, r.alphaM.Workspace}},
		{r.path, "alpha", 2, []string{"--from"}},
		{r.path, "beta/" + r.orphanKey + "x", 1, []string{"has no workspace"}},
		{missing, "alpha/x", 1, []string{missing, "does not appear to be a git repository"}},
		{"https://someone:hunter2secret@127.0.0.1:1/fleet.git", "alpha/x", 1, []string{"https://127.0.0.1:1/fleet.git"}},
	} {
		_, errOut, code := cairn(t, env, "fleet", "fetch", "--remote", c.remote, "--from", c.from, dst)
		if code != c.code {
			t.Errorf("fetch %s from %s: exit %d, want %d: %s", c.from, c.remote, code, c.code, errOut)
		}
		for _, s := range c.says {
			if !strings.Contains(errOut, s) {
				t.Errorf("fetch %s from %s: %q does not say %q", c.from, c.remote, errOut, s)
			}
		}
		if strings.Contains(errOut, "hunter2") || strings.Contains(errOut, "someone") {
			t.Errorf("the URL's userinfo is printed: %s", errOut)
		}
		for _, p := range []string{dst, state} {
			if _, err := os.Lstat(p); err == nil {
				t.Fatalf("fetch %s from %s created %s", c.from, c.remote, p)
			}
		}
	}
	_, errOut, code := cairn(t, env, "fleet", "list", "--remote", missing)
	if code != 1 || !strings.Contains(errOut, "does not appear to be a git repository") {
		t.Errorf("list of a missing remote: exit %d, %s", code, errOut)
	}
	if _, errOut, code := cairn(t, env, "fleet", "nope"); code != 2 || !strings.Contains(errOut, "list or fetch") {
		t.Errorf("unknown subcommand: exit %d, %s", code, errOut)
	}
}

// TestFleetFetchOverGitDaemon: the same fetch from a real git server.
func TestFleetFetchOverGitDaemon(t *testing.T) {
	r := newFleetRemote(t)
	url := startGitDaemon(t, filepath.Dir(r.path)) + "/" + filepath.Base(r.path)
	env := fleetEnv(t)
	out := mustCairn(t, env, "fleet", "list", "--remote", url)
	if !strings.Contains(out, r.alphaM.Key) || !strings.Contains(out, r.betaM.Key) {
		t.Fatalf("fleet list over git://:\n%s", out)
	}
	dst := t.TempDir()
	mustCairn(t, env, "fleet", "fetch", "--remote", url, "--from", "alpha/"+r.alphaM.Key, dst)
	checkSameLedger(t, env, dst, r.alpha)
	id := r.alphaM.Newest.ID
	mustCairn(t, env, "restore", dst, id)
	if got, want := fileState(t, dst), r.alpha.files[id]; !equalState(got, want) {
		t.Errorf("restore %s: files %v\nwant %v", id, got, want)
	}
}

// startGitDaemon serves base on a free loopback port until the test ends
// (read-only unless extra says otherwise, e.g. --enable=receive-pack), and
// returns its git:// URL once it answers.
func startGitDaemon(t *testing.T, base string, extra ...string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	args := append([]string{"daemon", "--export-all", "--reuseaddr", "--informative-errors", "--base-path=" + base,
		"--listen=127.0.0.1", "--port=" + strconv.Itoa(port)}, extra...)
	cmd := exec.Command("git", append(args, base)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "GIT_CONFIG_NOSYSTEM=1"}
	// git starts git-daemon as a child: the group is killed, and its log is
	// a file, which no child can hold Wait on.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	logPath := filepath.Join(t.TempDir(), "daemon.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd.Stderr = logFile
	if err := cmd.Start(); err != nil {
		t.Skipf("git daemon: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	})
	logs := func() string { b, _ := os.ReadFile(logPath); return string(b) }
	url := "git://127.0.0.1:" + strconv.Itoa(port)
	answers := func() bool {
		select {
		case err := <-exited:
			t.Fatalf("git daemon exited: %v\n%s", err, logs())
		default:
		}
		conn, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err == nil {
			conn.Close()
		}
		return err == nil
	}
	if !testsupport.Poll(30*time.Second, answers) {
		t.Fatalf("git daemon never answered on %s\n%s", url, logs())
	}
	return url
}

// TestFleetFetchRefusesWatched: a folder a running daemon watches is not
// filled behind its back; the message says how to go on.
func TestFleetFetchRefusesWatched(t *testing.T) {
	r := newFleetRemote(t)
	ws, state := t.TempDir(), t.TempDir()
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
	t.Cleanup(func() {
		d.Process.Signal(syscall.SIGTERM)
		d.Wait()
		if t.Failed() {
			t.Logf("daemon log:\n%s", dlog.String())
		}
	})
	// Another state directory: only the daemon can refuse, not a store.
	env := []string{"CAIRN_STATE_DIR=" + t.TempDir(), "HOME=" + t.TempDir()}
	testsupport.WaitFor(t, 20*time.Second, "the daemon's baseline", func() bool { // its log is shown on failure
		out, _, code := cairn(t, env, "list", ws, "--socket", sock)
		return code == 0 && strings.Contains(out, "c1")
	})
	_, errOut, code := cairn(t, env, "fleet", "fetch", "--socket", sock, "--remote", r.path, "--from", "alpha/"+r.alphaM.Key, ws)
	if code != 5 || !strings.Contains(errOut, "watches") || !strings.Contains(errOut, "cairn unwatch") {
		t.Errorf("fetch into a watched folder: exit %d, %s", code, errOut)
	}
	// Not watched: the same daemon lets the fetch go on.
	other := t.TempDir()
	mustCairn(t, env, "fleet", "fetch", "--socket", sock, "--remote", r.path, "--from", "alpha/"+r.alphaM.Key, other)
}

// TestFleetFetchAsRootCreatesNothingInAUsersFolder: root fetching into a
// folder that does not exist yet, inside a folder another user owns, is
// refused before anything is created there (root never acts on a user's
// folders itself).
func TestFleetFetchAsRootCreatesNothingInAUsersFolder(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: chowns a folder to another uid")
	}
	r := newFleetRemote(t)
	users := t.TempDir()
	if err := os.Chown(users, 12345, 12345); err != nil {
		t.Fatal(err)
	}
	env := []string{"CAIRN_STATE_DIR=" + filepath.Join(t.TempDir(), "state"), "CAIRN_SOCKET=" + filepath.Join(t.TempDir(), "none.sock"), "HOME=" + t.TempDir()}
	dst := filepath.Join(users, "new")
	_, errOut, code := cairn(t, env, "fleet", "fetch", "--remote", r.path, "--from", "alpha/"+r.alphaM.Key, dst)
	if code != 5 || !strings.Contains(errOut, "belongs to 12345") {
		t.Fatalf("exit %d: %s; want a refusal (5) naming the owner", code, errOut)
	}
	if _, err := os.Lstat(dst); !os.IsNotExist(err) {
		t.Errorf("root created %s in a user's folder: %v", dst, err)
	}
}
