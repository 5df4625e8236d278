//go:build linux

package agent_test

// Tests written as a local attacker would try a root daemon through a
// root-owned workspace that holds a folder everyone may write (a tmp/ of
// mode 1777): the attacker's own folder in it is swapped with a link to a
// root-only folder (renameat2 exchange, in a loop) while cairn seals,
// restores and moves archived files. Every work-tree path cairn's own code
// touches is resolved beneath the workspace with no link followed (README.md,
// "Security"). The in-process engine's reads under the same swap are tested
// in snapshot (TestInprocSealSwappedFolder): as root, git still seals a
// root-owned workspace here too (its fallback, full reconciles), and git's
// own reads are not this rule's.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/hankweave/hwsim"
	"github.com/cairn-dev/cairn/agent/hankweave/hwsim/hwsimtest"
)

// sharedTmp makes dir/tmp mode 1777 (root's, as /tmp is) holding the
// attacker's folder sub (with files) and their link to target beside it.
func sharedTmp(t *testing.T, u testUser, dir, target string, files map[string]string) (sub, link string) {
	t.Helper()
	tmp := filepath.Join(dir, "tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(tmp, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	sub, link = filepath.Join(tmp, "sub"), filepath.Join(tmp, "link")
	ownedDir(t, u, sub, files)
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	_ = os.Lchown(link, u.uid, u.gid)
	return sub, link
}

// rootFolderIntact checks that the root-only folder dir holds exactly want
// (name → content), each file still root's.
func rootFolderIntact(t *testing.T, dir string, want map[string]string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if len(names) != len(want) {
		t.Errorf("root's folder now holds %v", names)
	}
	for name, body := range want {
		p := filepath.Join(dir, name)
		b, err := os.ReadFile(p)
		if err != nil || string(b) != body {
			t.Errorf("root's %s: %q %v", name, b, err)
		}
		if fi, err := os.Lstat(p); err == nil && fi.Sys().(*syscall.Stat_t).Uid != 0 {
			t.Errorf("root's %s changed owner", name)
		}
	}
}

// TestSecurityBeneathPathRestore: path restores of tmp/sub in a root-owned
// workspace delete the attacker's tmp/sub/victim.txt (tracked, gone from the
// target) while tmp/sub is swapped with a link to a root-only folder that
// holds a victim.txt of root's; root's folder is never touched.
func TestSecurityBeneathPathRestore(t *testing.T) {
	alice := newUser(t)
	base := openBase(t)
	ws := filepath.Join(base, "ws")
	write(t, filepath.Join(ws, "a.txt"), "a\n")
	rootDir := filepath.Join(base, "rootdir")
	rootOnly(t, rootDir, "victim.txt", "root's\n")
	write(t, filepath.Join(rootDir, "keep.txt"), "root's keep\n")
	sub, link := sharedTmp(t, alice, ws, rootDir, map[string]string{"keep.txt": "alice's keep\n"})
	state := filepath.Join(base, "state")
	d := startDaemon(t, state, "--watch", ws)
	waitWatching(t, d, ws)
	code, out := call(t, d.socket, "POST", "/v1/checkpoint", api.CheckpointRequest{Workspace: ws, Label: "without victim"})
	if code != 200 {
		t.Fatalf("checkpoint: %d %v", code, out)
	}
	without := out["id"].(string)
	remake := func() { _ = asUser(alice, "sh", "-c", "echo alice > "+filepath.Join(sub, "victim.txt")).Run() }
	remake()
	code, out = call(t, d.socket, "POST", "/v1/checkpoint", api.CheckpointRequest{Workspace: ws, Label: "with victim"})
	if code != 200 {
		t.Fatalf("checkpoint: %d %v", code, out)
	}

	stopExchange := exchangeLoop(sub, link)
	restores := 0
	for end := time.Now().Add(4 * time.Second); time.Now().Before(end); restores++ {
		remake() // as alice: refused to her when it would land in root's folder
		call(t, d.socket, "POST", "/v1/restore", api.RestoreRequest{Workspace: ws, Target: without, Paths: []string{"tmp/sub"}})
	}
	stopExchange()
	t.Logf("%d path restores under the exchange loop", restores)
	rootFolderIntact(t, rootDir, map[string]string{"victim.txt": "root's\n", "keep.txt": "root's keep\n"})
}

// TestSecurityBeneathArchiveRestore: rollbacks (whole restores) and their
// undo in a root-owned execution directory bring an archived file back into
// tmp/sub (agentRoot/tmp mode 1777, ignored, so git never writes there)
// while the attacker swaps tmp/sub with a link to a root-only folder;
// nothing lands in, or leaves, root's folder.
func TestSecurityBeneathArchiveRestore(t *testing.T) {
	alice := newUser(t)
	base := openBase(t)
	rootDir := filepath.Join(base, "rootdir")
	rootOnly(t, rootDir, "keep.txt", "root's\n")
	execDir := filepath.Join(base, "exec")
	plan := hwsim.Plan(
		hwsim.Codon{ID: "a", Name: "Codon A", Files: []string{"**"}},
		hwsim.Codon{ID: "b", Name: "Codon B", Files: []string{"**"}},
	)
	sim := hwsimtest.New(t, execDir, plan, hwsim.WithClock(hwClock()))
	root := filepath.Join(execDir, "agentRoot")
	write(t, filepath.Join(root, ".gitignore"), "tmp/\n")
	sub, link := sharedTmp(t, alice, root, rootDir, map[string]string{"mine.txt": "alice's\n"})
	d := startDaemon(t, filepath.Join(base, "state"), "--watch", execDir)
	waitWatching(t, d, execDir)
	sim.StartRun()
	sim.StartCodon("a")
	sim.WriteFile("a.txt", "a\n")
	sim.CompleteCodon("a")
	sim.StartCodon("b")
	sim.WriteFile("b.txt", "b\n")
	sim.CompleteCodon("b")
	sim.Shutdown()
	var shaA, shaB string
	waitFor(t, 30*time.Second, "both codons' checkpoints", func() bool {
		_, out := call(t, d.socket, "GET", "/v1/list?workspace="+execDir, nil)
		recs, _ := out["records"].([]any)
		shaA, shaB = "", ""
		for _, r := range recs {
			m, _ := r.(map[string]any)
			if m["kind"] == "completed" && m["codonId"] == "a" {
				shaA, _ = m["sha"].(string)
			}
			if m["kind"] == "completed" && m["codonId"] == "b" {
				shaB, _ = m["sha"].(string)
			}
		}
		return shaA != "" && shaB != ""
	})

	stopExchange := exchangeLoop(sub, link)
	rounds, restored := 0, 0
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); rounds++ {
		// The runtime archived b's output from tmp/sub: file and manifest entry.
		write(t, filepath.Join(execDir, "rigArchive/b/tmp/sub/out.md"), "b's output\n")
		manifest := map[string]any{"version": "1.0.0", "entries": []map[string]any{
			{"sourcePath": "tmp/sub/out.md", "archivePath": "rigArchive/b/tmp/sub/out.md", "codonId": "b", "checkpointSha": shaB, "timestamp": "t"},
		}}
		b, _ := json.Marshal(manifest)
		write(t, filepath.Join(execDir, ".hankweave/archive-manifest.json"), string(b))
		_, body := command(t, d.socket, execDir, "rollback.toCheckpoint", map[string]any{"checkpointSha": shaA})
		if strings.Contains(strings.Join(strings.Fields(toJSON(body)), ""), `"restoredPaths":["tmp/sub/out.md"]`) {
			restored++
		}
		call(t, d.socket, "POST", "/v1/undo", api.WorkspaceRequest{Workspace: execDir})
		// Alice clears what came back, as she may in her own folder.
		_ = asUser(alice, "rm", "-f", filepath.Join(sub, "out.md")).Run()
	}
	stopExchange()
	t.Logf("%d rollbacks and undos with archive restores under the exchange loop (%d restored into tmp/sub)", rounds, restored)
	rootFolderIntact(t, rootDir, map[string]string{"keep.txt": "root's\n"})
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
