package sealbench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// SealOnceResult is what SealOnce prints: the first seal's time (the
// store's opening not counted), the tree it sealed and the bytes under the
// store's objects/ right after it.
type SealOnceResult struct {
	MS           float64 `json:"ms"`
	Tree         string  `json:"tree"`
	ObjectsBytes int64   `json:"objectsBytes"`
	// PeakRSS is the seal's process's own peak resident set (VmHWM), in
	// bytes, read as it ends: no git it ran counts.
	PeakRSS int64 `json:"peakRss,omitempty"`
}

// SealOnce opens a new store of workTree under stateDir, seals its first
// checkpoint with the in-process engine, and prints a SealOnceResult as
// JSON to w. It is what a child process runs (Config.SealChild), so the
// seal's peak RSS is its process's alone.
func SealOnce(ctx context.Context, workTree, stateDir string, w io.Writer) error {
	cs, err := openCairn(ctx, workTree, stateDir)
	if err != nil {
		return err
	}
	defer cs.close() // closing twice is harmless
	t0 := time.Now()
	rec, err := cs.seal(ctx, "sealbench first seal", nil)
	took := time.Since(t0)
	if err != nil {
		return err
	}
	tree, err := cs.treeOf(ctx, rec.SHA)
	if err != nil {
		return err
	}
	res := SealOnceResult{MS: ms(took), Tree: tree, ObjectsBytes: dirBytes(filepath.Join(cs.st.GitDir(), "objects"))}
	cs.close() // what closing the store holds counts too
	res.PeakRSS = ownPeakRSS()
	return json.NewEncoder(w).Encode(res)
}

// runFirstOnly times the first seals alone on the tree under dir: each
// counted run pairs cairn's first seal in a fresh store with `git add -A`
// + commit in another, and checks both sealed the same tree.
func runFirstOnly(ctx context.Context, cfg Config, env *gitEnv, treeDir, dir string, res *SizeResult, logf func(string, ...any)) error {
	var cairnMS, addMS []time.Duration
	notes := map[string]bool{}
	for run := 0; run <= cfg.Runs; run++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		what := "warm-up run"
		if run > 0 {
			what = fmt.Sprintf("run %d/%d", run, cfg.Runs)
		}
		logf("%d files, %s: first seals on fresh stores", res.Files, what)
		runDir := filepath.Join(dir, fmt.Sprintf("first-%d", run))
		if err := os.MkdirAll(runDir, 0o755); err != nil {
			return err
		}
		ref, err := env.initStore(ctx, filepath.Join(runDir, "ref"), treeDir, "")
		if err != nil {
			return err
		}
		var got SealOnceResult
		var peak int64
		cairnSide := func() error {
			settle()
			var err error
			got, peak, err = sealOnceIn(ctx, cfg, treeDir, filepath.Join(runDir, "cairn-state"))
			return err
		}
		var addTook time.Duration
		refSide := func() error {
			settle()
			t0 := time.Now()
			err := ref.addAll(ctx)
			addTook = time.Since(t0)
			return err
		}
		first, second := cairnSide, refSide
		if run%2 == 1 {
			first, second = second, first
		}
		if err := first(); err != nil {
			return err
		}
		if err := second(); err != nil {
			return err
		}
		want, err := ref.treeOf(ctx, "HEAD")
		if err != nil {
			return err
		}
		if got.Tree != want && !notes["tree"] {
			notes["tree"] = true
			res.Notes = append(res.Notes, fmt.Sprintf("cairn's first seal sealed tree %s, git add -A %s", got.Tree, want))
		}
		if run > 0 {
			cairnMS = append(cairnMS, time.Duration(got.MS*float64(time.Millisecond)))
			addMS = append(addMS, addTook)
			res.FirstSealPeakRSS = max(res.FirstSealPeakRSS, peak)
			res.FirstSealOwnPeakRSS = max(res.FirstSealOwnPeakRSS, got.PeakRSS)
		}
		if run == cfg.Runs {
			res.FirstSealBytes = got.ObjectsBytes
			res.AddAllBytes = dirBytes(filepath.Join(runDir, "ref", "objects"))
			if _, err := ref.out(ctx, nil, "gc", "-q"); err != nil {
				return err
			}
			res.GCBytes = dirBytes(filepath.Join(runDir, "ref", "objects"))
		}
		os.RemoveAll(runDir)
		if run < cfg.Runs {
			quiesce()
		}
	}
	for _, op := range opOrder {
		switch op.name {
		case OpFirstSeal:
			res.Ops = append(res.Ops, summarize(op.name, op.what, cairnMS))
		case OpAddAll:
			res.Ops = append(res.Ops, summarize(op.name, op.what, addMS))
		}
	}
	return nil
}

// sealOnceIn runs a first seal: in a child process when cfg.SealChild is
// set (its peak RSS returned, in bytes), else in this one (peak 0).
func sealOnceIn(ctx context.Context, cfg Config, treeDir, stateDir string) (SealOnceResult, int64, error) {
	var r SealOnceResult
	if len(cfg.SealChild) == 0 {
		var out bytes.Buffer
		if err := SealOnce(ctx, treeDir, stateDir, &out); err != nil {
			return r, 0, err
		}
		err := json.Unmarshal(out.Bytes(), &r)
		return r, 0, err
	}
	args := append(cfg.SealChild[1:len(cfg.SealChild):len(cfg.SealChild)], "--tree", treeDir, "--state", stateDir)
	cmd := exec.CommandContext(ctx, cfg.SealChild[0], args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return r, 0, fmt.Errorf("first seal in a child: %w: %s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return r, 0, fmt.Errorf("first seal in a child: %w", err)
	}
	return r, peakRSS(cmd.ProcessState), nil
}
