package daemonbench

import (
	"context"
	"fmt"
	"github.com/cairn-dev/cairn/snapshot/sealbench"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/cairn-dev/cairn/agent/api"
)

// WatchResult is part 2: watching a large tree.
type WatchResult struct {
	Files   int        `json:"files"`
	Folders int        `json:"folders"` // the root included
	Runs    []WatchRun `json:"runs"`
	// Medians over the runs.
	ReadyMS     float64 `json:"readyMs"`
	AnsweredMS  float64 `json:"answeredMs"`
	RefMS       float64 `json:"refMs"`
	Ratio       float64 `json:"ratio"` // ReadyMS / RefMS
	BaselineMS  float64 `json:"baselineMs"`
	RSSReadyMiB float64 `json:"rssReadyMiB"`
	RSSMiB      float64 `json:"rssMiB"`
	HWMMiB      float64 `json:"hwmMiB"`
	IdleCPUMS   float64 `json:"idleCpuMs"`
	IdleWakeups float64 `json:"idleWakeups"`
	TargetRatio float64 `json:"targetRatio"`
	TargetRSS   float64 `json:"targetRssMiB"`
}

// WatchRun is one daemon start on a fresh state directory.
type WatchRun struct {
	// ReadyMS runs from starting the process to its status showing the
	// workspace "watching", with every folder watched.
	ReadyMS float64 `json:"readyMs"`
	Watches int     `json:"watches"`
	// AnsweredMS is when the daemon's socket first answered (the process
	// up, its config read): ReadyMS minus it is finding, opening and
	// watching the workspace.
	AnsweredMS float64 `json:"answeredMs"`
	// RefMS is walking the tree and adding one fsnotify watch per folder in
	// the benchmark's own process.
	RefMS      float64 `json:"refMs"`
	RefWatches int     `json:"refWatches"`
	// BaselineMS runs from the start to the baseline checkpoint sealed (the
	// first checkpoint of a workspace: every file hashed into the store).
	BaselineMS    float64    `json:"baselineMs"`
	BaselineState string     `json:"baselineState"`
	BaselineError string     `json:"baselineError,omitempty"`
	RSSReadyMiB   float64    `json:"rssReadyMiB"` // VmRSS once ready
	RSSMiB        float64    `json:"rssMiB"`      // VmRSS after the baseline and the idle period
	HWMMiB        float64    `json:"hwmMiB"`      // VmHWM: the peak, the baseline included
	Idle          IdleResult `json:"idle"`
}

// watch starts the daemon Runs times, each on a fresh state directory, on a
// plain workspace of WatchFiles files. The workspace's status turns
// "watching" once every folder is watched and before the baseline seal
// begins, so the two are timed apart.
func (b *bench) watch(ctx context.Context) (*WatchResult, error) {
	cfg := b.cfg
	root := filepath.Join(b.scratch, "watch", "tree")
	b.logf("watch: generating a tree of %d files", cfg.WatchFiles)
	tr, err := makeTree(ctx, root, cfg.WatchFiles, 2)
	if err != nil {
		return nil, err
	}
	res := &WatchResult{Files: cfg.WatchFiles, Folders: tr.folders, TargetRatio: 2, TargetRSS: 40}
	var ready, answered, ref, baseline, rssReady, rss, hwm, idle, wake []float64
	for r := range cfg.Runs {
		var run WatchRun
		reference := func() error {
			sealbench.Settle()
			d, n, err := walkAndWatch(root)
			run.RefMS, run.RefWatches = ms(d), n
			return err
		}
		// The reference goes first on even runs and last on odd ones.
		if r%2 == 0 {
			if err := reference(); err != nil {
				return nil, err
			}
		}
		b.logf("watch: run %d/%d: starting the daemon", r+1, cfg.Runs)
		if err := b.watchOnce(ctx, fmt.Sprintf("watch%d", r), root, &run); err != nil {
			return nil, err
		}
		if r%2 == 1 {
			if err := reference(); err != nil {
				return nil, err
			}
		}
		res.Runs = append(res.Runs, run)
		ready, ref, baseline = append(ready, run.ReadyMS), append(ref, run.RefMS), append(baseline, run.BaselineMS)
		answered = append(answered, run.AnsweredMS)
		rssReady, rss, hwm = append(rssReady, run.RSSReadyMiB), append(rss, run.RSSMiB), append(hwm, run.HWMMiB)
		idle, wake = append(idle, run.Idle.CPUMS), append(wake, float64(run.Idle.Wakeups))
	}
	res.ReadyMS, res.RefMS, res.BaselineMS = median(ready), median(ref), median(baseline)
	res.AnsweredMS = median(answered)
	res.RSSReadyMiB, res.RSSMiB, res.HWMMiB = median(rssReady), median(rss), median(hwm)
	res.IdleCPUMS, res.IdleWakeups = median(idle), median(wake)
	if res.RefMS > 0 {
		res.Ratio = res.ReadyMS / res.RefMS
	}
	return res, nil
}

func (b *bench) watchOnce(ctx context.Context, name, root string, run *WatchRun) error {
	sealbench.Settle()
	d, err := b.startDaemon(name, root, "")
	if err != nil {
		return err
	}
	defer d.stop()
	ws, seen, err := d.waitFor(ctx, "the workspace watching", 5*time.Minute, time.Millisecond,
		func(w api.WorkspaceStatus) bool { return w.State == "watching" && w.Watches > 0 })
	if err != nil {
		return err
	}
	run.ReadyMS, run.Watches, run.AnsweredMS = ms(seen.Sub(d.started)), ws.Watches, ms(d.answered.Sub(d.started))
	if m, err := readMemory(d.pid()); err == nil {
		run.RSSReadyMiB = mib(m.rss)
	}

	b.logf("watch: watching %d folders after %.0f ms; waiting for the baseline checkpoint", ws.Watches, run.ReadyMS)
	ws, seen, err = d.waitFor(ctx, "the baseline checkpoint", 15*time.Minute, 50*time.Millisecond,
		func(w api.WorkspaceStatus) bool { return w.Seals >= 1 || w.Failures > 0 })
	if err != nil {
		return err
	}
	run.BaselineMS, run.BaselineState, run.BaselineError = ms(seen.Sub(d.started)), ws.LastState, ws.Error

	// Let the runtime return the baseline's garbage before measuring idle.
	if err := sleep(ctx, 2*time.Second); err != nil {
		return err
	}
	b.logf("watch: measuring %s of idle", b.cfg.Idle)
	run.Idle, err = measureIdle(ctx, d.pid(), b.cfg.Idle, []string{
		"discovery rescan every 2 s (glob of the watch roots, stat of the config file)",
	})
	if err != nil {
		return err
	}
	if m, err := readMemory(d.pid()); err == nil {
		run.RSSMiB, run.HWMMiB = mib(m.rss), mib(m.hwm)
	}
	if err := d.stop(); err != nil {
		return err
	}
	if !b.cfg.Keep {
		return os.RemoveAll(d.state) // the store: hundreds of MB at 100k files
	}
	return nil
}

// walkAndWatch is the reference: walk the tree and add an fsnotify watch on
// every folder, nothing else. It returns the time and the watches added.
func walkAndWatch(root string) (time.Duration, int, error) {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return 0, 0, err
	}
	defer fw.Close()
	n := 0
	t0 := time.Now()
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		n++
		return fw.Add(p)
	})
	return time.Since(t0), n, err
}
