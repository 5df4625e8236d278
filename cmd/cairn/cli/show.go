package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/platform/printable"
	"github.com/cairn-dev/cairn/restore/ckpt"
)

func init() {
	register("show", "show one checkpoint and the files it changed", runShow)
	register("diff", "compare two checkpoints, or a checkpoint and the work tree", runDiff)
}

func runShow(ctx context.Context, e *env, args []string) error {
	fs := newFlags("show", "show <dir> <id> [--files] [--limit N] [--json]", e)
	var sf storeFlags
	sf.register(fs, reading)
	asJSON := fs.Bool("json", false, "print the result as JSON")
	all := fs.Bool("files", false, "list every file the checkpoint changed")
	limit := fs.Int("limit", showLimit, "list at most this many files (with the folders that changed most)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		fs.Usage()
		return usageErr("show takes a workspace directory and a checkpoint")
	}
	n := max(*limit, 1)
	if *all {
		n = 0 // every file
	}
	d, err := via(ctx, &sf, pos[0], true, func(b backend) (api.Diff, error) { return b.show(ctx, pos[1], n) })
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
	printFiles(e, d, *all)
	return nil
}

// count writes n with thousands separators: 100,000.
func count(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// showLimit is how many files `cairn show` lists unless told otherwise.
const showLimit = 20

// showFolders is how many folders `cairn show` names, those that changed most.
const showFolders = 10

// printFiles prints a show's files: git's one-line summary, the folders
// that changed most (when the list is cut), and the page of files, saying
// how many more there are and how to list them.
func printFiles(e *env, d api.Diff, all bool) {
	p := printable.String
	if s := strings.TrimSpace(d.Stat); s != "" {
		fmt.Fprintln(e.stdout, printable.Lines(s))
	}
	cut := d.Total > len(d.Files)
	if cut && len(d.Folders) > 1 {
		fmt.Fprintln(e.stdout, "changed most:")
		for _, f := range d.Folders[:min(len(d.Folders), showFolders)] {
			name := f.Path
			if f.Folder {
				name += "/"
			}
			fmt.Fprintf(e.stdout, "  %7s  %s  (+%d ~%d -%d)\n", count(f.Files), p(name), f.Added, f.Changed, f.Removed)
		}
	}
	if cut {
		fmt.Fprintf(e.stdout, "first %s of %s:\n", count(len(d.Files)), plural(d.Total, "file", ""))
	}
	for _, f := range d.Files {
		mark := "~"
		switch f.Status {
		case ckpt.FileAdded:
			mark = "+"
		case ckpt.FileRemoved:
			mark = "-"
		}
		fmt.Fprintf(e.stdout, "  %s %s\n", mark, p(f.Path))
	}
	if cut && !all {
		fmt.Fprintf(e.stdout, "… %s more: --files lists them all, --limit N more of them\n", count(d.Total-len(d.Files)))
	}
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
