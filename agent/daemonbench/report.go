package daemonbench

import (
	"bytes"
	"fmt"
	"github.com/cairn-dev/cairn/snapshot/sealbench"
	"io"
	"strings"
)

// The tables are built in memory and written once, so one error check covers each.

func writeLatency(out io.Writer, r *LatencyResult) error {
	w := new(bytes.Buffer)
	fmt.Fprintf(w, "\n== 1. marker to sealed: `completed` state.json rename -> refs/heads/run-<id> moved\n")
	fmt.Fprintf(w, "   %d files under agentRoot/, %d edited just before each marker, autosave off;\n", r.Files, r.Changed)
	fmt.Fprintf(w, "   %d warm-up markers, then %d per run (p99 by nearest rank: the %s)\n", r.Warmup, r.SamplesPerRun, p99Rank(r.SamplesPerRun))
	fmt.Fprintf(w, "   engine = %q; reference: snapshot.Store.Seal called directly (no daemon, same engine) sealing the same change\n", r.Engine)
	fmt.Fprintf(w, "   %6s %9s %9s %9s %12s\n", "run", "p50", "p99", "max", "engine p50")
	for i, run := range r.Runs {
		fmt.Fprintf(w, "   %6d %9s %9s %9s %12s\n", i+1, sealbench.FormatMS(run.P50MS), sealbench.FormatMS(run.P99MS), sealbench.FormatMS(run.MaxMS), sealbench.FormatMS(run.EngineP50MS))
	}
	fmt.Fprintf(w, "   %6s %9s %9s %9s %12s\n", "median", sealbench.FormatMS(r.P50MS), sealbench.FormatMS(r.P99MS), "", sealbench.FormatMS(r.EngineP50MS))
	fmt.Fprintf(w, "   all %d samples: p99 %s, max %s\n", len(r.Runs)*r.SamplesPerRun, sealbench.FormatMS(r.AllP99MS), sealbench.FormatMS(r.AllMaxMS))
	fmt.Fprintf(w, "   p50 / engine p50: %.2fx; the daemon's own seal (ledger durationMs) p50 %s\n", r.Ratio, sealbench.FormatMS(r.DaemonSealP50MS))
	fmt.Fprintf(w, "   not counted: the simulator's save before the rename (read state.json, write .bak and .tmp), p50 %s\n", sealbench.FormatMS(r.SaveP50MS))
	fmt.Fprintf(w, "   target p50 < %g ms: %s; p99 < %g ms: %s\n", r.TargetP50MS, verdict(r.P50MS < r.TargetP50MS),
		r.TargetP99MS, verdict(r.P99MS < r.TargetP99MS))
	fmt.Fprintf(w, "   checkpoints: %d racy (must be 0: nothing changes after a marker), %d failed, %d missing of %d; %d sealed by another engine than %q (daemon and reference)\n",
		r.Racy, r.Failed, r.Missing, len(r.Runs)*r.SamplesPerRun, r.OtherEngine, r.Engine)
	fmt.Fprintf(w, "   daemon memory after: RSS %.1f MiB, peak %.1f MiB\n", r.RSSMiB, r.HWMMiB)
	writeIdle(w, "with the runtime's lock held", r.Idle)
	_, err := out.Write(w.Bytes())
	return err
}

func writeWatch(out io.Writer, r *WatchResult) error {
	w := new(bytes.Buffer)
	fmt.Fprintf(w, "\n== 2. watching %d files in %d folders (plain layout, fresh state directory each run)\n", r.Files, r.Folders)
	fmt.Fprintf(w, "   answered: process start -> its socket first answers; ready: -> status shows the workspace\n")
	fmt.Fprintf(w, "   \"watching\" (every folder watched;")
	fmt.Fprintf(w, " the baseline seal starts after that and is timed apart, from the same start)\n")
	fmt.Fprintf(w, "   reference: walking the tree and adding one fsnotify watch per folder, in this process\n")
	fmt.Fprintf(w, "   %6s %9s %9s %8s %12s %8s %10s %9s %9s %9s %10s %8s\n", "run", "answered", "ready", "watches", "walk+watch",
		"ratio", "baseline", "RSS ready", "RSS idle", "peak", "idle CPU", "wakeups")
	for i, run := range r.Runs {
		ratio := 0.0
		if run.RefMS > 0 {
			ratio = run.ReadyMS / run.RefMS
		}
		fmt.Fprintf(w, "   %6d %9s %9s %8d %12s %7.2fx %10s %8.1fM %8.1fM %8.1fM %10s %8d\n", i+1, sealbench.FormatMS(run.AnsweredMS), sealbench.FormatMS(run.ReadyMS), run.Watches,
			sealbench.FormatMS(run.RefMS), ratio, sealbench.FormatMS(run.BaselineMS), run.RSSReadyMiB, run.RSSMiB, run.HWMMiB, sealbench.FormatMS(run.Idle.CPUMS), run.Idle.Wakeups)
	}
	fmt.Fprintf(w, "   %6s %9s %9s %8s %12s %7.2fx %10s %8.1fM %8.1fM %8.1fM %10s %8.0f\n", "median", sealbench.FormatMS(r.AnsweredMS), sealbench.FormatMS(r.ReadyMS), "",
		sealbench.FormatMS(r.RefMS), r.Ratio, sealbench.FormatMS(r.BaselineMS), r.RSSReadyMiB, r.RSSMiB, r.HWMMiB, sealbench.FormatMS(r.IdleCPUMS), r.IdleWakeups)
	fmt.Fprintf(w, "   target ready within %gx the reference: %s; RSS under %g MiB: %s when ready, %s after the baseline (peak %s)\n",
		r.TargetRatio, verdict(r.Ratio <= r.TargetRatio), r.TargetRSS, verdict(r.RSSReadyMiB < r.TargetRSS),
		verdict(r.RSSMiB < r.TargetRSS), verdict(r.HWMMiB < r.TargetRSS))
	for _, run := range r.Runs {
		if run.BaselineState != "ok" {
			fmt.Fprintf(w, "   note: a baseline ended %q after %s: %s\n", run.BaselineState, sealbench.FormatMS(run.BaselineMS), run.BaselineError)
		}
		if run.Watches != r.Folders {
			fmt.Fprintf(w, "   note: the daemon watched %d folders of %d\n", run.Watches, r.Folders)
		}
	}
	if len(r.Runs) > 0 {
		writeIdle(w, "after the baseline", r.Runs[len(r.Runs)-1].Idle)
	}
	_, err := out.Write(w.Bytes())
	return err
}

func writeStorm(out io.Writer, r *StormResult) error {
	w := new(bytes.Buffer)
	fmt.Fprintf(w, "\n== 3. event storm: %d writes over %s into a plain workspace of %d files\n", r.Writes, sealbench.FormatMS(r.ForMS), r.Files)
	fmt.Fprintf(w, "   autosave quiet %s, max wait %s (the product's max wait is 60s); one write in ten creates a file\n",
		r.Config.Quiet, r.Config.MaxWait)
	fmt.Fprintf(w, "   autosaves during the storm vs the bound ceil(storm / max wait); the final autosave vs the disk\n")
	fmt.Fprintf(w, "   %6s %8s %9s %10s %6s %8s %24s %12s %10s %s\n", "run", "writes", "took", "autosaves", "bound",
		"partial", "their seal times", "final after", "final seal", "final tree = disk")
	for i, run := range r.Runs {
		fmt.Fprintf(w, "   %6d %8d %9s %10d %6d %8d %24s %12s %10s %s\n", i+1, run.Writes, sealbench.FormatMS(run.TookMS), run.AutosavesDuring,
			run.Bound, run.Partial, list(run.AutosaveMS), sealbench.FormatMS(run.FinalAfterMS), sealbench.FormatMS(run.FinalSealMS), treeVerdict(run.Tree))
	}
	fmt.Fprintf(w, "   %6s %8s %9s %10.1f %6d %8s %24s %12s\n", "median", "", "", r.Autosaves, r.Bound, "", "", sealbench.FormatMS(r.FinalMS))
	fmt.Fprintf(w, "   partial: autosaves the engine recorded partial (files changed while it sealed them, named)\n")
	fmt.Fprintf(w, "   autosaves within the bound: %s; every final tree equals the disk: %s\n",
		verdict(allWithin(r.Runs)), verdict(r.AllEqual))
	for i, run := range r.Runs {
		for _, e := range run.Tree.Examples {
			fmt.Fprintf(w, "   run %d differs: %s\n", i+1, e)
		}
	}
	fmt.Fprintf(w, "   daemon memory after: RSS %.1f MiB, peak %.1f MiB\n", r.RSSMiB, r.HWMMiB)
	_, err := out.Write(w.Bytes())
	return err
}

func writeIdle(w io.Writer, what string, r IdleResult) {
	fmt.Fprintf(w, "   idle %.0f s %s: CPU %s (+%s in children; 10 ms resolution), %d wakeups\n",
		r.Seconds, what, sealbench.FormatMS(r.CPUMS), sealbench.FormatMS(r.ChildCPUMS), r.Wakeups)
	fmt.Fprintf(w, "   timers while idle: %s; and the Go runtime's own (sysmon, GC at most every 2 min)\n", strings.Join(r.Timers, "; "))
}

// p99Rank names the sample a nearest-rank p99 is, out of n.
func p99Rank(n int) string {
	k := (99*n + 99) / 100
	if k >= n {
		return "slowest"
	}
	return fmt.Sprintf("%s slowest", ordinal(n-k+1))
}

func ordinal(n int) string {
	switch {
	case n%100 >= 11 && n%100 <= 13:
		return fmt.Sprintf("%dth", n)
	case n%10 == 1:
		return fmt.Sprintf("%dst", n)
	case n%10 == 2:
		return fmt.Sprintf("%dnd", n)
	case n%10 == 3:
		return fmt.Sprintf("%drd", n)
	}
	return fmt.Sprintf("%dth", n)
}

func allWithin(runs []StormRun) bool {
	for _, r := range runs {
		if r.AutosavesDuring > r.Bound {
			return false
		}
	}
	return true
}

func treeVerdict(c TreeCheck) string {
	if c.Equal {
		return fmt.Sprintf("yes (%d files)", c.TreeFiles)
	}
	return fmt.Sprintf("NO: %d differ (%d in the tree, %d on disk)", c.Differ, c.TreeFiles, c.DiskFiles)
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

func list(xs []float64) string {
	if len(xs) == 0 {
		return "-"
	}
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = sealbench.FormatMS(x)
	}
	return strings.Join(s, " ")
}

func writeGC(out io.Writer, r *GCResult) error {
	w := new(bytes.Buffer)
	fmt.Fprintf(w, "\n== during maintenance: checkpoint request -> sealed, through the daemon's socket\n")
	fmt.Fprintf(w, "   %d files, %d edited before each request, autosave off; %d pairs: idle, then while the\n", r.Files, r.Changed, r.Pairs)
	fmt.Fprintf(w, "   daemon's own full maintenance (POST /v1/gc) is 10-80 %% through; seals run between its steps\n")
	fmt.Fprintf(w, "   %8s %9s %9s %9s %8s\n", "", "p50", "p99", "max", "samples")
	fmt.Fprintf(w, "   %8s %9s %9s %9s %8d\n", "idle", sealbench.FormatMS(r.IdleP50MS), sealbench.FormatMS(r.IdleP99MS), sealbench.FormatMS(percentile(r.IdleMS, 100)), len(r.IdleMS))
	fmt.Fprintf(w, "   %8s %9s %9s %9s %8d\n", "during", sealbench.FormatMS(r.DuringP50MS), sealbench.FormatMS(r.DuringP99MS), sealbench.FormatMS(r.DuringMaxMS), len(r.DuringMS))
	fmt.Fprintf(w, "   %d requests met a running maintenance, %d came after it ended (not counted; a whole one took %s)\n",
		r.Met, r.Finished, sealbench.FormatMS(r.MaintenanceMS))
	fmt.Fprintf(w, "   during p99 / idle p99: %.2fx (target <= 2x: %s)\n", r.P99Factor, verdict(r.P99Factor <= 2))
	_, err := out.Write(w.Bytes())
	return err
}
