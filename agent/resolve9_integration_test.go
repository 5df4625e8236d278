//go:build linux

package agent_test

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/agent/api"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// runtimeGit runs plain git on an execution directory's store as the
// runtime does: its own index, the store's .gitconfig as global config.
func runtimeGit(t *testing.T, execDir, index, stdin string, args ...string) string {
	t.Helper()
	home := filepath.Join(execDir, ".hankweave", "checkpoints")
	cmd := exec.Command("git", args...)
	cmd.Dir = filepath.Join(execDir, "agentRoot")
	cmd.Env = []string{"GIT_DIR=" + hwStore(execDir), "GIT_WORK_TREE=" + cmd.Dir, "GIT_INDEX_FILE=" + index,
		"HOME=" + home, "XDG_CONFIG_HOME=" + home, "GIT_CONFIG_NOSYSTEM=1", "PATH=" + os.Getenv("PATH"), "LC_ALL=C"}
	cmd.Stdin = strings.NewReader(stdin)
	var errb strings.Builder
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %v: %v: %s", args, err, errb.String())
	}
	return strings.TrimSpace(string(out))
}

// runtimeCommit commits the work tree as it is on run-<runID> the way the
// runtime does, and returns the commit.
func runtimeCommit(t *testing.T, execDir, index, runID, subject string) string {
	t.Helper()
	branch := "refs/heads/run-" + runID
	parent, old := mainTip(t, hwStore(execDir)), strings.Repeat("0", 40)
	if tip, ok := tipOf(t, execDir, branch); ok {
		parent, old = tip, tip
	}
	runtimeGit(t, execDir, index, "", "add", "-A", "-f", "--", ".")
	tree := runtimeGit(t, execDir, index, "", "write-tree")
	sha := runtimeGit(t, execDir, index, subject+"\n\nTimestamp: 2020-01-02T03:04:05.678Z\n", "commit-tree", tree, "-p", parent, "-F", "-")
	runtimeGit(t, execDir, index, "", "update-ref", branch, sha, old)
	return sha
}

func tipOf(t *testing.T, execDir, ref string) (string, bool) {
	cmd := exec.Command("git", "rev-parse", "--verify", "--quiet", ref)
	cmd.Env = []string{"GIT_DIR=" + hwStore(execDir), "PATH=" + os.Getenv("PATH")}
	out, err := cmd.Output()
	return strings.TrimSpace(string(out)), err == nil
}

// collidingCommit writes a commit whose SHA begins with the same 4 hex
// digits as want (and is not want), on its own run branch.
func collidingCommit(t *testing.T, execDir, index, tree, parent, want string) string {
	t.Helper()
	for n := 0; n < 1<<24; n++ {
		body := fmt.Sprintf("tree %s\nparent %s\nauthor Hankweave Runtime <froggie@southbridge.ai> 1577934245 +0000\n"+
			"committer Hankweave Runtime <froggie@southbridge.ai> 1577934245 +0000\n\nexit:other [run:1577934245000-zzzzz] Other\n\nnonce %d\n",
			tree, parent, n)
		h := sha1.Sum([]byte(fmt.Sprintf("commit %d\x00%s", len(body), body)))
		sha := hex.EncodeToString(h[:])
		if sha[:4] != want[:4] || sha == want {
			continue
		}
		got := runtimeGit(t, execDir, index, body, "hash-object", "-w", "-t", "commit", "--stdin")
		if got != sha {
			t.Fatalf("hash-object wrote %s, want %s", got, sha)
		}
		runtimeGit(t, execDir, index, "", "update-ref", "refs/heads/run-1577934245000-zzzzz", sha)
		return sha
	}
	t.Fatal("no colliding commit found")
	return ""
}

// TestRollbackToCommitsOutsideLedger: through the daemon, rollback.toCheckpoint
// reaches every commit the runtime can: a SHA state.json records (here a
// rig-setup from before cairn watched), a runtime commit no state records
// (an exit), and main's "Initial checkpoint setup", each by a prefix. Each
// restore seals a pre-restore checkpoint, verifies, and is undone. A prefix
// that several commits share is refused, listing them. Dry runs, over the
// socket and through the cairn command, change nothing.
func TestRollbackToCommitsOutsideLedger(t *testing.T) {
	execDir := filepath.Join(t.TempDir(), "exec")
	root := filepath.Join(execDir, "agentRoot")
	write(t, filepath.Join(root, "a.txt"), "first\n")
	if err := os.MkdirAll(filepath.Join(execDir, ".hankweave"), 0o755); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	d := startDaemon(t, state, "--config", configFile(t, noAutosave), "--watch", execDir)
	sock := d.socket
	waitFor(t, 20*time.Second, "the daemon creates the store", func() bool {
		_, err := os.Stat(filepath.Join(hwStore(execDir), "refs", "heads", "main"))
		return err == nil
	})
	waitBaseline(t, execDir, state)
	gitDir := hwStore(execDir)
	mainSHA := mainTip(t, gitDir)

	// The runtime's own commits, from a run that predates cairn.
	const run = "1577934245000-abcde"
	index := filepath.Join(t.TempDir(), "index")
	write(t, filepath.Join(root, "a.txt"), "rig\n")
	write(t, filepath.Join(root, "x", "b.txt"), "rig b\n")
	rig := runtimeCommit(t, execDir, index, run, "rig-setup:write [run:"+run+"] Write")
	rigTree := hashTree(t, root)
	write(t, filepath.Join(root, "a.txt"), "at exit\n")
	exitSHA := runtimeCommit(t, execDir, index, run, "exit:write [run:"+run+"] Write")
	exitTree := hashTree(t, root)
	write(t, filepath.Join(execDir, ".hankweave", "state.json"), `{"runs":[{"runId":"`+run+`","runFolder":"","gitBranch":"run-`+run+`",
  "startingConditions":{"type":"fresh"},"status":"failed","startTime":"2020-01-02T03:04:00.000Z","endTime":"2020-01-02T03:05:00.000Z","serverPid":1,
  "codons":[{"codonId":"write","startTime":"2020-01-02T03:04:01.000Z","status":"failed","endTime":"2020-01-02T03:04:59.000Z",
    "rigSetupCheckpoint":"`+rig+`"}]}],
 "currentRunId":null,
 "executionPlan":[{"codonId":"write","codon":{"id":"write","name":"Write","checkpointedFiles":["**"]}}]}`)
	os.RemoveAll(filepath.Join(root, "x"))
	write(t, filepath.Join(root, "a.txt"), "now\n")
	write(t, filepath.Join(root, "b.txt"), "now b\n")
	now := hashTree(t, root)
	if out, err := runCairn(t, "checkpoint", execDir, "--socket", sock); err != nil { // cairn tracks b.txt
		t.Fatalf("checkpoint: %v\n%s", err, out)
	}
	// Pre-restore checkpoints: what a restore that is not dry seals (the daemon
	// may adopt the runtime's rig-setup meanwhile; that is no restore).
	preRestores := func() int {
		n := 0
		for _, r := range ledger(t, execDir, state) {
			if r.Kind == ckpt.KindPreRestore {
				n++
			}
		}
		return n
	}

	// Dry runs through the daemon: a plan, nothing sealed or written.
	n := preRestores()
	code, out := command(t, sock, execDir, api.CmdRollbackToCheckpoint, map[string]any{"checkpointSha": rig[:8], "dryRun": true})
	if data, _ := out["data"].(map[string]any); code != 200 || data["dryRun"] != true || data["preRestore"] != nil {
		t.Fatalf("dry rollback over the socket: %d %v", code, out)
	}
	cli, err := runCairn(t, "rollback", execDir, "--sha", rig[:8], "--dry-run", "--socket", sock)
	if err != nil || !strings.Contains(cli, "dry run: nothing changed") || !strings.Contains(cli, "x/b.txt") {
		t.Fatalf("cairn rollback --dry-run through the daemon: %v\n%s", err, cli)
	}
	sameTree(t, "after dry runs", hashTree(t, root), now)
	if got := preRestores(); got != n {
		t.Fatalf("dry runs sealed %d pre-restore checkpoints", got-n)
	}

	for _, tc := range []struct {
		name, prefix, sha string
		tree              map[string]string
	}{
		{"rig-setup state.json records", rig[:8], rig, rigTree},
		{"exit commit only git knows", exitSHA[:8], exitSHA, exitTree},
		{"main's initial checkpoint setup", mainSHA[:7], mainSHA, map[string]string{}},
	} {
		code, out := command(t, sock, execDir, api.CmdRollbackToCheckpoint, map[string]any{"checkpointSha": tc.prefix})
		if code != 200 {
			t.Fatalf("%s: rollback.toCheckpoint %s: %d %v", tc.name, tc.prefix, code, out)
		}
		data, _ := out["data"].(map[string]any)
		tgt, _ := data["target"].(map[string]any)
		pre, _ := data["preRestore"].(map[string]any)
		if tgt["sha"] != tc.sha || pre["sha"] == nil || data["differences"] != nil {
			t.Fatalf("%s: %v", tc.name, out)
		}
		sameTree(t, tc.name, hashTree(t, root), tc.tree)
		// The undo dry run plans the way back and changes nothing.
		code, out = call(t, sock, "POST", "/v1/undo", api.UndoRequest{Workspace: execDir, DryRun: true})
		if code != 200 || out["dryRun"] != true {
			t.Fatalf("%s: dry undo: %d %v", tc.name, code, out)
		}
		sameTree(t, tc.name+", dry undo", hashTree(t, root), tc.tree)
		if code, out := call(t, sock, "POST", "/v1/undo", api.UndoRequest{Workspace: execDir}); code != 200 || out["differences"] != nil {
			t.Fatalf("%s: undo: %d %v", tc.name, code, out)
		}
		sameTree(t, tc.name+", undone", hashTree(t, root), now)
	}

	// A prefix main's first commit shares with another commit is refused, every match listed.
	other := collidingCommit(t, execDir, index, git(t, gitDir, "rev-parse", rig+"^{tree}"), mainSHA, mainSHA)
	code, out = command(t, sock, execDir, api.CmdRollbackToCheckpoint, map[string]any{"checkpointSha": mainSHA[:4]})
	msg, _ := out["message"].(string)
	if code != 409 || out["code"] != "AMBIGUOUS_CHECKPOINT" || !strings.Contains(msg, "Ambiguous checkpoint SHA '"+mainSHA[:4]+"'") ||
		!strings.Contains(msg, "  - "+mainSHA+" (Initial checkpoint setup - commit) in run —") ||
		!strings.Contains(msg, "  - "+other+" (Other - exit) in run 1577934245000-zzzzz") {
		t.Fatalf("ambiguous prefix: %d %v", code, out)
	}
	sameTree(t, "after the refusal", hashTree(t, root), now)
}
