package daemonbench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"time"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/client"
	"github.com/cairn-dev/cairn/snapshot/sealbench"
)

// GCResult is the daemon's seal latency while its own maintenance runs.
// A Hankweave store is never maintained while the runtime's lock is live, so
// a lifecycle marker meets maintenance only when a run starts during one;
// the same seal path (sealing between maintenance steps) is measured here
// with a checkpoint request as the trigger, on a plain workspace, pairs of
// samples alternating: idle, then 10–80 % into a full maintenance (`cairn gc
// --full` through the socket; the fraction of the first run's duration).
type GCResult struct {
	Files   int `json:"files"`
	Changed int `json:"changedPerSample"`
	Pairs   int `json:"pairs"`
	// IdleMS and DuringMS are request-to-sealed times (the checkpoint
	// request's round trip through the socket).
	IdleMS   []float64 `json:"idleMs"`
	DuringMS []float64 `json:"duringMs"`
	// Met is how many during-samples found the maintenance still running
	// (it answered after the seal); only those count in DuringMS.
	Met           int     `json:"met"`
	Finished      int     `json:"finishedFirst"` // maintenance ended before the request: not counted
	IdleP50MS     float64 `json:"idleP50Ms"`
	IdleP99MS     float64 `json:"idleP99Ms"`
	DuringP50MS   float64 `json:"duringP50Ms"`
	DuringP99MS   float64 `json:"duringP99Ms"`
	DuringMaxMS   float64 `json:"duringMaxMs"`
	P99Factor     float64 `json:"p99Factor"` // DuringP99MS / IdleP99MS; target at most 2
	MaintenanceMS float64 `json:"maintenanceP50Ms"`
}

// duringGC measures GCResult with cfg.Samples pairs on a tree of cfg.Files.
func (b *bench) duringGC(ctx context.Context) (*GCResult, error) {
	cfg := b.cfg
	res := &GCResult{Files: cfg.Files, Changed: cfg.Changed, Pairs: cfg.Samples}
	dir := filepath.Join(b.scratch, "gc", "work")
	b.logf("during-gc: generating a tree of %d files", cfg.Files)
	tr, err := makeTree(ctx, dir, cfg.Files, 2)
	if err != nil {
		return nil, err
	}
	cfgPath, err := b.writeConfig("gc.toml", "[defaults]\nautosave = false\n")
	if err != nil {
		return nil, err
	}
	sealbench.Settle()
	d, err := b.startDaemon("gc", dir, cfgPath)
	if err != nil {
		return nil, err
	}
	defer d.stop()
	if _, _, err := d.waitFor(ctx, "the baseline checkpoint", 5*time.Minute, 20*time.Millisecond,
		func(w api.WorkspaceStatus) bool { return w.State == "watching" && w.Seals >= 1 }); err != nil {
		return nil, err
	}
	c := client.New(d.sock)
	defer c.Close()
	// One full maintenance first, so every later one repacks the same store.
	// Three full maintenances first: the first packs everything loose and
	// is far longer than the later ones, whose duration sets the delays.
	var last api.MaintenanceResult
	for range 3 {
		if last, err = c.GC(ctx, api.GCRequest{Workspace: dir, Full: true}); err != nil {
			return nil, fmt.Errorf("maintenance: %w", err)
		}
		if last.Error != "" || last.Skipped != "" {
			return nil, fmt.Errorf("maintenance: %s%s", last.Error, last.Skipped)
		}
	}
	// Requests land at a random point 10–80 % into a maintenance run.
	whole := max(time.Duration(last.DurationMS)*time.Millisecond, 20*time.Millisecond)
	b.logf("during-gc: a full maintenance takes %s", whole)
	seal := func(i int) (float64, error) {
		if err := appendLine(dir, tr.pick(cfg.Changed), fmt.Sprintf("// edit %d\n", i)); err != nil {
			return 0, err
		}
		t0 := time.Now()
		rec, err := c.Checkpoint(ctx, api.CheckpointRequest{Workspace: dir, Label: fmt.Sprintf("gc bench %d", i)})
		if err != nil {
			return 0, err
		}
		if rec.State != "ok" {
			return 0, fmt.Errorf("checkpoint %s: state %s %s", rec.ID, rec.State, rec.Error)
		}
		return ms(time.Since(t0)), nil
	}
	var maint []float64
	rng := rand.New(rand.NewPCG(2, 3))
	for i := range cfg.Samples + latencyWarmup {
		if i%10 == 0 {
			b.logf("during-gc: pair %d/%d", i+1, cfg.Samples+latencyWarmup)
		}
		idle, err := seal(2 * i)
		if err != nil {
			return nil, err
		}
		type gcDone struct {
			r   api.MaintenanceResult
			err error
		}
		done := make(chan gcDone, 1)
		go func() {
			r, err := c.GC(ctx, api.GCRequest{Workspace: dir, Full: true})
			done <- gcDone{r, err}
		}()
		if err := sleep(ctx, whole/10+time.Duration(rng.Int64N(int64(whole*7/10)))); err != nil {
			return nil, err
		}
		during, err := seal(2*i + 1)
		if err != nil {
			return nil, err
		}
		running := len(done) == 0 // the maintenance had not answered when the seal had
		g := <-done
		if g.err != nil {
			return nil, fmt.Errorf("maintenance: %w", g.err)
		}
		if i < latencyWarmup {
			continue
		}
		res.IdleMS = append(res.IdleMS, idle)
		if running {
			res.Met++
			res.DuringMS = append(res.DuringMS, during)
		} else {
			res.Finished++
			maint = append(maint, float64(g.r.DurationMS))
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return nil, err
		}
	}
	res.IdleP50MS, res.IdleP99MS = percentile(res.IdleMS, 50), percentile(res.IdleMS, 99)
	res.DuringP50MS, res.DuringP99MS, res.DuringMaxMS = percentile(res.DuringMS, 50), percentile(res.DuringMS, 99), percentile(res.DuringMS, 100)
	res.MaintenanceMS = median(maint)
	if res.IdleP99MS > 0 {
		res.P99Factor = res.DuringP99MS / res.IdleP99MS
	}
	if res.Met == 0 {
		return res, fmt.Errorf("no checkpoint met a running maintenance (%d finished first, in %s at the median)", res.Finished, sealbench.FormatMS(res.MaintenanceMS))
	}
	return res, nil
}
