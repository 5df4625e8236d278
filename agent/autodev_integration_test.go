package agent_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/agent/hankweave/hwsim"
)

// autodevGit runs git as the user would in dir.
func autodevGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=User", "-c", "user.email=user@example.com", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	cmd.Env = []string{"HOME=" + filepath.Dir(dir), "GIT_CONFIG_NOSYSTEM=1", "PATH=" + os.Getenv("PATH"), "LC_ALL=C"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestAutodevDaemonEndToEnd watches a repository in the autodev layout with
// the real daemon: the baseline of a dirty tree, cairn checkpoint, cairn
// list, cairn restore (parking the dirty tree), an unknown id, a live run,
// the undo through the pre-restore entry; and a folder that is no repository
// until git init.
func TestAutodevDaemonEndToEnd(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(base, "repo")
	write(t, filepath.Join(dir, "a.txt"), "one\n")
	autodevGit(t, dir, "init", "-q")
	autodevGit(t, dir, "add", "-A")
	autodevGit(t, dir, "commit", "-q", "-m", "user: first")
	write(t, filepath.Join(dir, "a.txt"), "two\n") // dirty: a baseline
	plain := filepath.Join(base, "plain")
	write(t, filepath.Join(plain, "p.txt"), "p\n")

	cfg := configFile(t, fmt.Sprintf("[[watch]]\npath = %q\nlayout = \"autodev\"\n\n[[watch]]\npath = %q\nlayout = \"autodev\"\n", dir, plain))
	d := startDaemon(t, "", "--config", cfg)
	sock := []string{"--socket", d.socket}

	waitFor(t, 30*time.Second, "the baseline", func() bool {
		ws, ok := d.workspace(dir)
		return ok && ws.Last == "c1"
	})
	if s := autodevGit(t, dir, "log", "-1", "--format=%s|%an <%ae>"); s != "autodev: baseline before run|autodev <autodev@localhost>" {
		t.Fatalf("baseline commit: %q", s)
	}
	baseline := autodevGit(t, dir, "rev-parse", "HEAD")

	// Not a repository: status and list say so, and it is picked up after git init.
	waitFor(t, 30*time.Second, "the not-a-repository notice", func() bool {
		ws, ok := d.workspace(plain)
		return ok && ws.Notice == "Not a git repository; checkpoints/rollback disabled (git init to enable recovery snapshots)"
	})
	if out, _, code := cairnRun(t, append([]string{"list", plain}, sock...)...); code != 0 ||
		out != "Not a git repository; checkpoints/rollback disabled (git init to enable recovery snapshots)\n" {
		t.Fatalf("list of a folder with no repository (%d): %q", code, out)
	}

	// cairn checkpoint: a task on the user's branch.
	write(t, filepath.Join(dir, "a.txt"), "three\n")
	out, errOut, code := cairnRun(t, append([]string{"checkpoint", dir, "--label", "step three"}, sock...)...)
	if code != 0 {
		t.Fatalf("checkpoint (%d): %s%s", code, out, errOut)
	}
	task := autodevGit(t, dir, "rev-parse", "HEAD")
	if !strings.HasPrefix(out, "✔ c2 "+task[:7]+" task: step three") {
		t.Fatalf("checkpoint printed %q", out)
	}
	if s := autodevGit(t, dir, "log", "-1", "--format=%s"); s != "autodev: step three" {
		t.Fatalf("task commit: %q", s)
	}

	// cairn list: newest first, ← HEAD on the checkpoint the repository is on.
	out, errOut, code = cairnRun(t, append([]string{"list", dir}, sock...)...)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 2 {
		t.Fatalf("list (%d): %q %s", code, out, errOut)
	}
	if want := "✔ c2   step three   — · " + task[:7] + " · task · "; !strings.HasPrefix(lines[0], want) || !strings.HasSuffix(lines[0], "← HEAD") {
		t.Fatalf("list line %q, want %q… ← HEAD", lines[0], want)
	}
	if want := "─ c1   baseline before run   — · " + baseline[:7] + " · baseline · "; !strings.HasPrefix(lines[1], want) || strings.Contains(lines[1], "HEAD") {
		t.Fatalf("list line %q, want %q…", lines[1], want)
	}

	// A dirty tree: parked on a branch, then reset to c1.
	write(t, filepath.Join(dir, "a.txt"), "work in progress\n")
	out, errOut, code = cairnRun(t, append([]string{"restore", dir, "c1"}, sock...)...)
	if code != 0 || !strings.HasPrefix(out, `Restored to "baseline before run" (`+baseline[:7]+`); saved on autodev/pre-restore-`) || !strings.HasSuffix(out, ".\n") {
		t.Fatalf("restore (%d): %q %s", code, out, errOut)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "two\n" {
		t.Fatalf("a.txt after the restore: %q", b)
	}

	// An unknown id, then a live run: refused with the seed's words, nothing moves.
	_, errOut, code = cairnRun(t, append([]string{"restore", dir, "c9"}, sock...)...)
	if code != 5 || errOut != "Restore failed: unknown checkpoint: c9\n" { // refused, as every unknown checkpoint (README, "Exit codes")
		t.Fatalf("unknown id (%d): %q", code, errOut)
	}
	lock := filepath.Join(dir, ".hankweave", "runtime.lock")
	now := time.Now().UTC().Format(time.RFC3339Nano)
	write(t, lock, fmt.Sprintf(`{"pid":%d,"lockId":"l","runId":"r","startTime":%q,"lastHeartbeat":%q,"port":1}`, os.Getpid(), now, now))
	_, errOut, code = cairnRun(t, append([]string{"restore", dir, "c3"}, sock...)...)
	if code != 5 || errOut != "Stop the run before restoring — restore resets the project tree.\n" {
		t.Fatalf("live run (%d): %q", code, errOut)
	}
	if err := os.Remove(lock); err != nil {
		t.Fatal(err)
	}

	// Undo through the pre-restore entry (c3), listed newest.
	out, _, _ = cairnRun(t, append([]string{"list", dir}, sock...)...)
	if !strings.HasPrefix(out, "⤿ c3   ") {
		t.Fatalf("the pre-restore entry is not listed first:\n%s", out)
	}
	out, errOut, code = cairnRun(t, append([]string{"restore", dir, "c3"}, sock...)...)
	if code != 0 || !strings.HasPrefix(out, "Restored to ") || strings.Contains(out, "saved on") {
		t.Fatalf("undo (%d): %q %s", code, out, errOut)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "work in progress\n" {
		t.Fatalf("a.txt after the undo: %q", b)
	}

	// git init in the folder that was none: watched, and its baseline made.
	autodevGit(t, plain, "init", "-q")
	waitFor(t, 30*time.Second, "the baseline after git init", func() bool {
		ws, ok := d.workspace(plain)
		return ok && ws.Last == "c1" && ws.Notice == ""
	})
	if s := autodevGit(t, plain, "log", "-1", "--format=%s"); s != "autodev: baseline before run" {
		t.Fatalf("baseline after git init: %q", s)
	}
}

// TestAutodevLifecycleTask: where a runtime writes lifecycle markers, a
// codon it completes becomes a task checkpoint (label the codon's name, task
// its id), once.
func TestAutodevLifecycleTask(t *testing.T) {
	exec, sim := newHankExec(t, hwsim.Plan(hwsim.Codon{ID: "build", Name: "Build it", Files: []string{"src"}}))
	write(t, filepath.Join(exec, ".gitignore"), ".hankweave/\n")
	autodevGit(t, exec, "init", "-q")
	autodevGit(t, exec, "add", "-A")
	autodevGit(t, exec, "commit", "-q", "-m", "user: first")
	d := startDaemon(t, "", "--config", configFile(t, fmt.Sprintf("[[watch]]\npath = %q\nlayout = \"autodev\"\n", exec)))
	waitFor(t, 30*time.Second, "the workspace watched", func() bool {
		ws, ok := d.workspace(exec)
		return ok && ws.State == "watching"
	})
	sim.StartRun()
	sim.StartCodon("build")
	write(t, filepath.Join(sim.AgentRoot(), "src", "main.go"), "package main\n")
	sim.CompleteCodon("build")
	waitFor(t, 30*time.Second, "the task checkpoint", func() bool {
		ws, _ := d.workspace(exec)
		return ws.Last == "c1"
	})
	if s := autodevGit(t, exec, "log", "-1", "--format=%s%n%b"); !strings.HasPrefix(s, "autodev: Build it\n") || !strings.Contains(s, "Autodev-Task: build") {
		t.Fatalf("task commit:\n%s", s)
	}
	if files := autodevGit(t, exec, "show", "--name-only", "--format=", "HEAD"); !strings.Contains(files, "src/main.go") || strings.Contains(files, ".hankweave") {
		t.Fatalf("task commit files:\n%s", files)
	}
	out, _, _ := cairnRun(t, "list", exec, "--socket", d.socket)
	if !strings.HasPrefix(out, "✔ c1   Build it   build · ") {
		t.Fatalf("list:\n%s", out)
	}
	sim.Shutdown()
}
