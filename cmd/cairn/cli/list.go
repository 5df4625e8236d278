package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/cairn-dev/cairn/agent/autodev"
	"github.com/cairn-dev/cairn/platform/printable"
	"github.com/cairn-dev/cairn/restore"

	"github.com/cairn-dev/cairn/restore/ckpt"
	"github.com/cairn-dev/cairn/restore/timeline"
)

func init() {
	register("list", "list a workspace's checkpoints, newest first", runList)
}

// mark is the listing's sign for a kind (README.md, "Commands"); an
// autodev task is marked as a completed codon.
func mark(k ckpt.Kind) string {
	if k == autodev.KindTask {
		return timeline.Mark(ckpt.KindCompleted)
	}
	return timeline.Mark(k)
}

func runList(ctx context.Context, e *env, args []string) error {
	fs := newFlags("list", "list <dir> [--all] [--json]", e)
	var sf storeFlags
	sf.register(fs, reading)
	asJSON := fs.Bool("json", false, "print the ledger records as JSON, newest first")
	all := fs.Bool("all", false, "also list checkpoints a retention policy pruned")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		fs.Usage()
		return usageErr("list takes one workspace directory")
	}
	l, err := via(ctx, &sf, pos[0], true, func(b backend) (ledger, error) { return b.list(ctx) })
	if err != nil {
		return err
	}
	recs := l.recs
	if !*all {
		recs = slices.DeleteFunc(slices.Clone(recs), func(r ckpt.Record) bool { return r.Pruned() })
	}
	if *asJSON {
		if recs == nil {
			recs = []ckpt.Record{}
		}
		b, _ := json.MarshalIndent(recs, "", "  ")
		fmt.Fprintln(e.stdout, string(printable.JSON(b)))
		return nil
	}
	if l.off != "" && len(recs) == 0 {
		fmt.Fprintln(e.stdout, printable.String(l.off)) // the autodev layout without a repository
		return nil
	}
	printList(e.stdout, recs, l.head, l.pins, time.Now())
	return nil
}

func printList(w io.Writer, recs []ckpt.Record, head string, pins []string, now time.Time) {
	if len(recs) == 0 {
		fmt.Fprintln(w, "no checkpoints yet")
		return
	}
	for _, r := range recs {
		label := r.Label
		if label == "" && r.CodonName != "" {
			label = r.CodonName
		}
		if label == "" {
			label = "—"
		}
		where := "—"
		switch {
		case r.CodonID != "" && r.RunID == "":
			where = r.CodonID // an autodev task
		case r.CodonID != "":
			where = r.CodonID + "/" + r.RunID
		case r.RunID != "":
			where = "run " + r.RunID
		}
		line := fmt.Sprintf("%s %-4s %s   %s · %s · %s · %s", mark(r.Kind), r.ID, label, where, orDash(short(r.SHA)), r.Kind, age(now.Sub(r.Time)))
		if r.State != ckpt.StateOK {
			line += " · " + string(r.State)
			if r.Error != "" {
				line += ": " + r.Error
			}
			if r.Pruned() {
				if r.PrunedAt != nil {
					line += " " + age(now.Sub(*r.PrunedAt))
				}
				if r.PrunedBy != "" {
					line += " by " + r.PrunedBy
				}
			}
		}
		if r.SHA != "" && slices.Contains(pins, r.SHA) {
			line += " · pinned"
		}
		if head != "" && r.ID == head {
			line += "  " + restore.HeadMark
		}
		fmt.Fprintln(w, printable.String(line)) // labels, codons and errors are the user's
	}
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

func age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}
