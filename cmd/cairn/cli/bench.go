package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/cairn-dev/cairn/snapshot/sealbench"
)

func init() {
	register("bench", "measure sealing against git's reference pipelines (bench seal)", runBench)
}

func runBench(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || args[0] != "seal" {
		return usageErr("usage: cairn bench seal [--sizes 1k,10k,100k] [--runs 5] [--skip-slow] [--dir D] [--json]")
	}
	fs := newFlags("bench seal", "bench seal [--sizes 1k,10k,100k] [--runs N] [--skip-slow] [--dir D] [--keep] [--json]", e)
	sizes := fs.String("sizes", "1k,10k,100k", "tree sizes in files, comma-separated (k = thousand)")
	runs := fs.Int("runs", 5, "counted runs per operation, after one warm-up")
	skipSlow := fs.Bool("skip-slow", false, "skip the seed's pipelines at 50k files and more (minutes per run)")
	dir := fs.String("dir", "", "scratch folder (default: a temporary folder)")
	keep := fs.Bool("keep", false, "keep the generated trees")
	asJSON := fs.Bool("json", false, "print the results as JSON")
	quiet := fs.Bool("quiet", false, "no progress lines on stderr")
	if _, err := parse(fs, args[1:]); err != nil {
		return err
	}
	cfg := sealbench.Config{Runs: *runs, SkipSlow: *skipSlow, Dir: *dir, KeepTrees: *keep, JSON: *asJSON}
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
