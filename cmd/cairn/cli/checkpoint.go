package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/autodev"
	"github.com/cairn-dev/cairn/platform/printable"
	"github.com/cairn-dev/cairn/snapshot"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// stringList is a repeatable flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func init() {
	register("checkpoint", "seal one checkpoint of a workspace", runCheckpoint)
}

func runCheckpoint(ctx context.Context, e *env, args []string) error {
	fs := newFlags("checkpoint", "checkpoint <dir> [--label L] [--codon ID --status S --codon-name N --run R] [--json]", e)
	var sf storeFlags
	sf.register(fs, writing)
	label := fs.String("label", "", "label of the checkpoint")
	codon := fs.String("codon", "", "codon id (with --status)")
	codonName := fs.String("codon-name", "", "codon name (default: the codon id)")
	status := fs.String("status", "", "lifecycle status: rig-setup, completed, error, skipped or exit (default: a manual checkpoint)")
	run := fs.String("run", "", "run id; the checkpoint goes on branch run-<id>")
	asJSON := fs.Bool("json", false, "print the ledger record as JSON")
	var patterns, paths stringList
	fs.Var(&patterns, "pattern", "select files by this pattern (repeatable; default **)")
	fs.Var(&paths, "path", "seal incrementally: only these paths changed (repeatable; default: a full reconcile)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		fs.Usage()
		return usageErr("checkpoint takes one workspace directory")
	}
	req := snapshot.SealRequest{Kind: ckpt.KindManual, Label: *label, RunID: *run}
	if *status != "" {
		req.Kind = ckpt.Kind(*status)
		if !req.Kind.IsLifecycle() {
			return usageErr("--status %q: want rig-setup, completed, error, skipped or exit", *status)
		}
		if *codon == "" || *run == "" {
			return usageErr("--status needs --codon and --run")
		}
		req.CodonID, req.CodonName = *codon, *codonName
		if req.CodonName == "" {
			req.CodonName = *codon
		}
	} else if *codon != "" {
		return usageErr("--codon needs --status")
	}
	if len(patterns) > 0 {
		req.Patterns = patterns
	}
	if len(paths) > 0 {
		req.Changed = paths
	}
	if pl := newProgress(e, *asJSON); pl != nil && req.Changed == nil {
		began := time.Now()
		req.Progress = func(p snapshot.Progress) { // sealed here, without the daemon
			pl.show(api.Progress{Op: "sealing", Done: p.Done, Total: p.Total, Bytes: p.Bytes, Since: began})
		}
		defer pl.done()
		ctx = withProgress(ctx, pl) // sealed by the daemon
	}
	// Selections are the daemon's own: with one, the store seals directly.
	rec, err := via(ctx, &sf, pos[0], req.Patterns == nil && req.Changed == nil, func(b backend) (ckpt.Record, error) {
		return b.checkpoint(ctx, req)
	})
	if *asJSON && rec.ID != "" {
		b, _ := json.MarshalIndent(rec, "", "  ")
		fmt.Fprintln(e.stdout, string(printable.JSON(b)))
	} else if err == nil && rec.Kind == autodev.KindTask {
		fmt.Fprintln(e.stdout, printable.String(fmt.Sprintf("%s %s %s %s: %s", mark(rec.Kind), rec.ID, short(rec.SHA), rec.Kind, rec.Label)))
	} else if err == nil {
		fmt.Fprintln(e.stdout, printable.String(fmt.Sprintf("%s %s %s %s (+%d ~%d -%d) %s", mark(rec.Kind), rec.ID, short(rec.SHA), rec.Kind,
			rec.Added, rec.Changed, rec.Removed, rec.State)))
		for _, is := range rec.Issues {
			fmt.Fprintf(e.stdout, "  %s: %q: %s\n", printable.String(string(rec.State)), is.Path, printable.String(is.Reason))
		}
		for _, is := range rec.Skipped {
			fmt.Fprintf(e.stdout, "  skipped: %q: %s\n", is.Path, printable.String(is.Reason))
		}
	}
	if err != nil {
		return err
	}
	if rec.State == ckpt.StatePartial || rec.State == ckpt.StateRacy {
		return &exitError{ExitIncomplete, fmt.Errorf("checkpoint %s is %s", rec.ID, rec.State)}
	}
	return nil
}

func short(sha string) string {
	if len(sha) > 7 {
		return sha[:7]
	}
	return sha
}
