package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/mattn/go-isatty"

	"github.com/cairn-dev/cairn/platform/printable"
	"github.com/cairn-dev/cairn/restore"
	"github.com/cairn-dev/cairn/restore/ckpt"
	"github.com/cairn-dev/cairn/restore/timeline"
)

func init() {
	register("log", "draw a workspace's checkpoints as a graph, newest first", runLog)
}

func runLog(ctx context.Context, e *env, args []string) error {
	fs := newFlags("log", "log <dir> [--all] [--limit N] [--json] [--color auto|always|never]", e)
	var sf storeFlags
	sf.register(fs, reading)
	asJSON := fs.Bool("json", false, `print the graph as JSON: {"nodes": [...], "edges": [...]}, newest first`)
	all := fs.Bool("all", false, "also draw checkpoints a retention policy pruned")
	limit := fs.Int("limit", 0, "draw only the newest N checkpoints (0: all)")
	colour := fs.String("color", "auto", "colour: auto (on a terminal), always or never")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		fs.Usage()
		return usageErr("log takes one workspace directory")
	}
	if *limit < 0 {
		return usageErr("--limit %d: want 0 (all) or more", *limit)
	}
	paint, err := colourFor(*colour, e.stdout)
	if err != nil {
		return err
	}
	l, err := via(ctx, &sf, pos[0], true, func(b backend) (ledger, error) { return b.list(ctx) })
	if err != nil {
		return err
	}
	g := timeline.Layout(l.recs, timeline.Options{All: *all, Limit: *limit, Head: l.head})
	if *asJSON {
		return printLogJSON(e.stdout, g)
	}
	drawLog(e.stdout, g, time.Now(), paint)
	return nil
}

func printLogJSON(w io.Writer, g timeline.Graph) error {
	out := struct {
		Nodes []timeline.Node `json:"nodes"`
		Edges []timeline.Edge `json:"edges"`
	}{g.Nodes, g.Edges}
	if out.Nodes == nil {
		out.Nodes = []timeline.Node{}
	}
	if out.Edges == nil {
		out.Edges = []timeline.Edge{}
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(printable.JSON(b)))
	return err
}

// palette paints text with ANSI colours, or leaves it plain.
type palette bool

// SGR parameters for each part of a line.
const (
	sgrID    = "1"    // bold
	sgrHead  = "1;36" // bold cyan
	sgrDim   = "2"
	sgrRed   = "31"
	sgrGreen = "32"
	sgrAmber = "33"
	sgrBlue  = "34"
	sgrPink  = "35"
	sgrCyan  = "36"
	sgrGrey  = "90"
)

func (p palette) paint(sgr, s string) string {
	if !p || sgr == "" || s == "" {
		return s
	}
	return "\x1b[" + sgr + "m" + s + "\x1b[0m"
}

// colourFor decides --color: auto colours a terminal, unless NO_COLOR is set
// or TERM is dumb.
func colourFor(mode string, w io.Writer) (palette, error) {
	switch mode {
	case "always":
		return true, nil
	case "never":
		return false, nil
	case "auto":
		f, ok := w.(*os.File)
		if !ok || os.Getenv("NO_COLOR") != "" || os.Getenv("TERM") == "dumb" {
			return false, nil
		}
		return palette(isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())), nil
	}
	return false, usageErr("--color %q: want auto, always or never", mode)
}

// kindColour is the colour of a kind's node and mark.
func kindColour(k ckpt.Kind) string {
	switch k {
	case ckpt.KindCompleted:
		return sgrGreen
	case ckpt.KindError:
		return sgrRed
	case ckpt.KindSkipped:
		return sgrGrey
	case ckpt.KindExit:
		return sgrPink
	case ckpt.KindRigSetup:
		return sgrCyan
	case ckpt.KindAutosave:
		return sgrBlue
	case ckpt.KindPreRestore:
		return sgrAmber
	}
	return ""
}

// nodeSign is a node's sign in its lane (timeline.Sign).
func nodeSign(r ckpt.Record) string { return timeline.Sign(r) }

// printableRecord is r with every string a user's tree may have written
// escaped (platform/printable), for a line that is painted after.
func printableRecord(r ckpt.Record) ckpt.Record {
	s := printable.String
	r.ID, r.SHA, r.Label, r.CodonID, r.CodonName, r.RunID = s(r.ID), s(r.SHA), s(r.Label), s(r.CodonID), s(r.CodonName), s(r.RunID)
	r.Kind, r.State, r.Error, r.PrunedBy = ckpt.Kind(s(string(r.Kind))), ckpt.State(s(string(r.State))), s(r.Error), s(r.PrunedBy)
	return r
}

// drawLog writes the graph, one line per row; a node's line carries what
// `cairn list` prints for it, and its retry number.
func drawLog(w io.Writer, g timeline.Graph, now time.Time, p palette) {
	if len(g.Nodes) == 0 {
		fmt.Fprintln(w, "no checkpoints yet")
		return
	}
	for _, row := range g.Rows {
		var b strings.Builder
		before, after, dot := row.Text()
		b.WriteString(before)
		if dot {
			r := g.Nodes[row.Node].Record
			b.WriteString(p.paint(kindColour(r.Kind), nodeSign(r)))
			b.WriteString(after)
		}
		if row.Node >= 0 {
			b.WriteString(" ")
			b.WriteString(logLine(g.Nodes[row.Node], now, p))
		}
		fmt.Fprintln(w, b.String())
	}
}

// logLine is a node's text: mark, id, label, codon/run (and retry),
// short sha, kind, age, the state when it is not ok, and ← HEAD.
func logLine(n timeline.Node, now time.Time, p palette) string {
	r := printableRecord(n.Record)
	label := r.Label
	if label == "" {
		label = r.CodonName
	}
	if label == "" {
		label = "—"
	}
	where := "—"
	switch {
	case r.CodonID != "":
		where = r.CodonID + "/" + r.RunID
	case r.RunID != "":
		where = "run " + r.RunID
	}
	if r.Attempt > 0 {
		where += fmt.Sprintf(" (retry %d)", r.Attempt)
	}
	line := fmt.Sprintf("%s %s %s   %s", p.paint(kindColour(r.Kind), mark(r.Kind)), p.paint(sgrID, fmt.Sprintf("%-4s", r.ID)), label,
		p.paint(sgrDim, strings.Join([]string{where, orDash(short(r.SHA)), string(r.Kind), age(now.Sub(r.Time))}, " · ")))
	if r.State != ckpt.StateOK {
		state := string(r.State)
		if r.Error != "" {
			state += ": " + r.Error
		}
		if r.Pruned() {
			if r.PrunedAt != nil {
				state += " " + age(now.Sub(*r.PrunedAt))
			}
			if r.PrunedBy != "" {
				state += " by " + r.PrunedBy
			}
		}
		sgr := sgrAmber
		switch r.State {
		case ckpt.StateFailed:
			sgr = sgrRed
		case ckpt.StatePruned:
			sgr = sgrDim
		}
		line += " · " + p.paint(sgr, state)
	}
	if n.Head {
		line += "  " + p.paint(sgrHead, restore.HeadMark)
	}
	return line
}
