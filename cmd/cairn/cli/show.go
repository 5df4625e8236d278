package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/platform/printable"
)

func init() {
	register("show", "show one checkpoint and the files it changed", runShow)
	register("diff", "compare two checkpoints, or a checkpoint and the work tree", runDiff)
}

func runShow(ctx context.Context, e *env, args []string) error {
	fs := newFlags("show", "show <dir> <id> [--json]", e)
	var sf storeFlags
	sf.register(fs, reading)
	asJSON := fs.Bool("json", false, "print the result as JSON")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		fs.Usage()
		return usageErr("show takes a workspace directory and a checkpoint")
	}
	d, err := via(ctx, &sf, pos[0], true, func(b backend) (api.Diff, error) { return b.show(ctx, pos[1]) })
	if err != nil {
		return refusal(err)
	}
	if *asJSON {
		b, _ := json.MarshalIndent(d, "", "  ")
		fmt.Fprintln(e.stdout, string(printable.JSON(b)))
		return nil
	}
	if r := d.Record; r != nil {
		id := r.ID
		if id == "" { // a commit the runtime made, or main's first: not in the ledger
			id = "—"
		}
		p := printable.String
		fmt.Fprintf(e.stdout, "%s %s  %s  %s\n", p(id), p(r.SHA), p(orDash(string(r.Kind))), p(string(r.State)))
		if r.Label != "" {
			fmt.Fprintf(e.stdout, "label:  %s\n", p(r.Label))
		}
		if r.CodonID != "" {
			fmt.Fprintf(e.stdout, "codon:  %s (%s), run %s, attempt %d\n", p(r.CodonID), p(r.CodonName), p(r.RunID), r.Attempt)
		}
		fmt.Fprintf(e.stdout, "time:   %s (%s)\nref:    %s\nparent: %s\nfiles:  +%d ~%d -%d\n", r.Time.Local().Format("2006-01-02 15:04:05"),
			age(time.Since(r.Time)), p(orDash(r.Ref)), p(orDash(r.Parent)), r.Added, r.Changed, r.Removed)
		if r.Engine != "" {
			fmt.Fprintf(e.stdout, "sealed: by the %s engine in %d ms\n", p(r.Engine), r.DurationMS)
		}
		for _, is := range r.Issues {
			fmt.Fprintf(e.stdout, "  %s: %q: %s\n", p(string(r.State)), is.Path, p(is.Reason))
		}
	}
	if s := strings.TrimRight(d.Stat, "\n"); s != "" {
		fmt.Fprintln(e.stdout, printable.Lines(s))
	}
	return nil
}

func runDiff(ctx context.Context, e *env, args []string) error {
	fs := newFlags("diff", "diff <dir> <a> [<b>] [--stat] [--json] [--color auto|always|never] [--no-pager]   (no b: the work tree)", e)
	var sf storeFlags
	sf.register(fs, reading)
	asJSON := fs.Bool("json", false, "print the result as JSON")
	statOnly := fs.Bool("stat", false, "the diffstat only")
	colour := fs.String("color", "auto", "colour: auto (on a terminal, unless NO_COLOR is set), always or never")
	noPager := fs.Bool("no-pager", false, "never page (default: $PAGER, else less -FRX, on a terminal only)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	pal, err := colourFor(*colour, e.stdout)
	if err != nil {
		return err
	}
	if len(pos) != 2 && len(pos) != 3 {
		fs.Usage()
		return usageErr("diff takes a workspace directory and one or two checkpoints")
	}
	d, err := via(ctx, &sf, pos[0], true, func(b backend) (api.Diff, error) { return b.diff(ctx, pos[1:], !*statOnly) })
	if err != nil {
		return refusal(err)
	}
	if *asJSON {
		out, _ := json.MarshalIndent(d, "", "  ")
		fmt.Fprintln(e.stdout, string(printable.JSON(out)))
		return nil
	}
	// git's diffstat and patch: paths and file contents, their lines kept,
	// escaped before they are coloured.
	text := colourStat(pal, printable.Lines(d.Stat))
	if d.Patch != "" {
		text += "\n" + colourPatch(pal, printable.Lines(d.Patch))
	}
	pager := ""
	if !*noPager {
		pager = pagerCommand(e.stdout)
	}
	return page(e.stdout, pager, text)
}
