package hankweave

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func TestRestoreArchive(t *testing.T) {
	exec := t.TempDir()
	root := filepath.Join(exec, "agentRoot")
	put := func(p, s string) {
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(s), 0o644)
	}
	put(filepath.Join(exec, "rigArchive/c2/out.md"), "archived after target")
	put(filepath.Join(exec, "rigArchive/c1/old.md"), "archived before target")
	put(filepath.Join(exec, "rigArchive/c3/taken.md"), "archive")
	put(filepath.Join(root, "taken.md"), "exists already")
	put(filepath.Join(exec, "rigArchive/c4/orphan.md"), "orphan")
	manifest := `{"version": "1.0.0", "extra": {"kept": true}, "entries": [
  {"sourcePath": "out.md", "archivePath": "rigArchive/c2/out.md", "codonId": "c2", "checkpointSha": "bbbb", "timestamp": "t"},
  {"sourcePath": "old.md", "archivePath": "rigArchive/c1/old.md", "codonId": "c1", "checkpointSha": "aaaa", "timestamp": "t"},
  {"sourcePath": "taken.md", "archivePath": "rigArchive/c3/taken.md", "codonId": "c3", "checkpointSha": "bbbb", "timestamp": "t"},
  {"sourcePath": "../escape.md", "archivePath": "rigArchive/c4/orphan.md", "codonId": "c4", "checkpointSha": "orphan", "timestamp": "t"},
  {"sourcePath": "sub/orphan.md", "archivePath": "rigArchive/c4/orphan.md", "codonId": "c4", "checkpointSha": "orphan", "timestamp": "t"}]}`
	put(filepath.Join(exec, ".hankweave", ArchiveManifestFile), manifest)
	res, err := RestoreArchive(exec, root, func(sha string) bool { return sha == "bbbb" })
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Restored) != 2 || res.Restored[0] != "out.md" || res.Restored[1] != "sub/orphan.md" ||
		len(res.Protected) != 1 || len(res.Failed) != 1 {
		t.Fatalf("result %+v", res)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "out.md")); string(b) != "archived after target" {
		t.Errorf("out.md = %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "taken.md")); string(b) != "exists already" {
		t.Errorf("protected destination overwritten: %q", b)
	}
	var doc struct {
		Extra   map[string]bool   `json:"extra"`
		Entries []json.RawMessage `json:"entries"`
	}
	b, _ := os.ReadFile(filepath.Join(exec, ".hankweave", ArchiveManifestFile))
	if err := json.Unmarshal(b, &doc); err != nil || !doc.Extra["kept"] || len(doc.Entries) != 3 {
		t.Fatalf("manifest after: %s (%v)", b, err)
	}
}
