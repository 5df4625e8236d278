//go:build linux

package agent_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/cairn-dev/cairn/agent/hankweave/hwsim"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// TestRollbackRestoresArchive: a file the runtime archived into rigArchive/
// after the target comes back to agentRoot/ and leaves the manifest; one
// archived before the target stays archived.
func TestRollbackRestoresArchive(t *testing.T) {
	plan := hwsim.Plan(
		hwsim.Codon{ID: "a", Name: "Codon A", Files: []string{"**"}},
		hwsim.Codon{ID: "b", Name: "Codon B", Files: []string{"**"}},
	)
	execDir, sim := newHankExec(t, plan)
	state := t.TempDir()
	root := filepath.Join(execDir, "agentRoot")
	d := startDaemon(t, state, "--watch", execDir)
	waitBaseline(t, execDir, state)

	run := sim.StartRun()
	sim.StartCodon("a")
	sim.WriteFile("a.txt", "a\n")
	sim.CompleteCodon("a")
	ca := waitMarker(t, execDir, state, markerKey{ckpt.KindCompleted, run, "a", 0})
	sim.StartCodon("b")
	sim.WriteFile("out.md", "b's output\n")
	sim.CompleteCodon("b")
	cb := waitMarker(t, execDir, state, markerKey{ckpt.KindCompleted, run, "b", 0})
	sim.Shutdown()

	// The runtime archives b's output after b (and an older file after a).
	write(t, filepath.Join(execDir, "rigArchive/b/out.md"), "b's output\n")
	os.Remove(filepath.Join(root, "out.md"))
	write(t, filepath.Join(execDir, "rigArchive/a/old.md"), "old\n")
	manifest := map[string]any{"version": "1.0.0", "entries": []map[string]any{
		{"sourcePath": "out.md", "archivePath": "rigArchive/b/out.md", "codonId": "b", "checkpointSha": cb.SHA, "timestamp": "t"},
		{"sourcePath": "old.md", "archivePath": "rigArchive/a/old.md", "codonId": "a", "checkpointSha": ca.SHA, "timestamp": "t"},
	}}
	b, _ := json.MarshalIndent(manifest, "", "  ")
	write(t, filepath.Join(execDir, ".hankweave/archive-manifest.json"), string(b))
	// Let the daemon seal the removal of out.md (an autosave), so the position is past b.
	waitRecord(t, execDir, state, "autosave of the archiving", func(r ckpt.Record) bool {
		return r.Kind == ckpt.KindAutosave && r.Removed == 1
	})

	code, body := command(t, d.socket, execDir, "rollback.toCodon", map[string]any{"codonId": "a", "checkpointType": "end"})
	if code != 200 {
		t.Fatalf("rollback: %d %v", code, body)
	}
	fileIs(t, filepath.Join(root, "out.md"), "b's output\n")
	if _, err := os.Stat(filepath.Join(execDir, "rigArchive/b/out.md")); !os.IsNotExist(err) {
		t.Error("restored archive entry still in rigArchive/")
	}
	if _, err := os.Stat(filepath.Join(execDir, "rigArchive/a/old.md")); err != nil {
		t.Error("an entry archived before the target was restored")
	}
	var after struct {
		Entries []map[string]any `json:"entries"`
	}
	b, _ = os.ReadFile(filepath.Join(execDir, ".hankweave/archive-manifest.json"))
	if err := json.Unmarshal(b, &after); err != nil || len(after.Entries) != 1 || after.Entries[0]["sourcePath"] != "old.md" {
		t.Errorf("manifest after rollback: %s", b)
	}
}
