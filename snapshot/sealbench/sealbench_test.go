package sealbench

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestRunTiny runs the whole benchmark on a 200-file tree, once, so CI proves
// it still works. It checks what was measured, never how fast.
func TestRunTiny(t *testing.T) {
	ctx := context.Background()
	var out bytes.Buffer
	cfg := Config{Sizes: []int{200}, Runs: 1, Dir: t.TempDir(), JSON: true}
	if err := Run(ctx, cfg, &out); err != nil {
		t.Fatal(err)
	}
	var rep Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("JSON output: %v\n%s", err, out.Bytes())
	}
	if len(rep.Sizes) != 1 || rep.Sizes[0].Files != 200 {
		t.Fatalf("sizes = %+v, want one of 200 files", rep.Sizes)
	}
	s := rep.Sizes[0]
	// restic is measured only where it is installed (.ci/run installs it).
	_, lookErr := exec.LookPath("restic")
	restic := lookErr == nil
	for _, op := range s.Ops {
		if !restic && (op.Name == OpResticFirst || op.Name == OpResticAgain) {
			if op.Runs != 0 {
				t.Errorf("%s: %d runs without restic installed", op.Name, op.Runs)
			}
			continue
		}
		if op.Runs != 1 || op.MedianMS <= 0 {
			t.Errorf("%s: %d runs, median %v ms; want 1 run with a time", op.Name, op.Runs, op.MedianMS)
		}
	}
	wantRatios := len(ratioOrder)
	if !restic {
		wantRatios -= 2 // first-seal/restic-first, reconcile-checkpoint/restic-again
	}
	if len(s.Ratios) != wantRatios {
		t.Errorf("got %d ratios, want %d (restic installed: %v)", len(s.Ratios), wantRatios, restic)
	}
	// A note means cairn and git sealed different trees, or the floor
	// missed a change: the timings would compare different work.
	for _, n := range s.Notes {
		t.Errorf("note: %s", n)
	}

	// The table form prints every operation.
	out.Reset()
	if err := writeTable(&out, rep.Git, rep.Runs, s); err != nil {
		t.Fatal(err)
	}
	for _, op := range opOrder {
		if !strings.Contains(out.String(), op.what) {
			t.Errorf("table lacks %q:\n%s", op.what, out.String())
		}
	}
}

// TestRunTinyParts: with IncrementalOnly, the incremental seals and the
// floor are timed, and nothing else; with ReconcileOnly, the reconciles
// too, and no pipeline or first seal.
func TestRunTinyParts(t *testing.T) {
	incr := []string{OpIncremental, OpFloor, OpIncrGit}
	for _, c := range []struct {
		name  string
		cfg   Config
		timed []string
	}{
		{"incremental-only", Config{IncrementalOnly: true}, incr},
		{"reconcile-only", Config{ReconcileOnly: true}, append(incr, OpReconcile, OpStatus, OpReconCkpt)},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			cfg := c.cfg
			cfg.Sizes, cfg.Runs, cfg.Dir, cfg.JSON = []int{200}, 1, t.TempDir(), true
			if err := Run(context.Background(), cfg, &out); err != nil {
				t.Fatal(err)
			}
			var rep Report
			if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
				t.Fatalf("JSON output: %v\n%s", err, out.Bytes())
			}
			for _, op := range rep.Sizes[0].Ops {
				want := 0
				if slices.Contains(c.timed, op.Name) {
					want = 1
				}
				if op.Runs != want {
					t.Errorf("%s: %d runs, want %d", op.Name, op.Runs, want)
				}
			}
		})
	}
}

// TestGenerateDeterministic checks that a seed gives the same tree and the
// same mutations, and that a mutation touches 20 + 5 + 5 distinct paths.
func TestGenerateDeterministic(t *testing.T) {
	ctx := context.Background()
	var trees [2]*tree
	var changed [2][]string
	for i := range trees {
		root := t.TempDir()
		tr, err := generate(ctx, root, 120, 7)
		if err != nil {
			t.Fatal(err)
		}
		if tr.tracked() != 120 {
			t.Fatalf("tracked = %d, want 120", tr.tracked())
		}
		c, err := tr.mutate(3)
		if err != nil {
			t.Fatal(err)
		}
		trees[i], changed[i] = tr, c
	}
	if !slices.Equal(trees[0].files(), trees[1].files()) {
		t.Error("same seed, different trees")
	}
	if !slices.Equal(changed[0], changed[1]) {
		t.Error("same seed, different mutations")
	}
	if n := len(slices.Compact(slices.Clone(changed[0]))); n != editsPerRun+addsPerRun+deletesPerRun {
		t.Errorf("mutation touched %d distinct paths, want %d", n, editsPerRun+addsPerRun+deletesPerRun)
	}
	for _, p := range trees[0].files() {
		a, err := os.ReadFile(filepath.Join(trees[0].root, p))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(trees[1].root, p))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Fatalf("%s differs between two trees of the same seed", p)
		}
	}
}

// TestRunTinyFirstOnly: with FirstOnly, the first seals and git add -A +
// commit are timed, nothing else, and both sealed the same tree.
func TestRunTinyFirstOnly(t *testing.T) {
	var out bytes.Buffer
	cfg := Config{Sizes: []int{200}, Runs: 1, Dir: t.TempDir(), JSON: true, FirstOnly: true}
	if err := Run(context.Background(), cfg, &out); err != nil {
		t.Fatal(err)
	}
	var rep Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("JSON output: %v\n%s", err, out.Bytes())
	}
	s := rep.Sizes[0]
	var timed []string
	for _, op := range s.Ops {
		if op.Runs != 1 || op.MedianMS <= 0 {
			t.Errorf("%s: %d runs, median %v ms; want 1 run with a time", op.Name, op.Runs, op.MedianMS)
		}
		timed = append(timed, op.Name)
	}
	if want := []string{OpFirstSeal, OpAddAll}; !slices.Equal(timed, want) {
		t.Errorf("timed %v, want %v", timed, want)
	}
	if len(s.Ratios) != 1 || s.Ratios[0].Name != "first-seal/addall" {
		t.Errorf("ratios %+v, want first-seal/addall alone", s.Ratios)
	}
	if s.FirstSealBytes <= 0 || s.GCBytes <= 0 {
		t.Errorf("store sizes %d and %d, want both measured", s.FirstSealBytes, s.GCBytes)
	}
	for _, n := range s.Notes {
		t.Errorf("note: %s", n)
	}
}
