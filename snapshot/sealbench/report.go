package sealbench

import (
	"bytes"
	"fmt"
	"io"
	"time"
)

// writeTable prints one size's figures for a person to read.
func writeTable(out io.Writer, git string, runs int, r SizeResult) error {
	// Built in memory and written once, so one error check covers it.
	w := new(bytes.Buffer)
	fmt.Fprintf(w, "\n== %d files (+%d ignored), %.1f MiB, git %s; %d counted runs after %d warm-up\n",
		r.Files, r.IgnoredFiles, float64(r.Bytes)/(1<<20), git, runs, r.WarmupRuns)
	if r.SlowPipelines == "first seals only" {
		fmt.Fprintf(w, "   tree generated in %s\n", dur(r.GenerateMS))
	} else {
		fmt.Fprintf(w, "   tree generated in %s, long-lived stores set up in %s\n",
			dur(r.GenerateMS), dur(r.SetupMS))
	}
	if r.LoadBefore != "" {
		fmt.Fprintf(w, "   load average %s before, %s after (other work on the machine adds noise)\n", r.LoadBefore, r.LoadAfter)
	}
	switch r.SlowPipelines {
	case "once":
		fmt.Fprintf(w, "   seed pipelines (a) and (b) ran ONCE at this size (minutes per run): their median is one sample\n")
	case "skipped":
		fmt.Fprintf(w, "   seed pipelines (a) and (b) SKIPPED at this size (SkipSlow)\n")
	case "first seals only":
		fmt.Fprintf(w, "   first seals only (FirstOnly): no long-lived stores, incremental seals, pipelines or reconciles\n")
	case "incremental only":
		fmt.Fprintf(w, "   incremental seals and the floor only (IncrementalOnly): no pipelines, reconciles or first seals\n")
	case "reconcile only":
		fmt.Fprintf(w, "   incremental seals and reconciles only (ReconcileOnly): no pipelines, no first seals\n")
	}

	fmt.Fprintf(w, "   %9s %9s %9s %4s  %s\n", "median", "min", "max", "runs", "operation")
	for _, o := range r.Ops {
		if o.Runs == 0 {
			fmt.Fprintf(w, "   %9s %9s %9s %4d  %s\n", "-", "-", "-", 0, o.What)
			continue
		}
		fmt.Fprintf(w, "   %9s %9s %9s %4d  %s\n", dur(o.MedianMS), dur(o.MinMS), dur(o.MaxMS), o.Runs, o.What)
	}
	fmt.Fprintf(w, "\n   %-20s %8s  %s\n", "ratio of medians", "value", "target")
	for _, rt := range r.Ratios {
		target := ""
		if rt.Met != nil {
			verdict := "met"
			if !*rt.Met {
				verdict = "MISSED"
			}
			target = fmt.Sprintf("<= %g  %s", rt.Target, verdict)
		}
		fmt.Fprintf(w, "   %-20s %7.2fx  %s\n", rt.Name, rt.Value, target)
	}
	if r.GCBytes > 0 {
		fmt.Fprintf(w, "   store after the first seal: cairn %.1f MiB, git add -A + commit %.1f MiB, the latter after git gc %.1f MiB (cairn/gc %.2fx, target <= 1.3)\n",
			float64(r.FirstSealBytes)/(1<<20), float64(r.AddAllBytes)/(1<<20), float64(r.GCBytes)/(1<<20), float64(r.FirstSealBytes)/float64(r.GCBytes))
	}
	if r.FirstSealPeakRSS > 0 {
		fmt.Fprintf(w, "   peak RSS of cairn's first seal (its own process, the largest of the counted runs): %.1f MiB (target at 100k files: < 64); wait4 says %.1f MiB, which counts the benchmark's own (a child started by vfork inherits its parent's peak at exec)\n",
			float64(r.FirstSealOwnPeakRSS)/(1<<20), float64(r.FirstSealPeakRSS)/(1<<20))
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "   note: %s\n", n)
	}
	_, err := out.Write(w.Bytes())
	return err
}

// dur prints milliseconds the way time.Duration does, rounded to what a
// benchmark with ±25 % drift can claim.
func dur(msec float64) string {
	d := time.Duration(msec * float64(time.Millisecond))
	switch {
	case d >= 10*time.Second:
		d = d.Round(100 * time.Millisecond)
	case d >= time.Second:
		d = d.Round(10 * time.Millisecond)
	case d >= 10*time.Millisecond:
		d = d.Round(100 * time.Microsecond)
	default:
		d = d.Round(10 * time.Microsecond)
	}
	return d.String()
}
