package cli_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/snapshot"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

var cairnBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "cairn-cli-test")
	if err != nil {
		panic(err)
	}
	cairnBin = filepath.Join(dir, "cairn")
	out, err := exec.Command("go", "build", "-o", cairnBin, "github.com/cairn-dev/cairn/cmd/cairn").CombinedOutput()
	if err != nil {
		panic(string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// cairn runs the real binary and returns stdout, stderr and the exit code.
func cairn(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(cairnBin, args...)
	cmd.Env = append(os.Environ(), env...)
	var so, se strings.Builder
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return so.String(), se.String(), code
}

type record struct {
	ID, SHA, Kind, Label, State, CodonID, RunID, Ref string
	Added, Changed, Removed                          int
}

func TestCheckpointAndList(t *testing.T) {
	ws, state := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("a\n"), 0o644)
	env := []string{"CAIRN_STATE_DIR=" + state}
	out, errOut, code := cairn(t, env, "checkpoint", ws, "--label", "first", "--json")
	if code != 0 {
		t.Fatalf("checkpoint: exit %d: %s", code, errOut)
	}
	var rec record
	if err := json.Unmarshal([]byte(out), &rec); err != nil || rec.ID != "c1" || rec.Kind != "manual" || rec.Label != "first" || rec.Added != 1 || rec.State != "ok" {
		t.Fatalf("record %+v (%v) from %s", rec, err, out)
	}
	os.WriteFile(filepath.Join(ws, "b.txt"), []byte("b\n"), 0o644)
	if _, errOut, code := cairn(t, env, "checkpoint", ws, "--status", "completed", "--codon", "write", "--run", "1-abcde"); code != 0 {
		t.Fatalf("lifecycle checkpoint: exit %d: %s", code, errOut)
	}
	out, _, code = cairn(t, env, "list", ws)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[0], "✔ c2") || !strings.Contains(lines[0], "write/1-abcde") ||
		!strings.HasPrefix(lines[1], "+ c1") || !strings.Contains(lines[1], "first") || !strings.Contains(lines[1], rec.SHA[:7]) {
		t.Fatalf("list (exit %d):\n%s", code, out)
	}
	out, _, _ = cairn(t, env, "list", ws, "--json")
	var recs []record
	if err := json.Unmarshal([]byte(out), &recs); err != nil || len(recs) != 2 || recs[0].ID != "c2" || recs[0].Ref != "refs/heads/run-1-abcde" {
		t.Fatalf("list --json: %v %+v", err, recs)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"nope"},
		{"demo"}, // go run ./cmd/cairn-demo: the simulator is not in the shipped binary
		{"checkpoint"},
		{"checkpoint", t.TempDir(), "--status", "bogus", "--codon", "a", "--run", "r"},
		{"checkpoint", t.TempDir(), "--status", "completed"},
	} {
		if _, errOut, code := cairn(t, nil, args...); code != 2 || errOut == "" {
			t.Errorf("cairn %v: exit %d, stderr %q; want exit 2 and a message", args, code, errOut)
		}
	}
}

func TestNoGit(t *testing.T) {
	ws := t.TempDir()
	// No git on PATH at all.
	_, errOut, code := cairn(t, []string{"PATH=" + t.TempDir(), "CAIRN_STATE_DIR=" + t.TempDir()}, "checkpoint", ws)
	if code != 3 || !strings.Contains(errOut, "git not found; checkpoints disabled") {
		t.Errorf("without git: exit %d, %q", code, errOut)
	}
	// A git older than 2.28 is refused by name.
	bin := t.TempDir()
	os.WriteFile(filepath.Join(bin, "git"), []byte("#!/bin/sh\necho 'git version 2.20.1'\n"), 0o755)
	_, errOut, code = cairn(t, []string{"PATH=" + bin, "CAIRN_STATE_DIR=" + t.TempDir()}, "checkpoint", ws)
	if code != 3 || !strings.Contains(errOut, "2.20.1") || !strings.Contains(errOut, "2.28") {
		t.Errorf("with git 2.20: exit %d, %q", code, errOut)
	}
}

// cliEnv is an environment with a private state directory and a socket no
// daemon listens on: the commands work on the store directly.
func cliEnv(t *testing.T) []string {
	return []string{"CAIRN_STATE_DIR=" + t.TempDir(), "CAIRN_SOCKET=" + filepath.Join(t.TempDir(), "none.sock")}
}

// mustCairn runs cairn and fails the test unless it exits 0.
func mustCairn(t *testing.T, env []string, args ...string) string {
	t.Helper()
	out, errOut, code := cairn(t, env, args...)
	if code != 0 {
		t.Fatalf("cairn %v: exit %d\n%s%s", args, code, out, errOut)
	}
	return out
}

// files reads every regular file under root (relative slash path → content).
func files(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p)
		out[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameFiles(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: files %v, want %v", what, got, want)
		return
	}
	for p, c := range want {
		if got[p] != c {
			t.Errorf("%s: files %v, want %v", what, got, want)
			return
		}
	}
}

func lay(t *testing.T, root string, fs map[string]string) {
	t.Helper()
	for _, e := range []string{"x", "keep.txt", "a.txt", "b.txt"} {
		os.RemoveAll(filepath.Join(root, e))
	}
	for p, c := range fs {
		os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755)
		if err := os.WriteFile(filepath.Join(root, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRestoringCommandsShareFlags: restore, rollback and undo take the same
// flags, and --dry-run plans without changing anything for each of them.
func TestRestoringCommandsShareFlags(t *testing.T) {
	for _, cmd := range []string{"restore", "rollback", "undo"} {
		help, _, code := cairn(t, nil, cmd, "-h")
		if code != 0 {
			t.Errorf("cairn %s -h: exit %d", cmd, code)
		}
		for _, f := range []string{"--dry-run", "--path", "--json", "--socket", "--state-dir", "--layout", "--max-file-size"} {
			if !strings.Contains(help, "  "+f) {
				t.Errorf("cairn %s has no %s flag:\n%s", cmd, f, help)
			}
		}
	}
	ws, env := t.TempDir(), cliEnv(t)
	lay(t, ws, map[string]string{"a.txt": "one\n"})
	var c1 record
	json.Unmarshal([]byte(mustCairn(t, env, "checkpoint", ws, "--json")), &c1)
	lay(t, ws, map[string]string{"a.txt": "two\n", "b.txt": "b\n"})
	mustCairn(t, env, "checkpoint", ws, "--status", "completed", "--codon", "w", "--run", "1-abcde")
	now := files(t, ws)
	count := func() int {
		var recs []record
		json.Unmarshal([]byte(mustCairn(t, env, "list", ws, "--json")), &recs)
		return len(recs)
	}
	n := count()
	for _, args := range [][]string{
		{"rollback", ws, "--sha", c1.SHA[:8], "--dry-run"},
		{"rollback", ws, "--codon", "w", "--dry-run", "--path", "b.txt"},
		{"restore", ws, c1.ID, "--dry-run"},
	} {
		out := mustCairn(t, env, args...)
		if !strings.Contains(out, "dry run: nothing changed") {
			t.Errorf("cairn %v:\n%s", args, out)
		}
		sameFiles(t, strings.Join(args, " "), files(t, ws), now)
	}
	out := mustCairn(t, env, "rollback", ws, "--sha", c1.SHA[:8], "--dry-run", "--json")
	var plan struct {
		DryRun bool
		Write  []struct{ Path string }
		Delete []struct{ Path string }
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil || !plan.DryRun || len(plan.Write) != 1 || len(plan.Delete) != 1 {
		t.Fatalf("rollback --dry-run --json: %v\n%s", err, out)
	}
	if count() != n {
		t.Fatal("a dry run sealed a checkpoint")
	}
	mustCairn(t, env, "rollback", ws, "--sha", c1.SHA[:8], "--path", "a.txt")
	sameFiles(t, "rollback --path", files(t, ws), map[string]string{"a.txt": "one\n", "b.txt": "b\n"})
	out = mustCairn(t, env, "undo", ws, "--dry-run")
	if !strings.Contains(out, "write") || !strings.Contains(out, "a.txt") || !strings.Contains(out, "dry run: nothing changed") {
		t.Errorf("undo --dry-run:\n%s", out)
	}
	sameFiles(t, "undo --dry-run", files(t, ws), map[string]string{"a.txt": "one\n", "b.txt": "b\n"})
	mustCairn(t, env, "undo", ws)
	sameFiles(t, "undo", files(t, ws), now)
}

// TestRestoreFileFolderSwapExitsZero: restore and undo across a path that is
// a file at one checkpoint and a folder at the other leave the tree at the
// target and exit 0, both ways.
func TestRestoreFileFolderSwapExitsZero(t *testing.T) {
	file := map[string]string{"x": "a file\n", "keep.txt": "k\n"}
	folder := map[string]string{"x/a.txt": "a\n", "x/sub/b.txt": "b\n", "keep.txt": "k\n"}
	for name, tc := range map[string][2]map[string]string{"file to folder": {file, folder}, "folder to file": {folder, file}} {
		t.Run(name, func(t *testing.T) {
			ws, env := t.TempDir(), cliEnv(t)
			from, to := tc[0], tc[1]
			lay(t, ws, to)
			var target record
			json.Unmarshal([]byte(mustCairn(t, env, "checkpoint", ws, "--json")), &target)
			lay(t, ws, from)
			mustCairn(t, env, "checkpoint", ws)
			mustCairn(t, env, "restore", ws, target.ID)
			sameFiles(t, "restore", files(t, ws), to)
			mustCairn(t, env, "undo", ws)
			sameFiles(t, "undo", files(t, ws), from)
		})
	}
}

// runtimeExec is a Hankweave execution directory whose store cairn created
// (main holds "Initial checkpoint setup"), with one codon commit the
// runtime made itself on run-<runID>: its SHA is in state.json only, not in
// cairn's ledger.
type runtimeExec struct {
	exec, agentRoot, gitDir string
	root, rig               string // main's first commit; the runtime's rig-setup commit
	rigFiles                map[string]string
}

const runtimeRun = "1753110463686-yayna"

func newRuntimeExec(t *testing.T, env []string) *runtimeExec {
	t.Helper()
	x := &runtimeExec{exec: filepath.Join(t.TempDir(), "exec")}
	x.agentRoot = filepath.Join(x.exec, "agentRoot")
	x.gitDir = filepath.Join(x.exec, ".hankweave", "checkpoints", ".hankweavecheckpoints")
	os.MkdirAll(x.agentRoot, 0o755)
	os.MkdirAll(filepath.Join(x.exec, ".hankweave"), 0o755)
	x.rigFiles = map[string]string{"a.txt": "rig\n", "x/b.txt": "rig b\n"}
	lay(t, x.agentRoot, x.rigFiles)
	mustCairn(t, env, "checkpoint", x.exec, "--label", "first")
	index := filepath.Join(t.TempDir(), "index") // the runtime's own, not cairn's
	git := func(stdin string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		home := filepath.Dir(x.gitDir)
		cmd.Env = []string{"GIT_DIR=" + x.gitDir, "GIT_WORK_TREE=" + x.agentRoot, "GIT_INDEX_FILE=" + index,
			"HOME=" + home, "XDG_CONFIG_HOME=" + home, "GIT_CONFIG_NOSYSTEM=1", "PATH=" + os.Getenv("PATH")}
		cmd.Dir, cmd.Stdin = x.agentRoot, strings.NewReader(stdin)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		return strings.TrimSpace(string(out))
	}
	x.root = git("", "rev-parse", "refs/heads/main")
	git("", "add", "-A", "-f", "--", ".")
	tree := git("", "write-tree")
	x.rig = git("rig-setup:write [run:"+runtimeRun+"] Write\n\nCodon: Write\nStatus: rig-setup\nTimestamp: 2026-01-02T03:04:05.678Z\n",
		"commit-tree", tree, "-p", x.root, "-F", "-")
	git("", "update-ref", "refs/heads/run-"+runtimeRun, x.rig)
	state := `{"runs":[{"runId":"` + runtimeRun + `","runFolder":"","gitBranch":"run-` + runtimeRun + `",
  "startingConditions":{"type":"fresh"},"status":"failed","startTime":"2026-01-02T03:04:00.000Z","endTime":"2026-01-02T03:05:00.000Z","serverPid":1,
  "codons":[{"codonId":"write","startTime":"2026-01-02T03:04:01.000Z","status":"failed","endTime":"2026-01-02T03:04:59.000Z",
    "rigSetupCheckpoint":"` + x.rig + `"}]}],
 "currentRunId":null,
 "executionPlan":[{"codonId":"write","codon":{"id":"write","name":"Write","checkpointedFiles":["**"]}}]}`
	if err := os.WriteFile(filepath.Join(x.exec, ".hankweave", "state.json"), []byte(state), 0o644); err != nil {
		t.Fatal(err)
	}
	lay(t, x.agentRoot, map[string]string{"a.txt": "later\n", "b.txt": "new\n"})
	mustCairn(t, env, "checkpoint", x.exec, "--label", "later")
	return x
}

// TestRollbackToRuntimeSHA: a SHA the runtime recorded in state.json, and
// main's first commit, are targets though cairn's ledger lacks them: the
// rollback seals a pre-restore checkpoint, verifies, and is undoable; list
// and show name them.
func TestRollbackToRuntimeSHA(t *testing.T) {
	env := cliEnv(t)
	x := newRuntimeExec(t, env)
	later := files(t, x.agentRoot)

	out, errOut, code := cairn(t, env, "rollback", x.exec, "--sha", x.rig[:8])
	if code != 0 {
		t.Fatalf("rollback --sha %s: exit %d\n%s%s", x.rig[:8], code, out, errOut)
	}
	sameFiles(t, "rollback to the runtime's rig-setup", files(t, x.agentRoot), x.rigFiles)
	var recs []record
	json.Unmarshal([]byte(mustCairn(t, env, "list", x.exec, "--json")), &recs)
	if len(recs) == 0 || recs[0].Kind != "pre-restore" {
		t.Fatalf("no pre-restore checkpoint: %+v", recs)
	}
	for _, r := range recs {
		if r.SHA == x.rig {
			t.Fatalf("the rollback put the runtime's commit in the ledger: %+v", r)
		}
	}
	if show := mustCairn(t, env, "show", x.exec, x.rig[:8]); !strings.Contains(show, x.rig) || !strings.Contains(show, "rig-setup") ||
		!strings.Contains(show, "write (Write), run "+runtimeRun) {
		t.Errorf("show %s:\n%s", x.rig[:8], show)
	}
	mustCairn(t, env, "undo", x.exec)
	sameFiles(t, "undo", files(t, x.agentRoot), later)

	// main's "Initial checkpoint setup" (empty): every file cairn tracked goes.
	mustCairn(t, env, "rollback", x.exec, "--sha", x.root[:7])
	sameFiles(t, "rollback to main", files(t, x.agentRoot), map[string]string{})
	mustCairn(t, env, "undo", x.exec)
	sameFiles(t, "undo", files(t, x.agentRoot), later)
}

// TestListShowsAdopted: a runtime checkpoint the daemon adopted into the
// ledger is listed like any other, and --json says it was adopted.
func TestListShowsAdopted(t *testing.T) {
	env := cliEnv(t)
	x := newRuntimeExec(t, env)
	st, err := snapshot.Open(context.Background(), x.exec, snapshot.Options{Layout: snapshot.LayoutHankweave})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := st.Adopt(context.Background(), snapshot.AdoptRequest{SHA: x.rig, Kind: ckpt.KindRigSetup,
		CodonID: "write", CodonName: "Write", RunID: runtimeRun})
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	out := mustCairn(t, env, "list", x.exec)
	want := "◆ " + rec.ID + " "
	if !strings.Contains(out, want) || !strings.Contains(out, "write/"+runtimeRun+" · "+x.rig[:7]+" · rig-setup") {
		t.Fatalf("list lacks the adopted %s:\n%s", rec.ID, out)
	}
	var recs []struct {
		ID      string
		Adopted bool
	}
	json.Unmarshal([]byte(mustCairn(t, env, "list", x.exec, "--json")), &recs)
	if len(recs) == 0 || recs[0].ID != rec.ID || !recs[0].Adopted {
		t.Fatalf("list --json: %+v", recs)
	}
}
