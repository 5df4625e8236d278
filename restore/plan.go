package restore

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/cairn-dev/cairn/platform/printable"
	"github.com/cairn-dev/cairn/restore/ckpt"
)

// FormatPlan prints p for `--dry-run`: one line per file, writes then
// deletes, each sorted by path, sizes right-aligned,
//
//	write  1.2 KiB  src/main.go
//	delete   312 B  notes.tmp
//
// then one summary line:
//
//	restore to c7 (abc1234): write 2 files (1 new, 1 changed, 1.5 KiB), delete 1 file (312 B), 40 unchanged
//
// A path is printed with its control characters escaped (platform/printable).
func FormatPlan(w io.Writer, p ckpt.Plan) error {
	writes := sorted(p.Write)
	deletes := sorted(p.Delete)
	width := 0
	for _, fs := range [][]ckpt.PlanFile{writes, deletes} {
		for _, f := range fs {
			width = max(width, len(ckpt.HumanBytes(f.Size)))
		}
	}
	var b strings.Builder
	for _, f := range writes {
		fmt.Fprintf(&b, "write  %*s  %s\n", width, ckpt.HumanBytes(f.Size), printable.String(f.Path))
	}
	for _, f := range deletes {
		fmt.Fprintf(&b, "delete %*s  %s\n", width, ckpt.HumanBytes(f.Size), printable.String(f.Path))
	}
	b.WriteString(printable.String(Summary(p))) // ids and shas come from the ledger
	b.WriteByte('\n')
	_, err := io.WriteString(w, b.String())
	return err
}

// PlanListed is how many files a plan lists one by one; over it,
// FormatPlanBrief counts them by top folder.
const PlanListed = 200

// FormatPlanBrief is FormatPlan for a plan of any size: over PlanListed
// files, each top folder (or file at the top) is one line with how many
// files it writes and deletes and their sizes, biggest first, and a line
// says how to list every file.
func FormatPlanBrief(w io.Writer, p ckpt.Plan) error {
	if len(p.Write)+len(p.Delete) <= PlanListed {
		return FormatPlan(w, p)
	}
	var b strings.Builder
	for _, g := range ckpt.GroupPlan(p.Write, p.Delete, "") {
		name := g.Path
		if g.Folder {
			name += "/"
		}
		var parts []string
		if n := g.Added + g.Changed; n > 0 {
			parts = append(parts, fmt.Sprintf("write %s", plural(n, "file")))
		}
		if g.Removed > 0 {
			parts = append(parts, fmt.Sprintf("delete %s", plural(g.Removed, "file")))
		}
		fmt.Fprintf(&b, "%-10s %s  %s\n", ckpt.HumanBytes(g.Bytes), strings.Join(parts, ", "), printable.String(name))
	}
	fmt.Fprintf(&b, "(%s in all: --files lists each one)\n", plural(len(p.Write)+len(p.Delete), "file"))
	b.WriteString(printable.String(Summary(p)))
	b.WriteByte('\n')
	_, err := io.WriteString(w, b.String())
	return err
}

// Summary is the plan's one-line summary (FormatPlan's last line).
func Summary(p ckpt.Plan) string {
	var b strings.Builder
	b.WriteString("restore to ")
	b.WriteString(targetName(p.Target))
	b.WriteString(": ")
	if p.Empty() {
		verb := "match"
		if p.Kept == 1 {
			verb = "matches"
		}
		fmt.Fprintf(&b, "nothing to change, %s already %s", plural(p.Kept, "file"), verb)
		return b.String()
	}
	var parts []string
	if len(p.Write) > 0 {
		parts = append(parts, fmt.Sprintf("write %s (%d new, %d changed, %s)",
			plural(len(p.Write), "file"), p.Added(), p.Modified(), ckpt.HumanBytes(p.WriteBytes())))
	}
	if len(p.Delete) > 0 {
		parts = append(parts, fmt.Sprintf("delete %s (%s)", plural(len(p.Delete), "file"), ckpt.HumanBytes(p.DeleteBytes())))
	}
	parts = append(parts, strconv.Itoa(p.Kept)+" unchanged")
	b.WriteString(strings.Join(parts, ", "))
	return b.String()
}

// targetName is "c7 (abc1234)", with what exists of the two.
func targetName(c ckpt.Record) string {
	switch {
	case c.ID != "" && c.SHA != "":
		return c.ID + " (" + c.Short() + ")"
	case c.ID != "":
		return c.ID
	case c.SHA != "":
		return c.Short()
	}
	return "—"
}

func sorted(fs []ckpt.PlanFile) []ckpt.PlanFile {
	out := append([]ckpt.PlanFile(nil), fs...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}
