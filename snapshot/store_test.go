package snapshot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// plainGit runs the git a user would run by hand on the store, with only
// GIT_DIR (and an isolated HOME) set: the test reads what anyone would read.
func plainGit(t *testing.T, gitDir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Env = []string{"GIT_DIR=" + gitDir, "HOME=" + t.TempDir(), "GIT_CONFIG_NOSYSTEM=1", "PATH=" + os.Getenv("PATH"), "LC_ALL=C"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func hankweaveWorkspace(t *testing.T) string {
	t.Helper()
	exec := t.TempDir()
	for _, d := range []string{".hankweave", "agentRoot/read_only_data_source"} {
		if err := os.MkdirAll(filepath.Join(exec, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	putFile(t, filepath.Join(exec, "agentRoot/analysis-haiku.md"), "haiku\n")
	putFile(t, filepath.Join(exec, "agentRoot/read_only_data_source/in.csv"), "a,b\n")
	return exec
}

// TestSeedLayoutAndMessages reads the store with plain `git log --all` and
// checks it against docs/runtime-formats.md: paths, identity, messages,
// branches.
func TestSeedLayoutAndMessages(t *testing.T) {
	ctx := context.Background()
	exec := hankweaveWorkspace(t)
	st, err := Open(ctx, exec, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Layout() != LayoutHankweave || st.WorkTree() != filepath.Join(exec, "agentRoot") {
		t.Fatalf("layout %s, work tree %s", st.Layout(), st.WorkTree())
	}
	gitDir := filepath.Join(exec, ".hankweave/checkpoints/.hankweavecheckpoints")
	if st.GitDir() != gitDir {
		t.Fatalf("store at %s, want %s", st.GitDir(), gitDir)
	}
	gc, err := os.ReadFile(filepath.Join(exec, ".hankweave/checkpoints/.gitconfig"))
	if err != nil || string(gc) != "[user]\n  name = Hankweave Runtime\n  email = froggie@southbridge.ai\n[commit]\n  gpgsign = false\n" {
		t.Fatalf(".gitconfig = %q, %v", gc, err)
	}
	excl, _ := os.ReadFile(filepath.Join(gitDir, "info/exclude"))
	for _, want := range []string{"/read_only_data_source/", "/rigArchive/", "/.hankweave/", "/.hankweave.backup-*/"} {
		if !strings.Contains(string(excl), want+"\n") {
			t.Errorf("info/exclude lacks %s", want)
		}
	}
	const run = "1753110463686-yayna"
	ts := time.Now().UTC().Truncate(time.Millisecond).Add(2 * time.Second)
	rec, err := st.Seal(ctx, SealRequest{Kind: ckpt.KindCompleted, CodonID: "write-line", CodonName: "Write one line",
		RunID: run, Patterns: []string{"analysis-haiku.md"}, Duration: 1234 * time.Millisecond, Time: ts})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Ref != "refs/heads/run-"+run || rec.State != ckpt.StateOK {
		t.Fatalf("record %+v", rec)
	}

	oneline := plainGit(t, gitDir, "log", "--all", "--format=%s")
	want := "completed:write-line [run:" + run + "] Write one line\nInitial checkpoint setup\n"
	if oneline != want {
		t.Fatalf("git log --all first lines:\n%s\nwant:\n%s", oneline, want)
	}
	body := plainGit(t, gitDir, "log", "-1", "--format=%B", "run-"+run)
	wantBody := "completed:write-line [run:" + run + "] Write one line\n\n" +
		"Codon: Write one line\nStatus: completed\nTimestamp: " + ts.Format("2006-01-02T15:04:05.000Z") + "\nDuration: 1234ms\n\n" +
		"Cairn-Ledger-Id: c1\nCairn-Kind: completed\nCairn-Run: " + run + "\nCairn-Codon: write-line\n\n"
	if body != wantBody {
		t.Fatalf("message:\n%q\nwant:\n%q", body, wantBody)
	}
	if got := plainGit(t, gitDir, "log", "--format=%an <%ae>|%cn <%ce>", "-1", "run-"+run); got != "Hankweave Runtime <froggie@southbridge.ai>|Hankweave Runtime <froggie@southbridge.ai>\n" {
		t.Errorf("identity %q", got)
	}
	// main holds only the empty initial commit; the run branch forks from it.
	if got := plainGit(t, gitDir, "rev-list", "--count", "main"); got != "1\n" {
		t.Errorf("main has %s commits", got)
	}
	if got := plainGit(t, gitDir, "ls-tree", "-r", "--name-only", "main"); got != "" {
		t.Errorf("initial commit not empty: %q", got)
	}
	if got := plainGit(t, gitDir, "rev-parse", "run-"+run+"^"); got != plainGit(t, gitDir, "rev-parse", "main") {
		t.Errorf("run branch parent %s is not main", got)
	}
	if got := plainGit(t, gitDir, "ls-tree", "-r", "--name-only", "run-"+run); got != "analysis-haiku.md\n" {
		t.Errorf("checkpoint holds %q", got)
	}
	if got := plainGit(t, gitDir, "symbolic-ref", "HEAD"); got != "refs/heads/main\n" {
		t.Errorf("HEAD moved: %q", got)
	}
	// The shared index is never written; cairn keeps its own.
	if _, err := os.Stat(filepath.Join(gitDir, "index")); err == nil {
		t.Error("the store's shared index was written")
	}
	// A second checkpoint of the run goes on the same branch, parent the first.
	rec2, err := st.Seal(ctx, SealRequest{Kind: ckpt.KindRigSetup, CodonID: "review#2", CodonName: "Review", RunID: run,
		Patterns: []string{"analysis-haiku.md"}})
	if err != nil {
		t.Fatal(err)
	}
	if rec2.Parent != rec.SHA || !regexp.MustCompile(`^rig-setup:review#2 \[run:`+run+`\] Review\n`).MatchString(plainGit(t, gitDir, "log", "-1", "--format=%B", rec2.SHA)) {
		t.Errorf("second checkpoint %+v", rec2)
	}
}

func TestLegacyStoreMigratedAndQuarantined(t *testing.T) {
	ctx := context.Background()
	exec := hankweaveWorkspace(t)
	ckpt := filepath.Join(exec, ".hankweave/checkpoints")
	// A pre-0.10 store: checkpoints/.git.
	legacy := filepath.Join(ckpt, ".git")
	if err := os.MkdirAll(ckpt, 0o755); err != nil {
		t.Fatal(err)
	}
	plainGit(t, legacy, "init", "-q", "--initial-branch=main")
	if _, err := Open(ctx, exec, Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(legacy); err == nil {
		t.Fatal("legacy .git still there after migration")
	}
	if _, err := os.Stat(filepath.Join(ckpt, ".hankweavecheckpoints/HEAD")); err != nil {
		t.Fatal("migrated store missing")
	}
	// Both present: the legacy one is quarantined, the current one kept.
	plainGit(t, legacy, "init", "-q", "--initial-branch=main")
	if _, err := Open(ctx, exec, Options{}); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(ckpt)
	var q []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".hankweavecheckpoints-quarantine-") {
			q = append(q, e.Name())
		}
	}
	if len(q) != 1 || !regexp.MustCompile(`^\.hankweavecheckpoints-quarantine-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d$`).MatchString(q[0]) {
		t.Fatalf("quarantine folders %v", q)
	}
}

func TestHalfBuiltStoreSwept(t *testing.T) {
	ctx := context.Background()
	exec := hankweaveWorkspace(t)
	ckpt := filepath.Join(exec, ".hankweave/checkpoints")
	left := filepath.Join(ckpt, ".hankweavecheckpoints-tmp-deadbeef")
	if err := os.MkdirAll(filepath.Join(left, "objects"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, exec, Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(left); err == nil {
		t.Error("leftover temporary store not swept")
	}
}

// hashTree fingerprints every file and mode under dir.
func hashTree(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := d.Info()
		h.Write([]byte(p + fi.Mode().String()))
		if d.Type().IsRegular() {
			b, _ := os.ReadFile(p)
			h.Write(b)
		}
		return nil
	})
	return hex.EncodeToString(h.Sum(nil))
}

// TestUserRepositoryUntouched: a workspace that is itself a git repository
// keeps its .git byte for byte; the plain store lives under the state directory.
func TestUserRepositoryUntouched(t *testing.T) {
	ctx := context.Background()
	ws, state := t.TempDir(), t.TempDir()
	putFile(t, filepath.Join(ws, "main.go"), "package main\n")
	userGit := filepath.Join(ws, ".git")
	plainGit(t, userGit, "init", "-q")
	before := hashTree(t, userGit)
	st, err := Open(ctx, ws, Options{StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	if st.Layout() != LayoutPlain || !strings.HasPrefix(st.GitDir(), state) {
		t.Fatalf("store %s (layout %s) not under the state directory", st.GitDir(), st.Layout())
	}
	putFile(t, filepath.Join(ws, "main.go"), "package main\n// edit\n")
	if _, err := st.Seal(ctx, SealRequest{Kind: ckpt.KindManual}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Seal(ctx, SealRequest{Kind: ckpt.KindManual, Changed: []string{"main.go"}}); err != nil {
		t.Fatal(err)
	}
	if after := hashTree(t, userGit); after != before {
		t.Error("the user's .git changed")
	}
	// The same folder through a symlink is the same store.
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(ws, link); err != nil {
		t.Fatal(err)
	}
	st2, err := Open(ctx, link, Options{StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	if st2.GitDir() != st.GitDir() || len(st2.Records()) != 2 {
		t.Errorf("store via symlink: %s with %d records", st2.GitDir(), len(st2.Records()))
	}
}

func TestParseVersion(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Version
		ok   bool
	}{
		{"git version 2.39.5\n", Version{2, 39, 5}, true},
		{"git version 2.28.0.windows.1", Version{2, 28, 0}, true},
		{"git version 2.45", Version{2, 45, 0}, true},
		{"hub version 1", Version{}, false},
	} {
		v, err := ParseVersion(tc.in)
		if (err == nil) != tc.ok || v != tc.want {
			t.Errorf("ParseVersion(%q) = %v, %v", tc.in, v, err)
		}
	}
	if (Version{2, 27, 9}).AtLeast(MinGitVersion) || !(Version{2, 28, 0}).AtLeast(MinGitVersion) {
		t.Error("AtLeast")
	}
}
