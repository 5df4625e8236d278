package sealbench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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

// TestWalkFloorCountsEveryEntry: the floor walk stats every entry that is
// not a folder, at every depth, and follows no link.
func TestWalkFloorCountsEveryEntry(t *testing.T) {
	root := t.TempDir()
	want := 0
	for _, d := range []string{"a", "a/b", "a/b/c", "d", "e/f/g/h"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			if err := os.WriteFile(filepath.Join(root, d, fmt.Sprint("f", i)), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			want++
		}
	}
	if err := os.Symlink(filepath.Join(root, "a"), filepath.Join(root, "d", "link")); err != nil {
		t.Fatal(err)
	}
	want++ // the link itself, not what it points to
	n, err := walkFloor(root)
	if err != nil {
		t.Fatal(err)
	}
	if n != want {
		t.Errorf("walkFloor stat'ed %d entries, want %d", n, want)
	}
}
