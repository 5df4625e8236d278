//go:build linux

package agent_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/hankweave"
	"github.com/cairn-dev/cairn/agent/hankweave/hwsim"
	"github.com/cairn-dev/cairn/restore"

	"github.com/cairn-dev/cairn/platform/testsupport"
	"github.com/cairn-dev/cairn/restore/ckpt"
)

// hashTree hashes every file under root (the work tree), by path.
func hashTree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		h := sha256.Sum256(b)
		rel, _ := filepath.Rel(root, p)
		out[rel] = hex.EncodeToString(h[:])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameTree(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	var diff []string
	for p, h := range want {
		if got[p] != h {
			diff = append(diff, "changed or missing: "+p)
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			diff = append(diff, "extra: "+p)
		}
	}
	sort.Strings(diff)
	if len(diff) > 0 {
		t.Errorf("%s: tree differs: %v", what, diff)
	}
}

func fileIs(t *testing.T, path, want string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if want == "" {
		if err == nil {
			t.Errorf("%s exists (%q), want it gone", path, b)
		}
		return
	}
	if err != nil || string(b) != want {
		t.Errorf("%s = %q (%v), want %q", path, b, err, want)
	}
}

// TestRollbackOverSocket plays a run with a completed and a failed codon,
// then rolls back every way the runtime can, undoing each, over the socket.
func TestRollbackOverSocket(t *testing.T) {
	plan := hwsim.Plan(
		hwsim.Codon{ID: "a", Name: "Codon A", Files: []string{"**"},
			RigSetup: []hwsim.RigStep{hwsim.Copy("t", "rig", map[string]string{"rig.txt": "rig\n"})}},
		hwsim.Codon{ID: "b", Name: "Codon B", Files: []string{"**"}},
		hwsim.Codon{ID: "c", Name: "Codon C", Files: []string{"**"}},
	)
	execDir, sim := newHankExec(t, plan)
	state := t.TempDir()
	root := filepath.Join(execDir, "agentRoot")
	write(t, filepath.Join(root, ".gitignore"), "*.log\n")
	write(t, filepath.Join(root, "keep.log"), "ignored, never deleted\n")
	d := startDaemon(t, state, "--config", configFile(t, fastAutosave), "--watch", execDir)
	sock := d.socket
	waitBaseline(t, execDir, state)

	run := sim.StartRun()
	sim.StartCodon("a")
	waitMarker(t, execDir, state, markerKey{ckpt.KindRigSetup, run, "a", 0})
	sim.WriteFile("a.txt", "a done\n")
	sim.CompleteCodon("a")
	ca := waitMarker(t, execDir, state, markerKey{ckpt.KindCompleted, run, "a", 0})
	sim.StartCodon("b")
	sim.WriteFile("b.txt", "b broke\n")
	sim.EditFile("a.txt", "a done", "a edited by b")
	sim.FailCodon("b", "boom", false)
	eb := waitMarker(t, execDir, state, markerKey{ckpt.KindError, run, "b", 0})
	// An autosave of a later edit.
	sim.WriteFile("later.txt", "later\n")
	auto := waitRecord(t, execDir, state, "autosave of later.txt", func(r ckpt.Record) bool {
		if r.Kind != ckpt.KindAutosave || r.SHA == "" {
			return false
		}
		_, ok := blobIf(t, hwStore(execDir), r.SHA, "later.txt")
		return ok
	})
	sim.Shutdown()

	// state.json gets a field cairn does not know; a rollback must keep it.
	sp := filepath.Join(execDir, ".hankweave", "state.json")
	var raw map[string]any
	b, _ := os.ReadFile(sp)
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	raw["x-unknown"] = map[string]any{"kept": true}
	b, _ = json.MarshalIndent(raw, "", "  ")
	write(t, sp, string(b))

	// A file written by hand after the last checkpoint.
	write(t, filepath.Join(root, "by-hand.txt"), "mine\n")
	// Let its autosave (fast autosave is on) land before the first case, so
	// that none races with it; none within 5 s is no failure.
	testsupport.Poll(5*time.Second, func() bool {
		for _, r := range ledger(t, execDir, state) {
			if r.Kind != ckpt.KindAutosave || r.SHA == "" {
				continue
			}
			if _, ok := blobIf(t, hwStore(execDir), r.SHA, "by-hand.txt"); ok {
				return true
			}
		}
		return false
	})

	cases := []struct {
		name  string
		do    func() (int, map[string]any)
		check func()
		sha   string
	}{
		{"codon end", func() (int, map[string]any) {
			return command(t, sock, execDir, "rollback.toCodon", map[string]any{"codonId": "a", "checkpointType": "end"})
		}, func() {
			fileIs(t, filepath.Join(root, "a.txt"), "a done\n")
			fileIs(t, filepath.Join(root, "b.txt"), "")
		}, ca.SHA},
		{"codon start", func() (int, map[string]any) {
			return command(t, sock, execDir, "rollback.toCodon", map[string]any{"codonId": "a", "checkpointType": "start"})
		}, func() {
			fileIs(t, filepath.Join(root, "a.txt"), "")
			fileIs(t, filepath.Join(root, "rig.txt"), "rig\n")
		}, ""},
		{"last success", func() (int, map[string]any) {
			return command(t, sock, execDir, "rollback.toLastSuccess", nil)
		}, func() {
			fileIs(t, filepath.Join(root, "a.txt"), "a done\n")
			fileIs(t, filepath.Join(root, "b.txt"), "")
		}, ca.SHA},
		{"short sha", func() (int, map[string]any) {
			return command(t, sock, execDir, "rollback.toCheckpoint", map[string]any{"checkpointSha": eb.SHA[:8]})
		}, func() {
			fileIs(t, filepath.Join(root, "b.txt"), "b broke\n")
			fileIs(t, filepath.Join(root, "later.txt"), "")
		}, eb.SHA},
		{"autosave", func() (int, map[string]any) {
			return call(t, sock, "POST", "/v1/restore", api.RestoreRequest{Workspace: execDir, Target: auto.ID})
		}, func() { fileIs(t, filepath.Join(root, "later.txt"), "later\n") }, auto.SHA},
	}
	for i, c := range cases {
		before := hashTree(t, root)
		code, out := c.do()
		if code != 200 {
			t.Fatalf("%s: %d %v", c.name, code, out)
		}
		c.check()
		fileIs(t, filepath.Join(root, "keep.log"), "ignored, never deleted\n")
		// by-hand.txt may have been autosaved (then cairn tracks it and a
		// target without it removes it); either way the pre-restore
		// checkpoint holds it, and undo brings it back.
		data := out
		if d, ok := out["data"].(map[string]any); ok {
			data = d
		}
		pre, _ := data["preRestore"].(map[string]any)
		preSHA, _ := pre["sha"].(string)
		if preSHA == "" {
			t.Fatalf("%s: no pre-restore checkpoint: %v", c.name, out)
		}
		if got := blobOf(t, hwStore(execDir), preSHA, "by-hand.txt"); got != "mine" {
			t.Errorf("%s: pre-restore by-hand.txt = %q", c.name, got)
		}
		if tgt, _ := data["target"].(map[string]any); c.sha != "" && tgt["sha"] != c.sha {
			t.Errorf("%s: restored to %v, want %s", c.name, tgt["sha"], c.sha)
		}
		if i == 0 {
			checkContinuation(t, execDir, run, ca.SHA)
		}
		code, out = call(t, sock, "POST", "/v1/undo", api.WorkspaceRequest{Workspace: execDir})
		if code != 200 {
			t.Fatalf("%s: undo: %d %v", c.name, code, out)
		}
		sameTree(t, c.name+" then undo", hashTree(t, root), before)
	}

	// The listing marks HEAD; checkpoint.list answers in the runtime's shape.
	out, err := exec.Command(cairnBin, "list", execDir, "--socket", sock).CombinedOutput()
	if err != nil || !strings.Contains(string(out), restore.HeadMark) {
		t.Errorf("cairn list: %v\n%s", err, out)
	}
	code, lst := command(t, sock, execDir, "checkpoint.list", map[string]any{"runId": run})
	if cps, _ := lst["data"].(map[string]any)["checkpoints"].([]any); code != 200 || len(cps) < 3 {
		t.Errorf("checkpoint.list: %d %v", code, lst)
	}

	// Refusals with their messages.
	for _, c := range []struct {
		typ  string
		data map[string]any
		code int
		msg  string
	}{
		{"rollback.toCheckpoint", map[string]any{"checkpointSha": "abcdef12"}, 404, "unknown checkpoint: abcdef12"},
		{"rollback.toCodon", map[string]any{"codonId": "nope", "checkpointType": "end"}, 404, "Codon nope not found in execution history"},
		{"rollback.toCodon", map[string]any{"codonId": "c", "checkpointType": "end"}, 404, "Codon c not found in execution history"},
		{"rollback.toCheckpoint", map[string]any{"checkpointSha": "--output=/tmp/cairn-x"}, 400, ""},
	} {
		code, out := command(t, sock, execDir, c.typ, c.data)
		if code != c.code || (c.msg != "" && out["message"] != c.msg) || out["code"] == "" {
			t.Errorf("%s %v: %d %v, want %d %q", c.typ, c.data, code, out, c.code, c.msg)
		}
	}
	if _, err := os.Stat("/tmp/cairn-x"); err == nil {
		t.Error("a sha argument became a git option")
	}

	// ROLLBACK_IN_PROGRESS: the test holds the store's lock, so a rollback waits.
	lockPath := filepath.Join(hwStore(execDir), "cairn", "lock")
	lf, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	done := make(chan int, 1)
	go func() {
		code, _ := command(t, sock, execDir, "rollback.toLastSuccess", nil)
		done <- code
	}()
	waitFor(t, 10*time.Second, "the rollback to begin", func() bool {
		w, _ := d.workspace(execDir)
		return w.Rolling
	})
	code, blocked := call(t, sock, "POST", "/v1/checkpoint", api.CheckpointRequest{Workspace: execDir})
	if code != 409 {
		t.Errorf("checkpoint during a rollback: %d", code)
	}
	if blocked["code"] != restore.CodeRollbackInProgress || blocked["message"] != restore.MsgRollbackBlocked ||
		blocked["context"] != "Attempted command: checkpoint" || blocked["severity"] != "operation" {
		t.Errorf("blocked payload %v", blocked)
	}
	if code, out := command(t, sock, execDir, "rollback.toCodon", map[string]any{"codonId": "a", "checkpointType": "end"}); code != 409 || out["message"] != restore.MsgRollbackInProgress {
		t.Errorf("second rollback: %d %v", code, out)
	}
	if code, out := call(t, sock, "POST", "/v1/undo", api.WorkspaceRequest{Workspace: execDir}); code != 409 || out["code"] != restore.CodeRollbackInProgress {
		t.Errorf("undo during rollback: %d %v", code, out)
	}
	if code, _ := call(t, sock, "GET", "/v1/list?workspace="+execDir, nil); code != 200 {
		t.Errorf("list during rollback: %d", code)
	}
	if code, _ := command(t, sock, execDir, "checkpoint.list", nil); code != 200 {
		t.Errorf("checkpoint.list during rollback: %d", code)
	}
	if code, _ := call(t, sock, "GET", "/v1/status", nil); code != 200 {
		t.Errorf("status during rollback: %d", code)
	}
	syscall.Flock(int(lf.Fd()), syscall.LOCK_UN)
	lf.Close()
	select {
	case code := <-done:
		if code != 200 {
			t.Errorf("the held rollback answered %d", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the held rollback never finished")
	}

	// Hostile requests: each refused clearly, the daemon healthy after.
	big := append([]byte(`{"workspace":"`), bytes.Repeat([]byte("x"), 2<<20)...)
	for _, c := range []struct {
		path string
		body any
		code int
		err  string
	}{
		{"/v1/restore", big, 413, "BODY_TOO_LARGE"},
		{"/v1/restore", []byte(`{"workspace": `), 400, "BAD_REQUEST"},
		{"/v1/command", []byte(`not json`), 400, "BAD_REQUEST"},
		{"/v1/restore", api.RestoreRequest{Workspace: execDir + "/../exec", Target: "c1"}, 400, "BAD_WORKSPACE"},
		{"/v1/nope", nil, 404, "NOT_FOUND"},
	} {
		code, out := call(t, sock, "POST", c.path, c.body)
		if code != c.code || out["code"] != c.err || out["message"] == "" {
			t.Errorf("POST %s: %d %v, want %d %s", c.path, code, out, c.code, c.err)
		}
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(execDir, link); err != nil {
		t.Fatal(err)
	}
	// A path through a link is not the workspace: refused as an unwatched
	// one (links are never resolved as root).
	if code, out := call(t, sock, "POST", "/v1/undo", api.WorkspaceRequest{Workspace: link}); code != 403 || out["code"] != "FORBIDDEN" {
		t.Errorf("symlinked workspace: %d %v", code, out)
	}

	// Another uid: 403, learning nothing.
	for _, p := range []string{filepath.Dir(state), state} {
		_ = os.Chmod(p, 0o755)
	}
	curl := exec.Command("curl", "-s", "--unix-socket", sock, "-X", "POST", "-d", `{"workspace":"`+execDir+`"}`, "http://cairn/v1/undo")
	curl.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if out, err := curl.Output(); err != nil || !strings.Contains(string(out), `"FORBIDDEN"`) {
		t.Errorf("another uid: %v %s", err, out)
	}
	if code, _ := call(t, sock, "GET", "/v1/status", nil); code != 200 {
		t.Fatalf("daemon unhealthy after hostile requests: %d", code)
	}

	// A running codon refuses a rollback.
	sim.StartRun()
	sim.StartCodon("a")
	if code, out := command(t, sock, execDir, "rollback.toLastSuccess", nil); code != 409 || out["message"] != restore.MsgCodonRunning {
		t.Errorf("rollback while a codon runs: %d %v", code, out)
	}
}

// checkContinuation checks state.json after a rollback to sha, a codon "a" end.
func checkContinuation(t *testing.T, execDir, fromRun, sha string) {
	t.Helper()
	st, err := hankweave.ReadState(execDir)
	if err != nil {
		t.Fatal(err)
	}
	if st.Warning != nil || len(st.Runs) < 2 || st.CurrentRunID == nil || *st.CurrentRunID != st.Runs[0].RunID {
		t.Fatalf("state after rollback: %+v", st)
	}
	nr := st.Runs[0]
	sc := nr.StartingConditions
	if sc.Type != "continuation" || sc.Reason != "rollback" || sc.Source == nil || sc.Source.RunID != fromRun ||
		sc.Source.CheckpointSHA != sha || sc.Source.AfterCodon == nil || *sc.Source.AfterCodon != "a" ||
		nr.GitBranch != "run-"+nr.RunID || nr.Status != "running" || len(nr.Codons) != 0 {
		t.Errorf("continuation run %+v / %+v", nr, sc.Source)
	}
	if old := st.Run(fromRun); old == nil || old.Status != "completed" || old.EndTime == "" {
		t.Errorf("abandoned run %+v", old)
	}
	b, _ := os.ReadFile(filepath.Join(execDir, ".hankweave", "state.json"))
	if !bytes.Contains(b, []byte(`"x-unknown"`)) {
		t.Error("state.json lost a field cairn does not know")
	}
}
