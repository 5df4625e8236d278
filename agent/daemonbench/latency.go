package daemonbench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/hankweave/hwsim"
	"github.com/cairn-dev/cairn/snapshot"
	"github.com/cairn-dev/cairn/snapshot/sealbench"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// latencyWarmup markers come first and are not counted: the first creates
// the run branch, the first seals warm the caches.
const latencyWarmup = 2

// LatencyResult is part 1: a lifecycle marker to its sealed checkpoint.
type LatencyResult struct {
	Files         int          `json:"files"`
	Engine        string       `json:"engine"` // the engine of incremental seals, daemon and reference alike
	Changed       int          `json:"changedPerMarker"`
	SamplesPerRun int          `json:"samplesPerRun"`
	Warmup        int          `json:"warmupSamples"`
	Runs          []LatencyRun `json:"runs"`
	// Medians over the runs of each run's p50 and p99.
	P50MS float64 `json:"p50Ms"`
	P99MS float64 `json:"p99Ms"`
	// Over every counted sample of every run.
	AllP99MS float64 `json:"allP99Ms"`
	AllMaxMS float64 `json:"allMaxMs"`
	// EngineP50MS is the reference: the engine sealing the same change
	// in-process, no daemon (median over the runs of each run's median).
	EngineP50MS float64 `json:"engineP50Ms"`
	Ratio       float64 `json:"ratioToEngine"` // P50MS / EngineP50MS
	// DaemonSealP50MS is the daemon's own seal time from its ledger
	// (durationMs, whole milliseconds): latency minus it is the event path.
	DaemonSealP50MS float64 `json:"daemonSealP50Ms"`
	// SaveP50MS is the median of the simulator's saves before the timed
	// rename (LatencyRun.SaveMS), over every counted sample.
	SaveP50MS float64 `json:"simSaveP50Ms"`
	Racy      int     `json:"racy"` // counted checkpoints recorded racy
	// RacyIssues names them: "<codon>: <path> (<reason>)". The benchmark
	// changes nothing after a marker, so each one is a false alarm.
	RacyIssues []string `json:"racyIssues,omitempty"`
	Failed     int      `json:"failed"`  // … recorded failed
	Missing    int      `json:"missing"` // counted markers with no checkpoint in the ledger
	// OtherEngine counts checkpoints (the daemon's and the reference's)
	// whose record names another engine than Engine: a fallback to git.
	OtherEngine int     `json:"otherEngine"`
	TargetP50MS float64 `json:"targetP50Ms"`
	TargetP99MS float64 `json:"targetP99Ms"`
	RSSMiB      float64 `json:"rssMiB"` // after the samples
	HWMMiB      float64 `json:"hwmMiB"` // peak RSS
	// Idle is the daemon doing nothing with the runtime's lock held.
	Idle IdleResult `json:"idle"`
}

// LatencyRun is one run's samples.
type LatencyRun struct {
	P50MS       float64   `json:"p50Ms"`
	P99MS       float64   `json:"p99Ms"`
	MaxMS       float64   `json:"maxMs"`
	EngineP50MS float64   `json:"engineP50Ms"`
	SamplesMS   []float64 `json:"samplesMs"`
	EngineMS    []float64 `json:"engineMs"`
	// SaveMS is, per sample, the simulator's own save before the rename
	// (reading the old state.json, writing .bak and .tmp): not counted.
	SaveMS []float64 `json:"saveMs"`
}

// latency plays a run of codons into a Hankweave execution directory the
// daemon watches. Before each codon completes, Changed files under
// agentRoot/ are edited; the time is from just before the simulator renames
// the `completed` state.json into place (after copying the old one to .bak
// and writing .tmp, which takes milliseconds at 150 codons and is reported
// apart) to refs/heads/run-<runId> holding a new value, read from the ref
// file every millisecond.
func (b *bench) latency(ctx context.Context) (*LatencyResult, error) {
	cfg := b.cfg
	engineName := cfg.Engine
	if engineName == "" {
		engineName = snapshot.DefaultEngine
	}
	res := &LatencyResult{Files: cfg.Files, Engine: engineName, Changed: cfg.Changed, SamplesPerRun: cfg.Samples,
		Warmup: latencyWarmup, TargetP50MS: 15, TargetP99MS: 200}
	base := filepath.Join(b.scratch, "latency")
	execDir := filepath.Join(base, "exec")
	engineDir := filepath.Join(base, "engine")

	// Two identical trees: one the daemon watches, one the engine seals alone.
	b.logf("latency: generating two trees of %d files", cfg.Files)
	tr, err := makeTree(ctx, filepath.Join(execDir, "agentRoot"), cfg.Files, 1)
	if err != nil {
		return nil, err
	}
	if _, err := makeTree(ctx, filepath.Join(engineDir, "agentRoot"), cfg.Files, 1); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(engineDir, ".hankweave"), 0o755); err != nil {
		return nil, err
	}

	total := latencyWarmup + cfg.Runs*cfg.Samples
	codon := func(i int) string { return fmt.Sprintf("c%03d", i) }
	parts := make([]hwsim.Part, total)
	for i := range parts {
		parts[i] = hwsim.Codon{ID: codon(i), Files: []string{"**"}}
	}
	// The marker lands when the simulator renames the new state.json into
	// place: the time is taken there, after it has built and written the
	// JSON (that part, which grows with the state, is reported apart).
	var renamed time.Time
	sim, err := hwsim.New(execDir, hwsim.Plan(parts...), hwsim.WithBeforeStateRename(func() { renamed = time.Now() }))
	if err != nil {
		return nil, err
	}
	runID, err := sim.StartRun()
	if err != nil {
		return nil, err
	}

	conf := "[defaults]\nautosave = false\n"
	if cfg.Engine != "" {
		conf += fmt.Sprintf("engine = %q\n", cfg.Engine)
	}
	cfgPath, err := b.writeConfig("latency.toml", conf)
	if err != nil {
		return nil, err
	}
	sealbench.Settle()
	d, err := b.startDaemon("latency", execDir, cfgPath)
	if err != nil {
		return nil, err
	}
	defer d.stop()
	b.logf("latency: daemon started (pid %d); waiting for its baseline checkpoint", d.pid())
	ws, _, err := d.waitFor(ctx, "the baseline checkpoint", 5*time.Minute, 20*time.Millisecond,
		func(w api.WorkspaceStatus) bool { return w.State == "watching" && w.Seals >= 1 })
	if err != nil {
		return nil, err
	}
	gitDir, branch := ws.Store, "refs/heads/run-"+runID

	engine, err := snapshot.Open(ctx, engineDir, snapshot.Options{Layout: snapshot.LayoutHankweave, Engine: cfg.Engine})
	if err != nil {
		return nil, err
	}
	defer engine.Close()
	if _, err := engine.Seal(ctx, snapshot.SealRequest{Kind: ckpt.KindBaseline, Label: "daemonbench"}); err != nil {
		return nil, err
	}

	res.Runs = make([]LatencyRun, cfg.Runs)
	heartbeat := time.Now()
	for i := range total {
		run := (i - latencyWarmup) / cfg.Samples
		if i%10 == 0 {
			if i < latencyWarmup {
				b.logf("latency: warm-up marker %d/%d", i+1, latencyWarmup)
			} else {
				b.logf("latency: run %d/%d, marker %d/%d", run+1, cfg.Runs, (i-latencyWarmup)%cfg.Samples+1, cfg.Samples)
			}
		}
		// A live runtime heartbeats; the daemon counts a lock 120 s old as stale.
		if time.Since(heartbeat) > 30*time.Second {
			if err := sim.Heartbeat(); err != nil {
				return nil, err
			}
			heartbeat = time.Now()
		}
		c := codon(i)
		if err := sim.StartCodon(c); err != nil {
			return nil, err
		}
		sealbench.Settle()
		// Let the daemon read the codon's start (four state.json rewrites).
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return nil, err
		}
		prev, err := readRef(gitDir, branch)
		if err != nil {
			return nil, err
		}
		paths := tr.pick(cfg.Changed)
		line := "// edited in codon " + c + "\n"
		if err := appendLine(filepath.Join(execDir, "agentRoot"), paths, line); err != nil {
			return nil, err
		}
		if err := sim.Advance(c, "completing-sentinels"); err != nil {
			return nil, err
		}
		saveStart := time.Now()
		if err := sim.Advance(c, "completed"); err != nil {
			return nil, err
		}
		t0 := renamed
		if t0.Before(saveStart) {
			return nil, fmt.Errorf("marker %s: the simulator renamed no state.json", c)
		}
		lat, err := waitRefMove(ctx, gitDir, branch, prev, t0, 30*time.Second)
		if err != nil {
			return nil, fmt.Errorf("marker %s: %w; log:\n%s", c, err, d.logTail())
		}

		// The reference: the engine alone seals the same change.
		if err := sleep(ctx, 100*time.Millisecond); err != nil { // the daemon finishes its ledger line
			return nil, err
		}
		sealbench.Settle()
		if err := appendLine(filepath.Join(engineDir, "agentRoot"), paths, line); err != nil {
			return nil, err
		}
		t1 := time.Now()
		rec, err := engine.Seal(ctx, snapshot.SealRequest{Kind: ckpt.KindCompleted, CodonID: c, CodonName: c,
			RunID: "engine", Changed: paths, Patterns: []string{"**"}})
		eng := time.Since(t1)
		if err != nil {
			return nil, fmt.Errorf("engine seal: %w", err)
		}
		if rec.State != ckpt.StateOK {
			return nil, fmt.Errorf("engine seal of %s: state %s", c, rec.State)
		}
		if rec.Engine != engineName {
			res.OtherEngine++
		}
		if i >= latencyWarmup {
			r := &res.Runs[run]
			r.SamplesMS = append(r.SamplesMS, ms(lat))
			r.EngineMS = append(r.EngineMS, ms(eng))
			r.SaveMS = append(r.SaveMS, ms(t0.Sub(saveStart)))
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return nil, err
		}
	}

	var all, p50s, p99s, eng, saves []float64
	for i := range res.Runs {
		r := &res.Runs[i]
		saves = append(saves, r.SaveMS...)
		r.P50MS, r.P99MS, r.MaxMS = percentile(r.SamplesMS, 50), percentile(r.SamplesMS, 99), percentile(r.SamplesMS, 100)
		r.EngineP50MS = median(r.EngineMS)
		all = append(all, r.SamplesMS...)
		p50s, p99s, eng = append(p50s, r.P50MS), append(p99s, r.P99MS), append(eng, r.EngineP50MS)
	}
	res.P50MS, res.P99MS, res.EngineP50MS = median(p50s), median(p99s), median(eng)
	res.AllP99MS, res.AllMaxMS = percentile(all, 99), percentile(all, 100)
	res.SaveP50MS = median(saves)
	if res.EngineP50MS > 0 {
		res.Ratio = res.P50MS / res.EngineP50MS
	}

	b.logf("latency: measuring %s of idle with the runtime's lock held", cfg.Idle)
	if err := sim.Heartbeat(); err != nil {
		return nil, err
	}
	if err := sleep(ctx, time.Second); err != nil {
		return nil, err
	}
	res.Idle, err = measureIdle(ctx, d.pid(), cfg.Idle, []string{
		"discovery rescan every 2 s (glob of the watch roots, stat of the config file)",
		"runtime.lock check every 10 s while the lock is live (reads lock, state.json, ledger)",
	})
	if err != nil {
		return nil, err
	}
	if m, err := readMemory(d.pid()); err == nil {
		res.RSSMiB, res.HWMMiB = mib(m.rss), mib(m.hwm)
	}
	if err := d.stop(); err != nil {
		return nil, err
	}

	// What the daemon recorded for each counted marker.
	st, err := snapshot.Open(ctx, execDir, snapshot.Options{Layout: snapshot.LayoutHankweave})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	byCodon := map[string]ckpt.Record{}
	for _, r := range st.Records() {
		if r.RunID == runID && r.Kind == ckpt.KindCompleted {
			byCodon[r.CodonID] = r
		}
	}
	var seals []float64
	for i := latencyWarmup; i < total; i++ {
		r, ok := byCodon[codon(i)]
		switch {
		case !ok:
			res.Missing++
		case r.State == ckpt.StateFailed:
			res.Failed++
		default:
			if r.Engine != engineName {
				res.OtherEngine++
			}
			if r.State == ckpt.StateRacy {
				res.Racy++
				for _, is := range r.Issues {
					res.RacyIssues = append(res.RacyIssues, fmt.Sprintf("%s: %s (%s)", r.CodonID, is.Path, is.Reason))
				}
			}
			seals = append(seals, float64(r.DurationMS))
		}
	}
	res.DaemonSealP50MS = median(seals)
	return res, nil
}

// check fails the benchmark on a checkpoint recorded racy: every file it
// edits is written before its marker and nothing after, so a racy one
// claims a change after the marker that did not happen.
func (r *LatencyResult) check() error {
	if r == nil || r.Racy == 0 {
		return nil
	}
	shown := r.RacyIssues
	if len(shown) > 10 {
		shown = append(shown[:10:10], fmt.Sprintf("… %d more", len(r.RacyIssues)-10))
	}
	return fmt.Errorf("latency: %d of %d checkpoints recorded racy, though nothing changed after their markers: %s",
		r.Racy, len(r.Runs)*r.SamplesPerRun, strings.Join(shown, "; "))
}

// waitRefMove polls ref every millisecond until it holds something other
// than prev, and returns the time since t0.
func waitRefMove(ctx context.Context, gitDir, ref, prev string, t0 time.Time, within time.Duration) (time.Duration, error) {
	for {
		v, err := readRef(gitDir, ref)
		now := time.Now()
		if err != nil {
			return 0, err
		}
		if v != "" && v != prev {
			return now.Sub(t0), nil
		}
		if now.Sub(t0) > within {
			return 0, fmt.Errorf("%s did not move within %s", ref, within)
		}
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		time.Sleep(time.Millisecond)
	}
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }
