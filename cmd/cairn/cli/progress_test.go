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

// TestProgressLines: with --json, a long checkpoint and a gc print their
// progress as JSON lines on stderr (stdout keeps the one JSON answer); on a
// pipe without --json they print none.
func TestProgressLines(t *testing.T) {
	ws, state := t.TempDir(), t.TempDir()
	env := []string{"CAIRN_STATE_DIR=" + state}
	n := 11000
	for i := range n {
		p := filepath.Join(ws, fmt.Sprintf("d%02d", i%30), fmt.Sprintf("f%05d", i))
		if i < 30 {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(p, []byte{byte(i)}, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	progressOf := func(stderr string) []api.Progress {
		var out []api.Progress
		for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
			var v struct {
				Progress *api.Progress `json:"progress"`
			}
			if json.Unmarshal([]byte(l), &v) == nil && v.Progress != nil {
				out = append(out, *v.Progress)
			}
		}
		return out
	}
	out, errOut, code := cairn(t, env, "checkpoint", ws, "--json")
	if code != 0 || !json.Valid([]byte(out)) {
		t.Fatalf("checkpoint --json: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	ps := progressOf(errOut)
	if len(ps) == 0 || ps[len(ps)-1].Done != ps[len(ps)-1].Total || ps[len(ps)-1].Total < n {
		t.Errorf("checkpoint --json progress: %+v (stderr %q)", ps, errOut)
	}
	out, errOut, code = cairn(t, env, "gc", ws, "--json")
	if code != 0 || !json.Valid([]byte(out)) {
		t.Fatalf("gc --json: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if ps := progressOf(errOut); len(ps) == 0 || ps[0].Unit != "steps" || !strings.HasPrefix(ps[0].Op, "maintenance: ") {
		t.Errorf("gc --json progress: %+v (stderr %q)", ps, errOut)
	}
	if _, errOut, code := cairn(t, env, "gc", ws); code != 0 || strings.Contains(errOut, "progress") || strings.Contains(errOut, "\r") {
		t.Errorf("gc on a pipe: exit %d, stderr %q: want no progress", code, errOut)
	}
}
