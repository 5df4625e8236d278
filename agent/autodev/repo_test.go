package autodev_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/agent/autodev"
)

// userGit runs git as the user would in dir, with their identity.
func userGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := userGitErr(t, dir, args...)
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return out
}

func userGitErr(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=User", "-c", "user.email=user@example.com", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	cmd.Env = []string{"HOME=" + filepath.Dir(dir), "GIT_CONFIG_NOSYSTEM=1", "PATH=" + os.Getenv("PATH"), "LC_ALL=C",
		"GIT_EDITOR=true", "GIT_MERGE_AUTOEDIT=no"}
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func write(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// newRepo is a repository with one commit of the user's (a.txt, .gitignore).
func newRepo(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ws")
	write(t, filepath.Join(dir, "a.txt"), "one\n")
	write(t, filepath.Join(dir, ".gitignore"), "*.log\n")
	userGit(t, dir, "init", "-q")
	userGit(t, dir, "add", "-A")
	userGit(t, dir, "commit", "-q", "-m", "user: first")
	return dir
}

func open(t *testing.T, dir string) *autodev.Repo {
	t.Helper()
	r, err := autodev.Open(context.Background(), dir, filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// repoSnap is what a checkpoint must leave alone: config, hooks, every reflog
// but HEAD's and the branch's, and the refs.
type repoSnap struct {
	config, hooks string
	reflogs       map[string]string
}

func snap(t *testing.T, dir string) repoSnap {
	t.Helper()
	s := repoSnap{config: read(t, filepath.Join(dir, ".git", "config")), reflogs: map[string]string{}}
	var hooks strings.Builder
	_ = filepath.WalkDir(filepath.Join(dir, ".git", "hooks"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(p)
			fi, _ := d.Info()
			fmt.Fprintf(&hooks, "%s %v %x\n", p, fi.Mode(), b)
		}
		return nil
	})
	s.hooks = hooks.String()
	logs := filepath.Join(dir, ".git", "logs")
	_ = filepath.WalkDir(logs, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(logs, p)
			b, _ := os.ReadFile(p)
			s.reflogs[filepath.ToSlash(rel)] = string(b)
		}
		return nil
	})
	return s
}

// gained is what each reflog gained between two snapshots (whole lines).
func gained(before, after repoSnap) map[string][]string {
	out := map[string][]string{}
	for name, log := range after.reflogs {
		added := strings.TrimPrefix(log, before.reflogs[name])
		if added == log && before.reflogs[name] != "" {
			out[name] = append(out[name], "REWRITTEN")
			continue
		}
		for _, l := range strings.Split(strings.TrimSpace(added), "\n") {
			if l != "" {
				_, msg, _ := strings.Cut(l, "\t")
				out[name] = append(out[name], msg)
			}
		}
	}
	return out
}

func TestAutodevBaselineDirtyThenClean(t *testing.T) {
	ctx := context.Background()
	dir := newRepo(t)
	first := userGit(t, dir, "rev-parse", "HEAD")
	write(t, filepath.Join(dir, "a.txt"), "two\n")
	write(t, filepath.Join(dir, "new.txt"), "new\n")
	write(t, filepath.Join(dir, "debug.log"), "ignored\n")
	write(t, filepath.Join(dir, ".autodev", "memory.md"), "what the run learned\n")
	// Staged, then changed again: the checkpoint holds the work tree.
	userGit(t, dir, "add", "new.txt")
	write(t, filepath.Join(dir, "new.txt"), "newer\n")
	before := snap(t, dir)
	r := open(t, dir)

	e, made, err := r.Checkpoint(ctx, autodev.Request{Kind: autodev.KindBaseline, Label: autodev.BaselineLabel})
	if err != nil || !made {
		t.Fatalf("baseline: made %v, %v", made, err)
	}
	if e.ID != "c1" || e.Kind != autodev.KindBaseline || e.Label != autodev.BaselineLabel {
		t.Fatalf("entry %+v", e)
	}
	head := userGit(t, dir, "rev-parse", "HEAD")
	if e.Commit != head || userGit(t, dir, "rev-parse", "HEAD^") != first {
		t.Fatalf("the baseline is not the new tip on top of the user's commit: %s %s", e.Commit, head)
	}
	if got := userGit(t, dir, "log", "-1", "--format=%s|%an <%ae>|%cn <%ce>"); got != "autodev: baseline before run|autodev <autodev@localhost>|autodev <autodev@localhost>" {
		t.Fatalf("commit shape: %q", got)
	}
	files := strings.Fields(userGit(t, dir, "ls-tree", "-r", "--name-only", "HEAD"))
	if !slices.Equal(files, []string{".gitignore", "a.txt", "new.txt"}) {
		t.Fatalf("the checkpoint holds %v (want everything but .autodev/ and what .gitignore ignores)", files)
	}
	if got := userGit(t, dir, "show", "HEAD:new.txt"); got != "newer" {
		t.Fatalf("new.txt in the checkpoint: %q", got)
	}
	// The index followed the branch: nothing shows as staged or changed.
	if st := userGit(t, dir, "status", "--porcelain", "--", ".", ":!.autodev"); st != "" {
		t.Fatalf("git status after a checkpoint:\n%s", st)
	}
	after := snap(t, dir)
	if after.config != before.config || after.hooks != before.hooks {
		t.Fatal("the checkpoint changed the repository's config or hooks")
	}
	want := map[string][]string{"HEAD": {"autodev: baseline before run"}, "refs/heads/main": {"autodev: baseline before run"}}
	if g := gained(before, after); fmt.Sprint(g) != fmt.Sprint(want) {
		t.Fatalf("reflogs gained %v, want %v", g, want)
	}
	var list []autodev.Entry
	if err := json.Unmarshal([]byte(read(t, r.ListPath())), &list); err != nil || len(list) != 1 || list[0].Commit != head {
		t.Fatalf("checkpoints.json: %v %+v", err, list)
	}

	// Clean now: no second baseline.
	if e, made, err := r.Checkpoint(ctx, autodev.Request{Kind: autodev.KindBaseline, Label: autodev.BaselineLabel}); err != nil || made {
		t.Fatalf("a clean tree got a baseline: %+v %v", e, err)
	}
	if userGit(t, dir, "rev-parse", "HEAD") != head {
		t.Fatal("HEAD moved on a clean tree")
	}
}

func TestAutodevCleanTreeNoBaselineAndParticipantCommitted(t *testing.T) {
	ctx := context.Background()
	dir := newRepo(t)
	r := open(t, dir)
	if _, made, err := r.Checkpoint(ctx, autodev.Request{Kind: autodev.KindBaseline, Label: autodev.BaselineLabel}); err != nil || made {
		t.Fatalf("baseline on a clean tree: made %v, %v", made, err)
	}
	// The participant committed its own work: that commit is the checkpoint.
	write(t, filepath.Join(dir, "b.txt"), "b\n")
	userGit(t, dir, "add", "b.txt")
	userGit(t, dir, "commit", "-q", "-m", "participant: add b")
	head := userGit(t, dir, "rev-parse", "HEAD")
	e, made, err := r.Checkpoint(ctx, autodev.Request{Kind: autodev.KindTask, Label: "add b"})
	if err != nil || !made || e.Commit != head || e.ID != "c1" || e.Kind != autodev.KindTask {
		t.Fatalf("task on a committed tree: %+v %v %v", e, made, err)
	}
	if userGit(t, dir, "rev-parse", "HEAD") != head {
		t.Fatal("a new commit was made although the participant had committed")
	}
	l, err := r.List(ctx)
	if err != nil || l.Head != "c1" {
		t.Fatalf("list: %+v %v", l, err)
	}
}

func TestAutodevNotARepoThenGitInit(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "ws")
	write(t, filepath.Join(dir, "a.txt"), "a\n")
	r := open(t, dir)
	if err := r.Check(ctx); !errors.Is(err, autodev.ErrNotRepo) || err.Error() != "Not a git repository; checkpoints/rollback disabled (git init to enable recovery snapshots)" {
		t.Fatalf("check: %v", err)
	}
	if l, err := r.List(ctx); err != nil || l.Off != autodev.MsgNotRepo {
		t.Fatalf("list: %+v %v", l, err)
	}
	if _, err := r.Restore(ctx, "c1"); err == nil || err.Error() != "Restore failed: "+autodev.MsgNotRepo {
		t.Fatalf("restore: %v", err)
	}
	userGit(t, dir, "init", "-q")
	if err := r.Check(ctx); err != nil {
		t.Fatal(err)
	}
	// An unborn branch: the baseline is its first commit.
	e, made, err := r.Checkpoint(ctx, autodev.Request{Kind: autodev.KindBaseline, Label: autodev.BaselineLabel})
	if err != nil || !made || userGit(t, dir, "rev-parse", "main") != e.Commit {
		t.Fatalf("baseline after git init: %+v %v %v", e, made, err)
	}
	if n := userGit(t, dir, "rev-list", "--count", "HEAD"); n != "1" {
		t.Fatalf("%s commits", n)
	}
}

// TestAutodevRefusesWhileGitIsBusy: a merge, rebase, cherry-pick, revert or
// bisect in progress, a detached HEAD: nothing is committed, nothing moves.
func TestAutodevRefusesWhileGitIsBusy(t *testing.T) {
	conflict := func(t *testing.T, dir string) {
		userGit(t, dir, "switch", "-q", "-c", "other")
		write(t, filepath.Join(dir, "a.txt"), "other\n")
		userGit(t, dir, "commit", "-q", "-am", "other")
		userGit(t, dir, "switch", "-q", "main")
		write(t, filepath.Join(dir, "a.txt"), "main\n")
		userGit(t, dir, "commit", "-q", "-am", "main")
	}
	cases := []struct {
		name, want string
		setup      func(t *testing.T, dir string)
	}{
		{"merge", "a merge is in progress", func(t *testing.T, dir string) {
			conflict(t, dir)
			if _, err := userGitErr(t, dir, "merge", "other"); err == nil {
				t.Fatal("no conflict")
			}
		}},
		{"rebase", "a rebase is in progress", func(t *testing.T, dir string) {
			conflict(t, dir)
			if _, err := userGitErr(t, dir, "rebase", "--merge", "other"); err == nil {
				t.Fatal("no conflict")
			}
		}},
		{"am", "git am is in progress", func(t *testing.T, dir string) {
			conflict(t, dir)
			patch := userGit(t, dir, "format-patch", "-1", "--stdout", "other")
			p := filepath.Join(filepath.Dir(dir), "p.patch")
			write(t, p, patch+"\n")
			if _, err := userGitErr(t, dir, "am", p); err == nil {
				t.Fatal("no conflict")
			}
		}},
		{"cherry-pick", "a cherry-pick is in progress", func(t *testing.T, dir string) {
			conflict(t, dir)
			if _, err := userGitErr(t, dir, "cherry-pick", "other"); err == nil {
				t.Fatal("no conflict")
			}
		}},
		{"revert", "a revert is in progress", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "a.txt"), "two\n")
			userGit(t, dir, "commit", "-q", "-am", "two")
			write(t, filepath.Join(dir, "a.txt"), "three\n")
			userGit(t, dir, "commit", "-q", "-am", "three")
			if _, err := userGitErr(t, dir, "revert", "--no-edit", "HEAD~1"); err == nil {
				t.Fatal("no conflict")
			}
		}},
		{"bisect", "a bisect is in progress", func(t *testing.T, dir string) {
			userGit(t, dir, "bisect", "start")
		}},
		{"detached", "HEAD is detached", func(t *testing.T, dir string) {
			userGit(t, dir, "switch", "-q", "--detach", "HEAD")
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			dir := newRepo(t)
			r := open(t, dir)
			// A checkpoint to restore to, made before git got busy: the
			// restore below must be refused for the busy state, not for
			// an unknown target.
			write(t, filepath.Join(dir, "first.txt"), "first\n")
			first, made, err := r.Checkpoint(ctx, autodev.Request{Kind: autodev.KindTask, Label: "before"})
			if err != nil || !made {
				t.Fatalf("checkpoint before: %v (made %v)", err, made)
			}
			c.setup(t, dir)
			write(t, filepath.Join(dir, "dirty.txt"), "dirty\n")
			before := snap(t, dir)
			refs := userGit(t, dir, "for-each-ref")
			head := userGit(t, dir, "rev-parse", "HEAD")
			_, _, err = r.Checkpoint(ctx, autodev.Request{Kind: autodev.KindTask, Label: "x"})
			var blocked *autodev.BlockedError
			if !errors.As(err, &blocked) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("checkpoint: %v, want a refusal saying %q", err, c.want)
			}
			if _, err := r.Restore(ctx, first.ID); !errors.As(err, &blocked) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("restore to %s: %v, want a refusal saying %q", first.ID, err, c.want)
			}
			after := snap(t, dir)
			if userGit(t, dir, "rev-parse", "HEAD") != head || userGit(t, dir, "for-each-ref") != refs ||
				fmt.Sprint(after.reflogs) != fmt.Sprint(before.reflogs) || after.config != before.config {
				t.Fatal("the repository changed")
			}
		})
	}
}

// restoreFixture: c1 a baseline (a=two), c2 a task (a=three), then dirty work.
func restoreFixture(t *testing.T) (string, *autodev.Repo, []autodev.Entry) {
	t.Helper()
	ctx := context.Background()
	dir := newRepo(t)
	r := open(t, dir)
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r.Now = func() time.Time { clock = clock.Add(time.Second); return clock }
	var out []autodev.Entry
	for i, body := range []string{"two\n", "three\n"} {
		write(t, filepath.Join(dir, "a.txt"), body)
		kind, label := autodev.KindTask, "step "+body[:len(body)-1]
		if i == 0 {
			kind, label = autodev.KindBaseline, autodev.BaselineLabel
		}
		e, _, err := r.Checkpoint(ctx, autodev.Request{Kind: kind, Label: label})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return dir, r, out
}

func TestAutodevRestoreDirtyParksAndUndoes(t *testing.T) {
	ctx := context.Background()
	dir, r, es := restoreFixture(t)
	write(t, filepath.Join(dir, "a.txt"), "work in progress\n")
	write(t, filepath.Join(dir, "wip.txt"), "wip\n")
	tip := userGit(t, dir, "rev-parse", "HEAD")
	res, err := r.Restore(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	wantBranch := "autodev/pre-restore-2026-01-02T03-04-08-000Z"
	if res.SavedOn != wantBranch {
		t.Fatalf("saved on %q", res.SavedOn)
	}
	if got, want := res.Message(), fmt.Sprintf("Restored to %q (%s); saved on %s.", autodev.BaselineLabel, es[0].Commit[:7], wantBranch); got != want {
		t.Fatalf("message %q, want %q", got, want)
	}
	if read(t, filepath.Join(dir, "a.txt")) != "two\n" || userGit(t, dir, "rev-parse", "HEAD") != es[0].Commit {
		t.Fatal("not rewound to c1")
	}
	if _, err := os.Stat(filepath.Join(dir, "wip.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("wip.txt (parked, not in c1) is still there: %v", err)
	}
	parked := userGit(t, dir, "rev-parse", wantBranch)
	if userGit(t, dir, "rev-parse", wantBranch+"^") != tip || userGit(t, dir, "show", wantBranch+":wip.txt") != "wip" {
		t.Fatal("the parked branch does not hold the work on top of the old tip")
	}
	if res.PreRestore.Kind != autodev.KindPreRestore || res.PreRestore.Commit != parked || res.PreRestore.ID != "c3" {
		t.Fatalf("pre-restore entry %+v", res.PreRestore)
	}
	l, _ := r.List(ctx)
	if l.Head != "c1" || l.Entries[0].ID != "c3" {
		t.Fatalf("list after restore: head %s, newest %s", l.Head, l.Entries[0].ID)
	}
	// Undo: restore the pre-restore entry; the tree is clean now.
	res, err = r.Restore(ctx, "c3")
	if err != nil {
		t.Fatal(err)
	}
	if res.SavedOn != "" || res.Message() != fmt.Sprintf("Restored to %q (%s).", res.Target.Label, parked[:7]) {
		t.Fatalf("undo: %q", res.Message())
	}
	if read(t, filepath.Join(dir, "a.txt")) != "work in progress\n" || read(t, filepath.Join(dir, "wip.txt")) != "wip\n" {
		t.Fatal("undo did not bring the work back")
	}
}

func TestAutodevRestoreCleanUnknownAndLive(t *testing.T) {
	ctx := context.Background()
	dir, r, es := restoreFixture(t)
	branches := userGit(t, dir, "branch", "--list")
	res, err := r.Restore(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	if res.SavedOn != "" || res.Message() != fmt.Sprintf("Restored to %q (%s).", autodev.BaselineLabel, es[0].Commit[:7]) {
		t.Fatalf("clean restore: %q", res.Message())
	}
	if userGit(t, dir, "branch", "--list") != branches {
		t.Fatal("a clean restore made a branch")
	}
	if res.PreRestore.Commit != es[1].Commit {
		t.Fatalf("the pre-restore entry of a clean tree is %s, want the old HEAD %s", res.PreRestore.Commit, es[1].Commit)
	}
	// By the short commit the list shows.
	if res, err := r.Restore(ctx, es[1].Commit[:7]); err != nil || res.Target.ID != "c2" {
		t.Fatalf("restore by commit: %+v %v", res, err)
	}

	head := userGit(t, dir, "rev-parse", "HEAD")
	if _, err := r.Restore(ctx, "c99"); err == nil || err.Error() != "Restore failed: unknown checkpoint: c99" {
		t.Fatalf("unknown: %v", err)
	}
	// A live run: the runtime's lock names a live pid with a fresh heartbeat.
	lock := fmt.Sprintf(`{"pid":%d,"lockId":"x","runId":"r","startTime":%q,"lastHeartbeat":%q,"port":1}`,
		os.Getpid(), time.Now().UTC().Format(time.RFC3339Nano), time.Now().UTC().Format(time.RFC3339Nano))
	write(t, filepath.Join(dir, ".hankweave", "runtime.lock"), lock)
	if _, err := r.Restore(ctx, "c1"); err == nil || err.Error() != "Stop the run before restoring — restore resets the project tree." {
		t.Fatalf("live run: %v", err)
	}
	if userGit(t, dir, "rev-parse", "HEAD") != head {
		t.Fatal("HEAD moved")
	}
}

// TestAutodevParkingFailsNothingRewound: a branch named autodev blocks
// autodev/pre-restore-*: the restore stops before anything changes.
func TestAutodevParkingFailsNothingRewound(t *testing.T) {
	ctx := context.Background()
	dir, r, _ := restoreFixture(t)
	userGit(t, dir, "branch", "autodev")
	write(t, filepath.Join(dir, "a.txt"), "precious\n")
	userGit(t, dir, "add", "a.txt")
	write(t, filepath.Join(dir, "b.txt"), "untracked\n")
	head := userGit(t, dir, "rev-parse", "HEAD")
	status := userGit(t, dir, "status", "--porcelain")
	index := read(t, filepath.Join(dir, ".git", "index"))
	list := read(t, r.ListPath())
	_, err := r.Restore(ctx, "c1")
	if err == nil || !strings.HasPrefix(err.Error(), "Restore failed: cannot park the work on autodev/pre-restore-") ||
		!strings.HasSuffix(err.Error(), "nothing was rewound") {
		t.Fatalf("restore: %v", err)
	}
	if userGit(t, dir, "rev-parse", "HEAD") != head || userGit(t, dir, "status", "--porcelain") != status ||
		read(t, filepath.Join(dir, ".git", "index")) != index || read(t, filepath.Join(dir, "a.txt")) != "precious\n" ||
		read(t, r.ListPath()) != list {
		t.Fatal("a failed parking changed something")
	}
}

func TestAutodevLostListRebuilt(t *testing.T) {
	ctx := context.Background()
	dir, r, _ := restoreFixture(t)
	write(t, filepath.Join(dir, "a.txt"), "wip\n")
	if _, err := r.Restore(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	want, err := r.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(r.ListPath()); err != nil {
		t.Fatal(err)
	}
	got, err := open(t, dir).List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	strip := func(l autodev.Listing) string {
		var b bytes.Buffer
		for _, e := range l.Entries {
			fmt.Fprintf(&b, "%s %s %s %s %s %s|", e.ID, e.Kind, e.Commit, e.Label, e.Time.Format(time.RFC3339), e.Branch)
		}
		return b.String() + " head " + l.Head
	}
	if strip(got) != strip(want) {
		t.Fatalf("rebuilt list:\n%s\nwant:\n%s", strip(got), strip(want))
	}
	if _, err := os.Stat(r.ListPath()); err != nil {
		t.Fatalf("the rebuilt list was not written: %v", err)
	}
}

// TestAutodevHooksNeverRun: hooks that would fail or leave a trace never
// run, for a checkpoint or a restore; the config and hooks stay as they were.
func TestAutodevHooksNeverRun(t *testing.T) {
	ctx := context.Background()
	dir := newRepo(t)
	trace := filepath.Join(filepath.Dir(dir), "hook-ran")
	for _, h := range []string{"pre-commit", "commit-msg", "post-commit", "reference-transaction", "post-index-change", "post-checkout", "pre-auto-gc"} {
		write(t, filepath.Join(dir, ".git", "hooks", h), "#!/bin/sh\necho "+h+" >> "+trace+"\nexit 1\n")
		if err := os.Chmod(filepath.Join(dir, ".git", "hooks", h), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The user's own commit does run them (the hooks work).
	if _, err := userGitErr(t, dir, "commit", "--allow-empty", "-q", "-m", "x"); err == nil {
		t.Fatal("the user's commit passed a failing pre-commit hook")
	}
	if err := os.Remove(trace); err != nil {
		t.Fatal(err)
	}
	before := snap(t, dir)
	r := open(t, dir)
	write(t, filepath.Join(dir, "a.txt"), "changed\n")
	e, _, err := r.Checkpoint(ctx, autodev.Request{Kind: autodev.KindTask, Label: "with hooks"})
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "a.txt"), "again\n")
	if _, err := r.Restore(ctx, e.ID); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(trace); err == nil {
		t.Fatalf("hooks ran: %s", b)
	}
	after := snap(t, dir)
	if after.config != before.config || after.hooks != before.hooks {
		t.Fatal("config or hooks changed")
	}
}

// TestAutodevListAsAnAttackerLeavesIt: checkpoints.json replaced by a FIFO
// (which a plain read waits on for ever) or by a link to another file: the
// list is rebuilt from git, the odd file is moved aside, and the link's
// target is neither read nor written.
func TestAutodevListAsAnAttackerLeavesIt(t *testing.T) {
	ctx := context.Background()
	for _, kind := range []string{"fifo", "symlink"} {
		t.Run(kind, func(t *testing.T) {
			dir, r, _ := restoreFixture(t)
			want, err := r.List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(r.ListPath()); err != nil {
				t.Fatal(err)
			}
			secret := filepath.Join(t.TempDir(), "secret.json")
			write(t, secret, "[]")
			switch kind {
			case "fifo":
				if err := syscall.Mkfifo(r.ListPath(), 0o644); err != nil {
					t.Fatal(err)
				}
			case "symlink":
				if err := os.Symlink(secret, r.ListPath()); err != nil {
					t.Fatal(err)
				}
			}
			done := make(chan struct{})
			var got autodev.Listing
			go func() {
				got, err = open(t, dir).List(ctx)
				close(done)
			}()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("reading the list waited on the file")
			}
			if err != nil || len(got.Entries) != len(want.Entries) {
				t.Fatalf("list %+v, %v; want %d entries rebuilt", got.Entries, err, len(want.Entries))
			}
			if fi, err := os.Lstat(r.ListPath()); err != nil || !fi.Mode().IsRegular() {
				t.Errorf("the rebuilt list is not a plain file: %v %v", fi, err)
			}
			if read(t, secret) != "[]" {
				t.Error("the link's target was written")
			}
		})
	}
}

// TestAutodevRefusesAnotherUsersGitDir: git runs a repository's own config
// (here a clean filter) for whoever runs it, and GIT_DIR skips its
// safe.directory check. A .git that belongs to another user, or is a link,
// is refused before any git runs; the filter never runs.
func TestAutodevRefusesAnotherUsersGitDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to give .git to another user")
	}
	ctx := context.Background()
	dir := newRepo(t)
	ran := filepath.Join(t.TempDir(), "filter-ran")
	userGit(t, dir, "config", "filter.x.clean", "touch "+ran+"; cat")
	write(t, filepath.Join(dir, ".git", "info", "attributes"), "* filter=x\n")
	if err := filepath.WalkDir(filepath.Join(dir, ".git"), func(p string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, 65534, 65534)
	}); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "b.txt"), "new\n")
	r := open(t, dir)
	var blocked *autodev.BlockedError
	if _, _, err := r.Checkpoint(ctx, autodev.Request{Kind: autodev.KindTask, Label: "x"}); !errors.As(err, &blocked) || !strings.Contains(err.Error(), "belongs to uid 65534") {
		t.Fatalf("checkpoint in a repository another user owns: %v", err)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Fatal("the repository's filter ran")
	}

	// A .git that is a link to that repository's folder: refused too.
	other := filepath.Join(t.TempDir(), "ws")
	write(t, filepath.Join(other, "a.txt"), "one\n")
	if err := os.Symlink(filepath.Join(dir, ".git"), filepath.Join(other, ".git")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := open(t, other).Checkpoint(ctx, autodev.Request{Kind: autodev.KindTask, Label: "x"}); !errors.As(err, &blocked) {
		t.Fatalf("checkpoint through a linked .git: %v", err)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Fatal("the repository's filter ran")
	}
}

// TestAutodevEmptyListIsSaved: a repository with no checkpoint yet gets an
// empty checkpoints.json at the first list, so later lists (the daemon's, at
// every poll) do not walk the whole history again.
func TestAutodevEmptyListIsSaved(t *testing.T) {
	dir := newRepo(t)
	r := open(t, dir)
	if l, err := r.List(context.Background()); err != nil || len(l.Entries) != 0 {
		t.Fatalf("list: %v, %v", l.Entries, err)
	}
	if got := strings.TrimSpace(read(t, r.ListPath())); got != "[]" {
		t.Fatalf("checkpoints.json after the first list: %q, want []", got)
	}
}

// TestAutodevListWithAnOptionForACommit: a checkpoints.json whose commit is
// not an object name (here one git would read as an option) is moved aside
// and the list rebuilt from git, as one that does not parse.
func TestAutodevListWithAnOptionForACommit(t *testing.T) {
	ctx := context.Background()
	_, r, _ := restoreFixture(t)
	want, err := r.List(ctx)
	if err != nil || len(want.Entries) == 0 {
		t.Fatalf("list: %v, %v", want.Entries, err)
	}
	write(t, r.ListPath(), `[{"id":"c1","commit":"--output=/tmp/cairn-pwned","kind":"task","label":"x","time":"2026-01-01T00:00:00Z"}]`)
	got, err := r.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range got.Entries {
		if strings.HasPrefix(e.Commit, "-") || len(e.Commit) != 40 {
			t.Fatalf("entry %s kept commit %q", e.ID, e.Commit)
		}
	}
	if len(got.Entries) != len(want.Entries) {
		t.Fatalf("rebuilt %d entries, want %d", len(got.Entries), len(want.Entries))
	}
	aside, _ := filepath.Glob(r.ListPath() + ".bad-*")
	if len(aside) != 1 {
		t.Fatalf("the bad list was not moved aside: %v", aside)
	}
}

// TestAutodevRefusesLinkedGitDir: a .git that is a link to a repository the
// user owns (so only the link can be the reason) is refused before any git
// runs, by a checkpoint, a list and a restore alike.
func TestAutodevRefusesLinkedGitDir(t *testing.T) {
	ctx := context.Background()
	real := newRepo(t)
	ws := filepath.Join(t.TempDir(), "ws")
	write(t, filepath.Join(ws, "a.txt"), "one\n")
	if err := os.Symlink(filepath.Join(real, ".git"), filepath.Join(ws, ".git")); err != nil {
		t.Fatal(err)
	}
	r := open(t, ws)
	var blocked *autodev.BlockedError
	if _, _, err := r.Checkpoint(ctx, autodev.Request{Kind: autodev.KindTask, Label: "x"}); !errors.As(err, &blocked) || !strings.Contains(err.Error(), "not a folder") {
		t.Fatalf("checkpoint through a linked .git: %v", err)
	}
	// With a saved list, listing ran git (rev-parse HEAD) without a look at .git.
	write(t, r.ListPath(), "[]\n")
	if l, err := r.List(ctx); !errors.As(err, &blocked) {
		t.Fatalf("list through a linked .git: %+v, %v", l, err)
	}
	if _, err := r.Restore(ctx, "c1"); !errors.As(err, &blocked) {
		t.Fatalf("restore through a linked .git: %v", err)
	}
}
