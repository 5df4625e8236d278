package cli_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/agent/api"
)

// TestShowSummarisesBigCheckpoints: `cairn show` of a checkpoint of many
// files prints git's one-line summary, the folders that changed most and
// the first files, and says how many more and how to list them; --limit
// and --files list more; --json answers the same page with the total.
func TestShowSummarisesBigCheckpoints(t *testing.T) {
	ws, state := t.TempDir(), t.TempDir()
	env := []string{"CAIRN_STATE_DIR=" + state}
	for i, dir := range map[int]string{40: "src/deep", 15: "docs", 5: ""} {
		for j := range i {
			p := filepath.Join(ws, dir, fmt.Sprintf("f%02d.txt", j))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte("x\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, errOut, code := cairn(t, env, "checkpoint", ws); code != 0 {
		t.Fatalf("checkpoint: exit %d: %s", code, errOut)
	}
	out, errOut, code := cairn(t, env, "show", ws, "c1")
	if code != 0 {
		t.Fatalf("show: exit %d: %s", code, errOut)
	}
	for _, want := range []string{"60 files changed", "changed most:", "40  src/  (+40 ~0 -0)", "15  docs/", "first 20 of 60 files:", "… 40 more: --files lists them all"} {
		if !strings.Contains(out, want) {
			t.Errorf("show does not say %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "\n  + "); n != 20 {
		t.Errorf("show lists %d files, want 20:\n%s", n, out)
	}
	out, _, _ = cairn(t, env, "show", ws, "c1", "--limit", "5")
	if n := strings.Count(out, "\n  + "); n != 5 || !strings.Contains(out, "… 55 more") {
		t.Errorf("show --limit 5 lists %d files:\n%s", n, out)
	}
	out, _, _ = cairn(t, env, "show", ws, "c1", "--files")
	if n := strings.Count(out, "\n  + "); n != 60 || strings.Contains(out, "more:") || strings.Contains(out, "changed most") {
		t.Errorf("show --files lists %d files:\n%s", n, out)
	}
	out, _, _ = cairn(t, env, "show", ws, "c1", "--json")
	var d api.Diff
	if err := json.Unmarshal([]byte(out), &d); err != nil || d.Total != 60 || len(d.Files) != 20 || len(d.Folders) != 7 || d.Folders[0].Path != "src" {
		t.Errorf("show --json: total %d, %d files, folders %+v (%v)", d.Total, len(d.Files), d.Folders, err)
	}
}
