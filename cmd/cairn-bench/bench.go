package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/agent/daemonbench"
	"github.com/cairn-dev/cairn/agent/storebench"
	"github.com/cairn-dev/cairn/snapshot/sealbench"
)

// runBenchSeal measures sealing against git's reference pipelines.
func runBenchSeal(ctx context.Context, e *env, args []string) error {
	fs := newFlags("seal", "seal [--sizes 1k,10k,100k] [--runs N] [--skip-slow] [--incremental-only | --reconcile-only | --first-only] [--dir D] [--keep] [--json]", e)
	sizes := fs.String("sizes", "1k,10k,100k", "tree sizes in files, comma-separated (k = thousand)")
	runs := fs.Int("runs", 5, "counted runs per operation, after one warm-up")
	skipSlow := fs.Bool("skip-slow", false, "skip the seed's pipelines at 50k files and more (minutes per run)")
	incrOnly := fs.Bool("incremental-only", false, "time only the incremental seals and the floor (no pipelines, reconciles or first seals)")
	reconOnly := fs.Bool("reconcile-only", false, "time only the incremental seals and the reconciles beside git status (no pipelines or first seals)")
	firstOnly := fs.Bool("first-only", false, "time only the first seals against git add -A + commit, each of cairn's in a child process whose peak RSS is reported")
	dir := fs.String("dir", "", "scratch folder (default: a temporary folder)")
	keep := fs.Bool("keep", false, "keep the generated trees")
	asJSON := fs.Bool("json", false, "print the results as JSON")
	quiet := fs.Bool("quiet", false, "no progress lines on stderr")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	if n := btoi(*incrOnly) + btoi(*reconOnly) + btoi(*firstOnly); n > 1 {
		return usageErr("--incremental-only, --reconcile-only and --first-only exclude each other")
	}
	cfg := sealbench.Config{Runs: *runs, SkipSlow: *skipSlow, IncrementalOnly: *incrOnly, ReconcileOnly: *reconOnly, FirstOnly: *firstOnly, Dir: *dir, KeepTrees: *keep, JSON: *asJSON}
	if *firstOnly {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		cfg.SealChild = []string{exe, sealOnceCmd}
	}
	for _, s := range strings.Split(*sizes, ",") {
		n, err := parseCount(strings.TrimSpace(s))
		if err != nil {
			return usageErr("--sizes: %v", err)
		}
		cfg.Sizes = append(cfg.Sizes, n)
	}
	if !*quiet {
		cfg.Progress = e.stderr
	}
	return sealbench.Run(ctx, cfg, e.stdout)
}

// sealOnceCmd is the hidden subcommand a first-only seal benchmark runs
// in a child process: one first seal (sealbench.SealOnce).
const sealOnceCmd = "seal-once"

func runSealOnce(ctx context.Context, e *env, args []string) error {
	fs := newFlags(sealOnceCmd, sealOnceCmd+" --tree T --state S", e)
	tree := fs.String("tree", "", "work tree")
	state := fs.String("state", "", "new store's state folder")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	if *tree == "" || *state == "" {
		return usageErr("%s needs --tree and --state", sealOnceCmd)
	}
	return sealbench.SealOnce(ctx, *tree, *state, e.stdout)
}

// runBenchRestore measures a whole restore against git checkout --force.
func runBenchRestore(ctx context.Context, e *env, args []string) error {
	fs := newFlags("restore", "restore [--files 100000] [--changed 1000] [--runs N] [--dir D] [--keep] [--json]", e)
	files := fs.String("files", "100k", "tracked files in the generated tree (k = thousand)")
	changed := fs.String("changed", "1k", "files that differ between the checkpoints: a tenth added, a tenth deleted, the rest edited")
	runs := fs.Int("runs", 5, "counted runs of each side, after one warm-up")
	dir := fs.String("dir", "", "scratch folder (default: a temporary folder)")
	keep := fs.Bool("keep", false, "keep the generated trees and stores")
	asJSON := fs.Bool("json", false, "print the results as JSON")
	quiet := fs.Bool("quiet", false, "no progress lines on stderr")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErr("restore takes no arguments")
	}
	cfg := sealbench.RestoreConfig{Runs: *runs, Dir: *dir, KeepTrees: *keep, JSON: *asJSON}
	if cfg.Files, err = parseCount(*files); err != nil {
		return usageErr("--files: %v", err)
	}
	if cfg.Changed, err = parseCount(*changed); err != nil {
		return usageErr("--changed: %v", err)
	}
	if !*quiet {
		cfg.Progress = e.stderr
	}
	return sealbench.RunRestore(ctx, cfg, e.stdout)
}

// runBenchDaemon measures the real daemon binary: latency, watch readiness, footprint, a storm.
func runBenchDaemon(ctx context.Context, e *env, args []string) error {
	fs := newFlags("daemon", "daemon [--files 10000] [--watch-files 100000] [--runs N] [--parts latency,watch,storm] [--during-gc] [--bin B] [--dir D] [--keep] [--json]", e)
	files := fs.String("files", "10k", "files in the latency and storm trees (k = thousand)")
	watchFiles := fs.String("watch-files", "100k", "files in the watch tree, 20 a folder")
	runs := fs.Int("runs", 3, "counted runs of each part")
	samples := fs.Int("samples", 50, "markers timed per latency run")
	engine := fs.String("engine", "", "the daemon's engine for incremental seals: inproc or git (default: the daemon's default)")
	changed := fs.Int("changed", 20, "files edited before each marker")
	parts := fs.String("parts", "latency,watch,storm", "parts to run, comma-separated")
	duringGC := fs.Bool("during-gc", false, "after latency: checkpoint requests timed idle and while the daemon's own maintenance runs (seals run between its steps)")
	idle := fs.Duration("idle", 10*time.Second, "how long idle CPU is measured")
	stormWrites := fs.String("storm-writes", "50k", "file writes in one storm")
	stormFor := fs.Duration("storm-for", 10*time.Second, "how long one storm lasts")
	stormQuiet := fs.Duration("storm-quiet", 2*time.Second, "the storm workspace's autosave quiet period")
	stormMaxWait := fs.Duration("storm-max-wait", 3*time.Second, "the storm workspace's autosave maximum wait")
	bin := fs.String("bin", "", binUsage)
	dir := fs.String("dir", "", "scratch folder (default: a temporary folder)")
	keep := fs.Bool("keep", false, "keep the scratch folder: trees, stores, daemon logs")
	asJSON := fs.Bool("json", false, "print the results as JSON")
	quiet := fs.Bool("quiet", false, "no progress lines on stderr")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErr("daemon takes no arguments")
	}
	cfg := daemonbench.Config{Bin: *bin, Runs: *runs, Samples: *samples, Changed: *changed, DuringGC: *duringGC, Idle: *idle,
		StormFor: *stormFor, StormQuiet: *stormQuiet, StormMaxWait: *stormMaxWait, Dir: *dir, Keep: *keep, JSON: *asJSON, Engine: *engine}
	for _, c := range []struct {
		flag string
		in   string
		out  *int
	}{{"--files", *files, &cfg.Files}, {"--watch-files", *watchFiles, &cfg.WatchFiles}, {"--storm-writes", *stormWrites, &cfg.StormWrites}} {
		if *c.out, err = parseCount(c.in); err != nil {
			return usageErr("%s: %v", c.flag, err)
		}
	}
	for _, p := range strings.Split(*parts, ",") {
		if p = strings.TrimSpace(p); p != "" {
			cfg.Parts = append(cfg.Parts, p)
		}
	}
	var cleanup func()
	if cfg.Bin, cleanup, err = cairnBinary(ctx, e, cfg.Bin); err != nil {
		return err
	}
	defer cleanup()
	if !*quiet {
		cfg.Progress = e.stderr
	}
	return daemonbench.Run(ctx, cfg, e.stdout)
}

// parseCount reads 1000, 1k or 100k.
func parseCount(s string) (int, error) {
	mult := 1
	if strings.HasSuffix(strings.ToLower(s), "k") {
		mult, s = 1000, s[:len(s)-1]
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return n * mult, nil
}

// runBenchStore measures store growth over many autosaves.
func runBenchStore(ctx context.Context, e *env, args []string) error {
	fs := newFlags("store", "store [--files 10000] [--checkpoints 10000] [--sample 1000] [--dir D]", e)
	files := fs.Int("files", 10000, "files in the generated tree (5 KB each)")
	n := fs.Int("checkpoints", 10000, "autosaves of 1-5 small edits each")
	every := fs.Int("sample", 1000, "a row of the growth table every this many checkpoints")
	dir := fs.String("dir", "", "scratch folder (default: a temporary folder)")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	_, err := storebench.Run(ctx, storebench.Config{Files: *files, Checkpoints: *n, Sample: *every, Dir: *dir, Progress: e.stderr}, e.stdout)
	return err
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
