package sealbench

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
)

// TestRunRestoreTiny runs the restore benchmark on a 300-file tree, once, so
// CI proves it still runs and leaves both work trees at the target (RunRestore
// fails when either differs from it). It checks nothing about speed.
func TestRunRestoreTiny(t *testing.T) {
	var out bytes.Buffer
	cfg := RestoreConfig{Files: 300, Changed: 30, Runs: 1, Dir: t.TempDir(), JSON: true}
	if err := RunRestore(context.Background(), cfg, &out); err != nil {
		t.Fatal(err)
	}
	var rep RestoreReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("JSON output: %v\n%s", err, out.Bytes())
	}
	// One warm-up and one counted run, each checking cairn's tree and git's.
	if rep.Verified != 4 {
		t.Errorf("verified %d restores, want 4", rep.Verified)
	}
	if rep.Changed != 30 {
		t.Errorf("changed %d files, want 30", rep.Changed)
	}
	for _, op := range rep.Result.Ops {
		if op.Runs != 1 {
			t.Errorf("%s: %d runs, want 1", op.Name, op.Runs)
		}
	}
}
