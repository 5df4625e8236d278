package main

import (
	"context"
	"strings"

	"github.com/cairn-dev/cairn/agent/replbench"
)

// runBenchReplicate measures fleet replication against a loopback git daemon.
func runBenchReplicate(ctx context.Context, e *env, args []string) error {
	fs := newFlags("replicate", "replicate [--files 10000] [--samples 30] [--backlog 1000] [--runs N] [--parts lag,backlog] [--bin B] [--dir D] [--keep] [--json]", e)
	files := fs.String("files", "10k", "files in the workspace (k = thousand)")
	samples := fs.Int("samples", 30, "lifecycle checkpoints timed from sealed to on the remote")
	backlog := fs.String("backlog", "1k", "checkpoints in the backlog pushed after an outage")
	runs := fs.Int("runs", 3, "timed runs of the backlog push, each side")
	parts := fs.String("parts", "lag,backlog", "parts to run, comma-separated")
	bin := fs.String("bin", "", binUsage)
	dir := fs.String("dir", "", "scratch folder (default: a temporary folder)")
	keep := fs.Bool("keep", false, "keep the scratch folder")
	asJSON := fs.Bool("json", false, "print the results as JSON")
	quiet := fs.Bool("quiet", false, "no progress lines on stderr")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErr("replicate takes no arguments")
	}
	cfg := replbench.Config{Bin: *bin, Samples: *samples, Runs: *runs, Dir: *dir, Keep: *keep, JSON: *asJSON}
	if cfg.Files, err = parseCount(*files); err != nil {
		return usageErr("--files: %v", err)
	}
	if cfg.Backlog, err = parseCount(*backlog); err != nil {
		return usageErr("--backlog: %v", err)
	}
	for _, p := range strings.Split(*parts, ",") {
		switch p = strings.TrimSpace(p); p {
		case "lag", "backlog":
			cfg.Parts = append(cfg.Parts, p)
		default:
			return usageErr("--parts: unknown part %q (want lag, backlog)", p)
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
	return replbench.Run(ctx, cfg, e.stdout)
}
