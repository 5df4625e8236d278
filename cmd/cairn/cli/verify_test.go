package cli_test

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// TestVerifyOffline: with no daemon, cairn verify reads the store itself:
// exit 0 when the checkpoint holds what git would record, 4 on a
// difference, 5 (refused) for an unknown checkpoint, 2 for a bad command line.
func TestVerifyOffline(t *testing.T) {
	env := cliEnv(t)
	ws := t.TempDir()
	lay(t, ws, map[string]string{"a.txt": "a\n", "sub/b.txt": "b\n", ".gitignore": "*.log\n"})
	mustCairn(t, env, "checkpoint", ws)
	if out := mustCairn(t, env, "verify", ws); !strings.Contains(out, "ok: ") {
		t.Errorf("verify after a checkpoint:\n%s", out)
	}
	lay(t, ws, map[string]string{"a.txt": "edited\n", "x.log": "ignored\n"})
	out, errOut, code := cairn(t, env, "verify", ws, "c1")
	if code != 4 || !strings.Contains(out, `changed "a.txt": checkpoint 100644 `) || strings.Contains(out, "x.log") || !strings.Contains(errOut, "c1 differs from the work tree in 1 path\n") {
		t.Errorf("verify after an edit: exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code := cairn(t, env, "verify", ws, "c9"); code != 5 || !strings.Contains(errOut, "unknown checkpoint: c9") {
		t.Errorf("verify c9: exit %d, %s", code, errOut)
	}
	if _, _, code := cairn(t, env, "verify"); code != 2 {
		t.Errorf("verify with no workspace: exit %d, want 2", code)
	}
}

// TestVerifyHankweavePlan: in a Hankweave workspace the selection is the
// plan's (state.json): through the checkpoint's codon, or through the codon
// last run for a checkpoint without one.
func TestVerifyHankweavePlan(t *testing.T) {
	env := cliEnv(t)
	exec := filepath.Join(t.TempDir(), "exec")
	root := filepath.Join(exec, "agentRoot")
	lay(t, root, map[string]string{"src/a.go": "a\n", "docs/d.md": "d\n", "other.txt": "o\n"})
	state := `{"runs":[{"runId":"1-abcde","runFolder":"","gitBranch":"run-1-abcde","startingConditions":{"type":"fresh"},
  "status":"running","startTime":"2026-01-02T03:04:00.000Z","serverPid":1,
  "codons":[{"codonId":"write","startTime":"2026-01-02T03:04:01.000Z","status":"completed","endTime":"2026-01-02T03:04:59.000Z"}]}],
 "currentRunId":"1-abcde",
 "executionPlan":[{"codonId":"write","codon":{"id":"write","name":"Write","checkpointedFiles":["src"]}},
                  {"codonId":"docs","codon":{"id":"docs","name":"Docs","checkpointedFiles":["docs/**"]}}]}`
	lay(t, exec, map[string]string{".hankweave/state.json": state})
	mustCairn(t, env, "checkpoint", exec)
	mustCairn(t, env, "checkpoint", exec, "--status", "completed", "--codon", "docs", "--run", "1-abcde")
	for _, c := range []struct {
		id      string
		pats    []string
		removed []string // held by the checkpoint (sealed under **), outside the plan's selection
	}{
		{"c1", []string{"src"}, []string{"docs/d.md", "other.txt"}},
		{"c2", []string{"src", "docs/**"}, []string{"other.txt"}},
	} {
		out, errOut, code := cairn(t, env, "verify", exec, c.id, "--json")
		var v ckpt.Verification
		if err := json.Unmarshal([]byte(out), &v); err != nil || code != 4 {
			t.Fatalf("verify %s: exit %d, %v\n%s%s", c.id, code, err, out, errOut)
		}
		var removed []string
		for _, d := range v.Differences {
			if d.Status == ckpt.VerifyRemoved {
				removed = append(removed, d.Path)
			}
		}
		if !slices.Equal(v.Patterns, c.pats) || !slices.Equal(removed, c.removed) || len(removed) != len(v.Differences) {
			t.Errorf("verify %s: patterns %q, differences %+v; want patterns %q, removed %q", c.id, v.Patterns, v.Differences, c.pats, c.removed)
		}
	}
}
