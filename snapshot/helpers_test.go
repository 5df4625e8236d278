//go:build unix

package snapshot

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// Helpers shared by the round-trip, names and partial tests. Every test runs
// the real git against a store in t.TempDir(); nothing is mocked.

// newTestStore opens a plain-layout store of a fresh workspace.
func newTestStore(t *testing.T, opts Options) (string, *Store) {
	t.Helper()
	dir := t.TempDir()
	return dir, openTestStore(t, dir, opts)
}

// openTestStore opens a plain-layout store of dir with its own state directory.
func openTestStore(t *testing.T, dir string, opts Options) *Store {
	t.Helper()
	opts.Layout = LayoutPlain
	if opts.Engine == "" {
		opts.Engine = EngineInproc // the in-process engine where a test asks for it (modeInproc); git per request otherwise
	}
	if opts.StateDir == "" {
		opts.StateDir = t.TempDir()
	}
	st, err := Open(context.Background(), dir, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// sealMode names how a seal finds what changed.
type sealMode string

const (
	modeFull        sealMode = "full"        // Changed == nil: a full reconcile
	modeIncremental sealMode = "incremental" // Changed = the touched paths, by the git engine
	modeInproc      sealMode = "inproc"      // Changed = the touched paths, by the in-process engine
)

var sealModes = []sealMode{modeFull, modeIncremental, modeInproc}

// sealWith seals a manual checkpoint, by full reconcile or with touched as
// the changed set, by the engine the mode names. An in-process seal that git
// sealed instead fails the test, unless an ignore file is among the paths
// (that is a full reconcile by git, by design).
func sealWith(t *testing.T, st *Store, mode sealMode, touched []string) ckpt.Record {
	t.Helper()
	switch mode {
	case modeFull:
		return mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
	case modeIncremental:
		return mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, Changed: nonNil(touched), engine: EngineGit})
	}
	rec := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, Changed: nonNil(touched)})
	if st.lastEngine != EngineInproc && !slices.ContainsFunc(touched, func(p string) bool { return path.Base(p) == ".gitignore" }) {
		t.Fatalf("Seal(%s) was sealed by the %s engine, want the in-process one", describeChanged(touched), st.lastEngine)
	}
	return rec
}

// nonNil keeps an empty changed set incremental: nil would mean a full reconcile.
func nonNil(paths []string) []string {
	if paths == nil {
		return []string{}
	}
	return paths
}

// mustSeal seals and fails the test unless a checkpoint was committed.
func mustSeal(t *testing.T, st *Store, req SealRequest) ckpt.Record {
	t.Helper()
	// A seal that blocks (a FIFO opened for reading) fails here instead of hanging the run.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rec, err := st.Seal(ctx, req)
	if err != nil {
		t.Fatalf("Seal(%s): %v (state %s)", describeChanged(req.Changed), err, rec.State)
	}
	if rec.SHA == "" || rec.State == ckpt.StateFailed {
		t.Fatalf("Seal(%s): no checkpoint: %+v", describeChanged(req.Changed), rec)
	}
	return rec
}

// describeChanged names a changed set briefly, for messages.
func describeChanged(changed []string) string {
	switch {
	case changed == nil:
		return "full reconcile"
	case len(changed) > 6:
		return fmt.Sprintf("changed=%.200q… (%d paths)", changed[:6], len(changed))
	}
	return fmt.Sprintf("changed=%q", changed)
}

// requireOK fails unless the seal ended ok with no issue.
func requireOK(t *testing.T, rec ckpt.Record) {
	t.Helper()
	if rec.State != ckpt.StateOK || len(rec.Issues) > 0 {
		t.Errorf("seal %s: state %s, issues %q; want ok with no issues", rec.ID, rec.State, rec.Issues)
	}
}

// requireCounts checks the added/changed/removed counts of a record.
func requireCounts(t *testing.T, rec ckpt.Record, added, changed, removed int) {
	t.Helper()
	if rec.Added != added || rec.Changed != changed || rec.Removed != removed {
		t.Errorf("seal %s: added/changed/removed = %d/%d/%d, want %d/%d/%d",
			rec.ID, rec.Added, rec.Changed, rec.Removed, added, changed, removed)
	}
}

// gitOut runs git through the store's runner and returns stdout.
func gitOut(t *testing.T, st *Store, stdin io.Reader, args ...string) []byte {
	t.Helper()
	out, err := st.git.Run(context.Background(), stdin, args...)
	if err != nil {
		t.Fatalf("git %q: %v", args, err)
	}
	return out
}

// treeOf is the tree sha of a commit.
func treeOf(t *testing.T, st *Store, commit string) string {
	t.Helper()
	return strings.TrimSpace(string(gitOut(t, st, nil, "rev-parse", "--verify", commit+"^{tree}")))
}

// treeEntry is one line of `ls-tree -r`.
type treeEntry struct {
	mode, typ, sha string
}

// lsTree lists every entry of a commit's tree, by path (raw bytes, no quoting).
func lsTree(t *testing.T, st *Store, commit string) map[string]treeEntry {
	t.Helper()
	out := gitOut(t, st, nil, "ls-tree", "-r", "-z", "--full-tree", commit)
	entries := map[string]treeEntry{}
	for _, line := range splitNul(out) {
		meta, p, ok := strings.Cut(line, "\t")
		f := strings.Fields(meta)
		if !ok || len(f) != 3 {
			t.Fatalf("ls-tree %s: cannot parse %q", commit, line)
		}
		if _, dup := entries[p]; dup {
			t.Fatalf("ls-tree %s: path %q listed twice", commit, p)
		}
		entries[p] = treeEntry{mode: f[0], typ: f[1], sha: f[2]}
	}
	return entries
}

// treePaths is the sorted path list of a commit's tree.
func treePaths(t *testing.T, st *Store, commit string) []string {
	t.Helper()
	var ps []string
	for p := range lsTree(t, st, commit) {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return ps
}

// readBlobs reads blobs by sha with one `cat-file --batch`.
func readBlobs(t *testing.T, st *Store, shas []string) map[string][]byte {
	t.Helper()
	if len(shas) == 0 {
		return nil
	}
	out := gitOut(t, st, strings.NewReader(strings.Join(shas, "\n")+"\n"), "cat-file", "--batch")
	r := bufio.NewReader(bytes.NewReader(out))
	blobs := map[string][]byte{}
	for range shas {
		hdr, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("cat-file --batch: header: %v", err)
		}
		f := strings.Fields(hdr)
		if len(f) != 3 || f[1] != "blob" {
			t.Fatalf("cat-file --batch: unexpected header %q", hdr)
		}
		n, err := strconv.Atoi(f[2])
		if err != nil {
			t.Fatalf("cat-file --batch: size in %q: %v", hdr, err)
		}
		body := make([]byte, n+1) // contents and the trailing LF
		if _, err := io.ReadFull(r, body); err != nil {
			t.Fatalf("cat-file --batch: body of %s: %v", f[0], err)
		}
		blobs[f[0]] = body[:n]
	}
	return blobs
}

// gitFileMode is the mode git records for a regular file: 100755 when the
// owner's execute bit is set, else 100644.
func gitFileMode(m fs.FileMode) string {
	if m&0o100 != 0 {
		return "100755"
	}
	return "100644"
}

// assertTreeMatchesDisk checks that the commit's tree holds exactly wantPaths,
// each a regular file whose bytes and mode equal the file on disk, and that
// no gitlink (160000) or symlink (120000) entry appears anywhere.
func assertTreeMatchesDisk(t *testing.T, st *Store, sha string, wantPaths []string) {
	t.Helper()
	entries := lsTree(t, st, sha)
	var got []string
	var shas []string
	for p, e := range entries {
		got = append(got, p)
		switch {
		case e.mode == "160000" || e.typ == "commit":
			t.Errorf("tree %s: %q recorded as a gitlink (%s %s)", sha[:12], p, e.mode, e.typ)
		case e.mode == "120000":
			t.Errorf("tree %s: %q recorded as a symlink", sha[:12], p)
		case e.typ != "blob":
			t.Errorf("tree %s: %q has type %s", sha[:12], p, e.typ)
		default:
			shas = append(shas, e.sha)
		}
	}
	want := slices.Clone(wantPaths)
	slices.Sort(got)
	slices.Sort(want)
	want = slices.Compact(want)
	if !slices.Equal(got, want) {
		t.Errorf("tree %s paths:\n got  %q\n want %q\n extra %q\n missing %q",
			sha[:12], got, want, setMinus(got, want), setMinus(want, got))
	}
	blobs := readBlobs(t, st, shas)
	for _, p := range want {
		e, ok := entries[p]
		if !ok || e.typ != "blob" {
			continue
		}
		abs := filepath.Join(st.WorkTree(), filepath.FromSlash(p))
		fi, err := os.Lstat(abs)
		if err != nil {
			t.Errorf("tree %s holds %q, but on disk: %v", sha[:12], p, err)
			continue
		}
		if !fi.Mode().IsRegular() {
			t.Errorf("tree %s holds %q, a %s on disk", sha[:12], p, fi.Mode().Type())
			continue
		}
		if m := gitFileMode(fi.Mode()); e.mode != m {
			t.Errorf("tree %s: %q has mode %s, disk %v wants %s", sha[:12], p, e.mode, fi.Mode(), m)
		}
		disk, err := os.ReadFile(abs)
		if err != nil {
			t.Errorf("read %q: %v", p, err)
			continue
		}
		if b := blobs[e.sha]; !bytes.Equal(b, disk) {
			t.Errorf("tree %s: %q holds %d bytes (%.40q), disk %d bytes (%.40q)", sha[:12], p, len(b), b, len(disk), disk)
		}
	}
}

// setMinus is a minus b, for messages.
func setMinus(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// regularFiles lists every regular file under root (slash-separated, relative),
// never following symlinks: what a checkpoint of a workspace without ignore
// rules or exclusions holds.
func regularFiles(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(abs string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			rel, _ := filepath.Rel(root, abs)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", root, err)
	}
	slices.Sort(files)
	return files
}

// writeFile writes a work-tree file (slash-separated rel), creating its folders.
func writeFile(t *testing.T, root, rel string, data string, mode fs.FileMode) {
	t.Helper()
	abs := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(abs, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
	// WriteFile keeps the mode of an existing file; the caller asked for this one.
	if err := os.Chmod(abs, mode); err != nil {
		t.Fatal(err)
	}
}

// writeTree writes files (rel → contents) with mode 0644.
func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for rel, data := range files {
		writeFile(t, root, rel, data, 0o644)
	}
}

func removeAll(t *testing.T, root, rel string) {
	t.Helper()
	if err := os.RemoveAll(filepath.Join(root, filepath.FromSlash(rel))); err != nil {
		t.Fatal(err)
	}
}

func rename(t *testing.T, root, from, to string) {
	t.Helper()
	abs := filepath.Join(root, filepath.FromSlash(to))
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(root, filepath.FromSlash(from)), abs); err != nil {
		t.Fatal(err)
	}
}

func chmod(t *testing.T, root, rel string, mode fs.FileMode) {
	t.Helper()
	if err := os.Chmod(filepath.Join(root, filepath.FromSlash(rel)), mode); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, root, target, rel string) {
	t.Helper()
	if err := os.Symlink(target, filepath.Join(root, filepath.FromSlash(rel))); err != nil {
		t.Fatal(err)
	}
}

// mkfifo makes a named pipe in the work tree.
func mkfifo(t *testing.T, root, rel string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(filepath.Join(root, filepath.FromSlash(rel))), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(root, filepath.FromSlash(rel)), 0o644); err != nil {
		t.Fatalf("mkfifo %s: %v", rel, err)
	}
}

// mksocket leaves a unix socket file in the work tree (the listener is
// closed; the file stays, as a crashed server's would). The socket is bound
// in a short folder and renamed into place: sun_path holds ~100 bytes.
func mksocket(t *testing.T, root, rel string) {
	t.Helper()
	short, err := os.MkdirTemp("", "sk")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(short)
	tmp := filepath.Join(short, "s")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		t.Fatalf("listen %s: %v", tmp, err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
	abs := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.Rename(tmp, abs); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(abs); err != nil || fi.Mode()&fs.ModeSocket == 0 {
		t.Fatalf("socket %s not left on disk: %v %v", abs, fi, err)
	}
}

// hostGit runs the machine's git for test fixtures (a repository cloned inside
// the work tree), with an environment isolated from the user's and from cairn's.
func hostGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(hostGitPath(t), args...)
	cmd.Dir = dir
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"XDG_CONFIG_HOME=" + home,
		"GIT_CONFIG_NOSYSTEM=1",
		"LC_ALL=C",
		"GIT_AUTHOR_NAME=fixture", "GIT_AUTHOR_EMAIL=fixture@example.com",
		"GIT_COMMITTER_NAME=fixture", "GIT_COMMITTER_EMAIL=fixture@example.com",
		"GIT_AUTHOR_DATE=2020-01-01T00:00:00Z", "GIT_COMMITTER_DATE=2020-01-01T00:00:00Z",
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %q in %s: %v\n%s", args, dir, err, out)
	}
	return string(out)
}

func hostGitPath(t *testing.T) string {
	t.Helper()
	p, _, err := FindGit(context.Background())
	if err != nil {
		t.Skipf("git: %v", err)
	}
	return p
}

// hashDir fingerprints every file (path, mode, size, mtime, contents) under
// root, to show that cairn never touched a repository it found inside the work tree.
func hashDir(t *testing.T, root string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(root, func(abs string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%v\x00%d\x00%d\x00", abs, fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(abs)
			if err != nil {
				return err
			}
			h.Write(b)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("hash %s: %v", root, err)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

// issuePaths lists the paths a record names in its issues.
func issuePaths(v []ckpt.PathIssue) []string {
	var out []string
	for _, i := range v {
		out = append(out, i.Path)
	}
	return out
}
