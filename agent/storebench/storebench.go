// Package storebench is `cairn bench store` (README, "Budgets and disk
// space"): an in-process store on a generated tree takes N autosaves of a few
// small edits each; every Sample checkpoints it records the store's bytes,
// loose objects, refs, the seal latency (p50 of the last 100) and the time of
// a `cairn list` (open + Records); then maintenance, the `git gc` reference
// (a copy of the store, `git gc --prune=now`), and a budget run (workspace.Prune
// with 90 % of the maintained size as max_store_size). It lives under agent/
// because the budget run is agent's Prune.
package storebench

import (
	"context"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/agent/workspace"
	"github.com/cairn-dev/cairn/restore/ckpt"
	"github.com/cairn-dev/cairn/snapshot"
)

// Config sizes the run.
type Config struct {
	Files, Checkpoints, Sample int
	Dir                        string // scratch; default a temporary folder
	Progress                   io.Writer
}

// Sample is one row of the growth table.
type Sample struct {
	Checkpoints  int
	Bytes        int64
	LooseObjects int64
	Refs         int
	SealP50      time.Duration
	List         time.Duration
}

// Result is the whole run.
type Result struct {
	Samples              []Sample
	Maintain             time.Duration
	AfterMaintain, GitGC int64
	LooseAfter           int64
	RefsAfter            int
	ListAfter            time.Duration
	Budget, AfterBudget  int64
	// FloorBytes and NowBytes are the budget pass's estimates of the store
	// with every droppable checkpoint dropped, and with none.
	FloorBytes, NowBytes int64
	BudgetDropped        int
	BudgetTime           time.Duration
	ProtectedOver        string
}

// Run runs the benchmark and writes its table to out.
func Run(ctx context.Context, cfg Config, out io.Writer) (Result, error) {
	var res Result
	if cfg.Files <= 0 {
		cfg.Files = 10000
	}
	if cfg.Checkpoints <= 0 {
		cfg.Checkpoints = 10000
	}
	if cfg.Sample <= 0 {
		cfg.Sample = 1000
	}
	dir := cfg.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "cairn-storebench-")
		if err != nil {
			return res, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	tree, state := filepath.Join(dir, "tree"), filepath.Join(dir, "state")
	rng := rand.New(rand.NewSource(1))
	paths := make([]string, cfg.Files)
	for i := range paths {
		paths[i] = fmt.Sprintf("d%02d/s%03d/f%05d.txt", i%50, (i/50)%40, i)
		p := filepath.Join(tree, paths[i])
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return res, err
		}
		body := make([]byte, 5000) // 10k files ≈ 50 MB
		for j := range body {
			body[j] = "abcdefghij klmnopqrstuvwxyz\n"[rng.Intn(28)]
		}
		if err := os.WriteFile(p, body, 0o644); err != nil {
			return res, err
		}
	}
	opts := snapshot.Options{Layout: snapshot.LayoutPlain, StateDir: state}
	st, err := snapshot.Open(ctx, tree, opts)
	if err != nil {
		return res, err
	}
	defer func() { _ = st.Close() }()
	if _, err := st.Seal(ctx, snapshot.SealRequest{Kind: ckpt.KindBaseline}); err != nil {
		return res, err
	}
	var lat []time.Duration
	for i := 1; i <= cfg.Checkpoints; i++ {
		n := 1 + rng.Intn(5)
		changed := make([]string, 0, n)
		for range n {
			p := paths[rng.Intn(len(paths))]
			f, err := os.OpenFile(filepath.Join(tree, p), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				return res, err
			}
			fmt.Fprintf(f, "edit %d\n", i)
			f.Close()
			changed = append(changed, p)
		}
		t0 := time.Now()
		rec, err := st.Seal(ctx, snapshot.SealRequest{Kind: ckpt.KindAutosave, Changed: changed})
		if err != nil || rec.State == ckpt.StateFailed {
			return res, fmt.Errorf("seal %d: %v %s", i, err, rec.Error)
		}
		lat = append(lat, time.Since(t0))
		if i%cfg.Sample == 0 || i == cfg.Checkpoints {
			s, err := sample(ctx, st, tree, opts, i, lat)
			if err != nil {
				return res, err
			}
			res.Samples = append(res.Samples, s)
			if cfg.Progress != nil {
				fmt.Fprintf(cfg.Progress, "storebench: %d checkpoints, %s\n", i, ckpt.HumanBytes(s.Bytes))
			}
		}
	}
	t0 := time.Now()
	if _, err := st.Maintain(ctx, snapshot.MaintainOptions{Full: true, PruneGrace: snapshot.PruneNow}); err != nil {
		return res, fmt.Errorf("maintain: %w", err)
	}
	res.Maintain = time.Since(t0)
	after, err := sample(ctx, st, tree, opts, cfg.Checkpoints, lat)
	if err != nil {
		return res, err
	}
	res.AfterMaintain, res.LooseAfter, res.RefsAfter, res.ListAfter = after.Bytes, after.LooseObjects, after.Refs, after.List
	if res.GitGC, err = gitGC(ctx, st.GitDir(), filepath.Join(dir, "gc-copy.git")); err != nil {
		return res, err
	}
	// Budget: halfway between what the protected checkpoints alone need (a
	// dry run that may drop everything droppable) and the maintained store,
	// so the budget can be met and must be enforced.
	// Both ends are the budget pass's own estimates, so the budget is one it
	// can see it must meet.
	floor, err := workspace.Prune(ctx, st, workspace.PruneOptions{BudgetOnly: true, MaxStoreSize: 1, DryRun: true}, time.Now(), false)
	if err != nil {
		return res, fmt.Errorf("budget estimate: %w", err)
	}
	now, err := workspace.Prune(ctx, st, workspace.PruneOptions{BudgetOnly: true, DryRun: true}, time.Now(), false)
	if err != nil {
		return res, fmt.Errorf("budget estimate: %w", err)
	}
	res.Budget = floor.Projected + (now.Projected-floor.Projected)/2
	res.FloorBytes, res.NowBytes = floor.Projected, now.Projected
	t0 = time.Now()
	pr, err := workspace.Prune(ctx, st, workspace.PruneOptions{BudgetOnly: true, MaxStoreSize: res.Budget, PruneGrace: snapshot.PruneNow}, time.Now(), true)
	if err != nil {
		return res, fmt.Errorf("budget prune: %w", err)
	}
	res.BudgetTime = time.Since(t0)
	res.AfterBudget, res.ProtectedOver = pr.BytesAfter, pr.ProtectedOver
	for _, d := range pr.Drops {
		if d.Skipped == "" {
			res.BudgetDropped += len(d.IDs)
		}
	}
	report(out, res)
	return res, nil
}

func sample(ctx context.Context, st *snapshot.Store, tree string, opts snapshot.Options, n int, lat []time.Duration) (Sample, error) {
	s := Sample{Checkpoints: n}
	stats, err := st.Stats(ctx)
	if err != nil {
		return s, err
	}
	s.Bytes, s.LooseObjects = stats.Bytes, stats.LooseObjects
	last := append([]time.Duration(nil), lat[max(len(lat)-100, 0):]...)
	sort.Slice(last, func(i, j int) bool { return last[i] < last[j] })
	if len(last) > 0 {
		s.SealP50 = last[len(last)/2]
	}
	out, err := exec.CommandContext(ctx, "git", "--git-dir="+st.GitDir(), "for-each-ref", "--format=x").Output()
	if err != nil {
		return s, err
	}
	s.Refs = strings.Count(string(out), "\n")
	// `cairn list`: open + Records, the median of five (one sample on a
	// shared machine says little).
	var lists []time.Duration
	for range 5 {
		t0 := time.Now()
		st2, err := snapshot.Open(ctx, tree, opts)
		if err != nil {
			return s, err
		}
		_ = st2.Records()
		lists = append(lists, time.Since(t0))
		_ = st2.Close()
	}
	sort.Slice(lists, func(i, j int) bool { return lists[i] < lists[j] })
	s.List = lists[len(lists)/2]
	return s, nil
}

// gitGC is the reference: the store's refs and objects, copied, packed by
// `git gc --prune=now` alone.
func gitGC(ctx context.Context, gitDir, copyDir string) (int64, error) {
	if out, err := exec.CommandContext(ctx, "cp", "-a", gitDir, copyDir).CombinedOutput(); err != nil {
		return 0, fmt.Errorf("copy store: %v: %s", err, out)
	}
	defer os.RemoveAll(copyDir)
	if out, err := exec.CommandContext(ctx, "git", "--git-dir="+copyDir, "gc", "-q", "--prune=now").CombinedOutput(); err != nil {
		return 0, fmt.Errorf("git gc: %v: %s", err, out)
	}
	var n int64
	err := filepath.WalkDir(filepath.Join(copyDir, "objects"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n, err
}

func report(out io.Writer, r Result) {
	fmt.Fprintf(out, "%12s %12s %8s %8s %10s %10s\n", "checkpoints", "store", "loose", "refs", "seal p50", "list")
	for _, s := range r.Samples {
		fmt.Fprintf(out, "%12d %12s %8d %8d %10s %10s\n", s.Checkpoints, ckpt.HumanBytes(s.Bytes), s.LooseObjects, s.Refs,
			s.SealP50.Round(10*time.Microsecond), s.List.Round(10*time.Microsecond))
	}
	fmt.Fprintf(out, "maintenance %s: store %s, loose %d, refs %d, list %s\n", r.Maintain.Round(time.Millisecond),
		ckpt.HumanBytes(r.AfterMaintain), r.LooseAfter, r.RefsAfter, r.ListAfter.Round(10*time.Microsecond))
	ratio := float64(r.AfterMaintain) / float64(max(r.GitGC, 1))
	fmt.Fprintf(out, "git gc reference (objects only): %s; store/reference %.2f (target ≤ 1.30: %s)\n", ckpt.HumanBytes(r.GitGC), ratio, met(ratio <= 1.3))
	if len(r.Samples) > 0 {
		first, last := r.Samples[0], r.Samples[len(r.Samples)-1]
		lr := float64(last.SealP50) / float64(max(first.SealP50, 1))
		fmt.Fprintf(out, "seal p50 end/start %.2f (target ≤ 1.20: %s); list %s (target < 100ms: %s)\n", lr, met(lr <= 1.2),
			r.ListAfter.Round(10*time.Microsecond), met(r.ListAfter < 100*time.Millisecond))
	}
	fmt.Fprintf(out, "budget estimates: %s with every droppable checkpoint dropped, %s with none\n",
		ckpt.HumanBytes(r.FloorBytes), ckpt.HumanBytes(r.NowBytes))
	br := float64(r.AfterBudget) / float64(max(r.Budget, 1))
	fmt.Fprintf(out, "budget %s: dropped %d checkpoints in %s, store %s after maintenance (%.2f× budget, target ≤ 1.10: %s)\n",
		ckpt.HumanBytes(r.Budget), r.BudgetDropped, r.BudgetTime.Round(time.Millisecond), ckpt.HumanBytes(r.AfterBudget), br, met(br <= 1.1))
	if r.ProtectedOver != "" {
		fmt.Fprintf(out, "budget: %s\n", r.ProtectedOver)
	}
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}
