// Package daemonbench measures the cairn daemon as it runs for real: a
// separate `cairn daemon` process (so its memory and CPU are its own) on
// generated execution directories, driven by the simulated Hankweave runtime
// of package hwsim. It measures three things, each with a reference timed in
// the same run:
//
//  1. latency: a codon's state.json rename to its run branch moving, with
//     files changed just before the marker; the reference is the engine
//     sealing the same change in-process, with no daemon around it;
//  2. watch: the time from the daemon's start until a large tree is watched,
//     against walking that tree and adding one fsnotify watch per folder in
//     this process; plus the daemon's memory and its CPU while idle;
//  3. storm: a burst of file writes into a plain workspace with autosave on:
//     autosaves sealed during the burst against the bound the maximum wait
//     sets, and the last checkpoint's tree against the files on disk.
package daemonbench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/cairn-dev/cairn/snapshot"
	"github.com/cairn-dev/cairn/snapshot/sealbench"
)

// Parts of the benchmark, as Config.Parts names them.
const (
	PartLatency = "latency"
	PartWatch   = "watch"
	PartStorm   = "storm"
)

// Config says what to measure. Zero fields take the defaults noted.
type Config struct {
	// Bin is the cairn binary run as the daemon (required).
	Bin string
	// Parts to run; default all three, in the order latency, watch, storm.
	Parts []string
	// Runs is how many counted runs each part gets; default 3.
	Runs int

	// Files is the size of the latency and storm trees; default 10,000.
	Files int
	// Samples is the markers timed per latency run, after 2 warm-up
	// markers that are not counted; default 50.
	Samples int
	// Changed is the files changed before each marker; default 20.
	Changed int
	// Engine is the daemon's engine = value for incremental seals
	// ("inproc" or "git"); empty leaves the daemon's default. The engine
	// reference of the latency part seals with the same engine.
	Engine string
	// DuringGC adds, after the latency part, the daemon's seal latency
	// while its own maintenance runs (GCResult).
	DuringGC bool

	// WatchFiles is the size of the watch tree (20 files a folder); default 100,000.
	WatchFiles int
	// Idle is how long the daemon's idle CPU is measured; default 10 s.
	Idle time.Duration

	// StormWrites file writes are spread evenly over StormFor; default
	// 50,000 over 10 s.
	StormWrites int
	StormFor    time.Duration
	// StormQuiet and StormMaxWait are the storm workspace's autosave
	// timing; default 2 s (the product default) and 3 s (scaled down from
	// the product's 60 s so that one storm spans several maximum waits).
	StormQuiet   time.Duration
	StormMaxWait time.Duration

	// Dir is the scratch folder; default a new temporary folder.
	Dir string
	// Keep keeps the scratch folder (trees, stores, daemon logs).
	Keep bool
	// JSON prints one Report as JSON instead of tables.
	JSON bool
	// Progress, when set, gets a line as each step starts.
	Progress io.Writer
}

func (c *Config) setDefaults() {
	if len(c.Parts) == 0 {
		c.Parts = []string{PartLatency, PartWatch, PartStorm}
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defD := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.Runs, 3)
	def(&c.Files, 10_000)
	def(&c.Samples, 50)
	def(&c.Changed, 20)
	def(&c.WatchFiles, 100_000)
	def(&c.StormWrites, 50_000)
	defD(&c.Idle, 10*time.Second)
	defD(&c.StormFor, 10*time.Second)
	defD(&c.StormQuiet, 2*time.Second)
	defD(&c.StormMaxWait, 3*time.Second)
}

func (c *Config) validate() error {
	if c.Bin == "" {
		return errors.New("daemonbench: no cairn binary to run as the daemon")
	}
	if fi, err := os.Stat(c.Bin); err != nil || fi.IsDir() {
		return fmt.Errorf("daemonbench: cairn binary %s: not a file", c.Bin)
	}
	for _, p := range c.Parts {
		if p != PartLatency && p != PartWatch && p != PartStorm {
			return fmt.Errorf("daemonbench: unknown part %q (want %s, %s or %s)", p, PartLatency, PartWatch, PartStorm)
		}
	}
	if c.Files < 2*c.Changed || c.Files < 20 {
		return fmt.Errorf("daemonbench: %d files is too few (at least 20, and twice the changed files)", c.Files)
	}
	if c.StormQuiet > c.StormMaxWait {
		return fmt.Errorf("daemonbench: storm quiet %s is longer than its maximum wait %s", c.StormQuiet, c.StormMaxWait)
	}
	return nil
}

// Report is the machine-readable result. Times are in milliseconds.
type Report struct {
	Git        string         `json:"git"`
	GOOS       string         `json:"goos"`
	GOARCH     string         `json:"goarch"`
	CPUs       int            `json:"cpus"`
	Bin        string         `json:"bin"`
	Runs       int            `json:"runs"`
	LoadBefore string         `json:"loadBefore,omitempty"`
	LoadAfter  string         `json:"loadAfter,omitempty"`
	Latency    *LatencyResult `json:"latency,omitempty"`
	GC         *GCResult      `json:"duringGc,omitempty"`
	Watch      *WatchResult   `json:"watch,omitempty"`
	Storm      *StormResult   `json:"storm,omitempty"`
}

// Run measures the parts cfg names and writes a table per part to w as each
// part finishes (or, with cfg.JSON, one Report at the end).
func Run(ctx context.Context, cfg Config, w io.Writer) error {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return err
	}
	_, ver, err := snapshot.FindGit(ctx)
	if err != nil {
		return err
	}
	if cfg.Dir != "" {
		if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
			return err
		}
	}
	scratch, err := os.MkdirTemp(cfg.Dir, "daemonbench-")
	if err != nil {
		return err
	}
	// Unix socket paths are short (108 bytes): sockets get a folder of their own.
	sockDir, err := os.MkdirTemp("", "cdb-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(sockDir)
	b := &bench{cfg: cfg, scratch: scratch, sockDir: sockDir}
	if cfg.Keep {
		b.logf("scratch folder kept: %s", scratch)
	} else {
		defer os.RemoveAll(scratch)
	}

	rep := Report{Git: ver.String(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, CPUs: runtime.NumCPU(),
		Bin: cfg.Bin, Runs: cfg.Runs, LoadBefore: sealbench.LoadAvg()}
	if !cfg.JSON {
		fmt.Fprintf(w, "cairn daemon benchmark: git %s, %s/%s, %d CPUs, %d counted runs per part\n   daemon binary %s\n",
			rep.Git, rep.GOOS, rep.GOARCH, rep.CPUs, cfg.Runs, cfg.Bin)
	}
	var verdict error // what the report shows but the benchmark must not pass
	for _, part := range []string{PartLatency, PartWatch, PartStorm} {
		if !slices.Contains(cfg.Parts, part) {
			continue
		}
		var err error
		switch part {
		case PartLatency:
			rep.Latency, err = b.latency(ctx)
			if err == nil && !cfg.JSON {
				err = writeLatency(w, rep.Latency)
			}
			if err == nil {
				verdict = rep.Latency.check()
			}
			if err == nil && cfg.DuringGC {
				rep.GC, err = b.duringGC(ctx)
				if err == nil && !cfg.JSON {
					err = writeGC(w, rep.GC)
				}
			}
		case PartWatch:
			rep.Watch, err = b.watch(ctx)
			if err == nil && !cfg.JSON {
				err = writeWatch(w, rep.Watch)
			}
		case PartStorm:
			rep.Storm, err = b.storm(ctx)
			if err == nil && !cfg.JSON {
				err = writeStorm(w, rep.Storm)
			}
		}
		if err != nil {
			return fmt.Errorf("daemonbench: %s: %w", part, err)
		}
	}
	rep.LoadAfter = sealbench.LoadAvg()
	if cfg.JSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		err = enc.Encode(rep)
	} else if rep.LoadBefore != "" {
		_, err = fmt.Fprintf(w, "\nload average %s before, %s after (other work on the machine adds noise)\n", rep.LoadBefore, rep.LoadAfter)
	}
	if verdict != nil {
		return fmt.Errorf("daemonbench: %w", errors.Join(verdict, err))
	}
	return err
}

// bench is one Run's shared state.
type bench struct {
	cfg     Config
	scratch string
	sockDir string
}

func (b *bench) logf(format string, args ...any) {
	if b.cfg.Progress != nil {
		fmt.Fprintf(b.cfg.Progress, "daemonbench: "+format+"\n", args...)
	}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// median of xs (0 for none).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// percentile is the nearest-rank percentile p (0 < p <= 100) of xs: with 50
// samples, p99 is the largest.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	k := int(float64(len(s))*p/100+0.999999) - 1
	return s[min(max(k, 0), len(s)-1)]
}

// writeConfig writes a daemon config file into the scratch folder.
func (b *bench) writeConfig(name, body string) (string, error) {
	p := filepath.Join(b.scratch, name)
	return p, os.WriteFile(p, []byte(body), 0o644)
}
