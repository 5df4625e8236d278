package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/platform/printable"
	"github.com/cairn-dev/cairn/restore/ckpt"
)

func init() {
	register("status", "show the daemon and every workspace it watches", runStatus)
}

func runStatus(ctx context.Context, e *env, args []string) error {
	fs := newFlags("status", "status [--socket PATH] [--json]", e)
	var df daemonFlags
	df.register(fs)
	asJSON := fs.Bool("json", false, "print the status as JSON")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	c := df.client()
	if !c.Running(ctx) {
		return fmt.Errorf("no daemon answers on %s; start one with: cairn daemon --watch DIR", c.Socket)
	}
	st, err := c.Status(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		b, _ := json.MarshalIndent(st, "", "  ")
		fmt.Fprintln(e.stdout, string(printable.JSON(b)))
		if statusBad(st) {
			return errWorkspaceErrors
		}
		return nil
	}
	// Every string a daemon sends is printed escaped (platform/printable):
	// folder names, labels and git's words come from users' trees.
	p := printable.String
	fmt.Fprintf(e.stdout, "daemon pid %d, version %s, up %s\nstate dir %s\nsocket    %s\n", st.PID, p(st.Version),
		time.Since(st.Started).Round(time.Second), p(st.StateDir), p(st.Socket))
	if st.Config != "" {
		fmt.Fprintf(e.stdout, "config    %s\n", p(st.Config))
	}
	if st.ConfigErr != "" {
		fmt.Fprintf(e.stdout, "config reload refused (old config runs): %s\n", p(st.ConfigErr))
	}
	if len(st.Workspaces) == 0 {
		fmt.Fprintln(e.stdout, "no workspaces watched")
	}
	bad := false
	for _, w := range st.Workspaces {
		fmt.Fprintf(e.stdout, "\n%s  [%s, %s]\n  watches %d, pending %d, sealed %d, failures %d\n", p(w.Dir), p(w.State), p(w.Layout), w.Watches, w.Pending, w.Seals, w.Failures)
		if w.Last != "" {
			fmt.Fprintf(e.stdout, "  last checkpoint %s (%s) %s\n", p(w.Last), p(w.LastState), age(time.Since(w.LastTime)))
		}
		if pr := w.Progress; pr != nil {
			fmt.Fprintf(e.stdout, "  %s\n", progressLine(*pr))
		}
		if w.Error != "" {
			bad = true
			fmt.Fprintf(e.stdout, "  error: %s\n", p(w.Error))
		}
		printDegraded(e, w)
		fmt.Fprintf(e.stdout, "  store: %s kept, %s on disk, %s\n", plural(w.Kept, "checkpoint", ""), ckpt.HumanBytes(w.StoreBytes), plural(int(w.LooseObjects), "loose object", ""))
		if m := w.LastMaintenance; m != nil {
			fmt.Fprintf(e.stdout, "  last maintenance %s: %s\n", age(time.Since(m.Start)), p(maintenanceOutcome(*m)))
		}
		if w.Notice != "" {
			fmt.Fprintf(e.stdout, "  note: %s\n", p(w.Notice))
		}
		if w.StoreExposed != "" {
			bad = true
			fmt.Fprintf(e.stdout, "  store not private: %s\n", p(w.StoreExposed))
		}
		if printReplication(e, w.Replication) {
			bad = true
		}
		for _, is := range w.Skipped {
			fmt.Fprintf(e.stdout, "  not checkpointed: %q: %s\n", is.Path, p(is.Reason))
		}
		printForeign(e, w)
	}
	if len(st.Refused)+len(st.NotWatched) > 0 {
		fmt.Fprintln(e.stdout, "\nnot watched:")
		for _, r := range append(slices.Clip(st.Refused), st.NotWatched...) {
			fmt.Fprintf(e.stdout, "  %s: %s\n", p(r.Dir), p(r.Reason))
		}
	}
	if len(st.Workers) > 0 {
		fmt.Fprintln(e.stdout, "\nworkers (one per workspace owner, running as that user):")
		for _, w := range st.Workers {
			fmt.Fprintf(e.stdout, "  uid %d %s: %s, pid %d, %s, %s", w.UID, p(w.User), p(w.State), w.PID, plural(w.Workspaces, "workspace", ""), plural(w.Restarts, "restart", ""))
			if w.Error != "" {
				bad = true
				fmt.Fprintf(e.stdout, ", error: %s", p(w.Error))
			}
			fmt.Fprintln(e.stdout)
			if len(w.Dropped) > 0 {
				// What the supervisor refused from it (docs/worker-protocol.md).
				fmt.Fprintf(e.stdout, "    refused from this worker: %s; last: %s\n", dropCounts(w.Dropped), w.DroppedWhy)
			}
		}
	}
	if bad {
		return errWorkspaceErrors
	}
	return nil
}

// errWorkspaceErrors is status's exit (ExitFailure) when anything it shows
// is an error: a scripted `cairn status` sees it without parsing.
var errWorkspaceErrors = errors.New("some workspaces report errors")

// statusBad reports whether a status holds an error status prints as one.
func statusBad(st api.Status) bool {
	for _, w := range st.Workspaces {
		if w.Error != "" || w.StoreExposed != "" {
			return true
		}
		if r := w.Replication; r != nil && (r.State == "failing" || r.State == "off") {
			return true
		}
	}
	for _, w := range st.Workers {
		if w.Error != "" {
			return true
		}
	}
	return false
}

// printDegraded says what is unwatched and how stale cairn's view of it may be.
func printDegraded(e *env, w api.WorkspaceStatus) {
	if w.Unwatched > 0 {
		names := printable.String(strings.Join(w.UnwatchedDirs, ", "))
		if more := w.Unwatched - len(w.UnwatchedDirs); more > 0 {
			names += fmt.Sprintf(" and %d more", more)
		}
		fmt.Fprintf(e.stdout, "  unwatched: %s (%s); every checkpoint reconciles the whole tree\n", plural(w.Unwatched, "folder", ""), names)
	}
	if w.StaleUpTo != "" {
		stale := printable.String(w.StaleUpTo)
		line := fmt.Sprintf("  changes there are found by a full reconcile every %s: the view may be up to %s stale", stale, stale)
		if !w.NextReconcile.IsZero() {
			line += fmt.Sprintf(" (next in %s)", until(w.NextReconcile))
		}
		fmt.Fprintln(e.stdout, line)
	}
	if !w.NextRewatch.IsZero() {
		fmt.Fprintf(e.stdout, "  next attempt at a complete watch in %s\n", until(w.NextRewatch))
	}
}

// until is the time left before t, rounded, never negative.
func until(t time.Time) time.Duration {
	return max(time.Until(t), 0).Round(time.Second)
}

// printReplication shows the push to the fleet remote; it reports whether
// the push is failing.
func printReplication(e *env, r *api.ReplicationStatus) bool {
	if r == nil {
		return false
	}
	p := printable.String
	line := fmt.Sprintf("  replication to %s as %s/%s: %s", p(r.Remote), p(r.Host), p(r.Key), p(r.State))
	if r.LastPushed != "" {
		line += fmt.Sprintf(", last pushed %s %s", p(r.LastPushed), age(time.Since(r.LastPushedTime)))
	}
	if r.LagCheckpoints > 0 {
		line += fmt.Sprintf(", lag %s (%s)", plural(r.LagCheckpoints, "checkpoint", ""), (time.Duration(r.LagSeconds) * time.Second).String())
	} else {
		line += ", up to date"
	}
	fmt.Fprintln(e.stdout, line)
	if r.LastError != "" {
		msg := "  replication error: " + p(r.LastError)
		if !r.NextRetry.IsZero() {
			msg += fmt.Sprintf(" (retrying in %s)", until(r.NextRetry))
		}
		fmt.Fprintln(e.stdout, msg)
	}
	return r.State == "failing" || r.State == "off"
}

// dropCounts is "3 status, 10 event" for a worker's Dropped, in a fixed order.
func dropCounts(m map[string]int64) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%d %s", m[k], k))
	}
	return strings.Join(parts, ", ")
}

// printForeign names the folders in and above the workspace others can
// write (README, "Security"), with the command that makes each private.
func printForeign(e *env, w api.WorkspaceStatus) {
	p := printable.String
	for _, f := range w.Foreign {
		path := p(f.Path)
		where, fix := "in the workspace", "chown $(id -u) "+path+"; chmod go-w "+path
		switch {
		case f.Above:
			where, fix = "above the workspace", "chmod go-w "+path+" (or chmod +t), or chown it to the workspace's owner"
		case f.LeftOut:
			where = "in the workspace, left out of its checkpoints and restores"
		}
		fmt.Fprintf(e.stdout, "  writable by others (%s): %s: %s; fix: %s\n", where, path, p(f.Why), fix)
	}
	if w.ForeignMore > 0 {
		fmt.Fprintf(e.stdout, "  and %s others can write\n", plural(w.ForeignMore, "more folder", "more folders"))
	}
}

// progressLine says how far a long operation has come: "sealing baseline
// 42 % (42,000/100,000 files, 120.0 MiB) for 31s".
func progressLine(pr api.Progress) string {
	what := fmt.Sprintf("%s/%s %s", count(pr.Done), count(pr.Total), pr.Units())
	if pr.Bytes > 0 {
		what += ", " + ckpt.HumanBytes(pr.Bytes)
	}
	return fmt.Sprintf("%s %d %% (%s) for %s", printable.String(pr.Op), pr.Percent(), what, time.Since(pr.Since).Round(time.Second))
}
