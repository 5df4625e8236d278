// Package timeline lays out a workspace's checkpoints as a graph for
// `cairn log` and the panel: one row per checkpoint, newest first, and a lane (a column)
// per open line of history. Pure: ledger records in, rows out.
//
// An edge is a record's ledger parent (docs/cairn-formats.md, "The ledger"),
// never a commit's git parents: a checkpoint outside a run may be a commit
// without a git parent whose logical parent only the ledger keeps.
package timeline

import (
	"cmp"
	"slices"
	"strings"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// Options choose what the graph shows.
type Options struct {
	All   bool   // also show pruned records (`list --all`)
	Limit int    // only the newest Limit nodes; 0 or less: all
	Head  string // the ledger id the work tree is at (← HEAD), if any
}

// Node is one checkpoint drawn, with the column its row puts it in.
type Node struct {
	ckpt.Record
	Column int  `json:"column"`
	Head   bool `json:"head,omitempty"`
}

// Why an edge's parent is not among the nodes.
const (
	HiddenPruned  = "pruned"  // a retention policy pruned it (shown with --all)
	HiddenLimit   = "limit"   // it lies beyond --limit
	HiddenOutside = "outside" // the ledger lacks it: the store's first commit, or one the runtime made itself
)

// Edge joins a node to its parent.
type Edge struct {
	From   string `json:"from"`             // the child's ledger id
	To     string `json:"to,omitempty"`     // the parent's ledger id; empty when the ledger lacks the parent
	Parent string `json:"parent"`           // the parent's full SHA
	Hidden string `json:"hidden,omitempty"` // why the parent is not drawn (Hidden*); empty when it is
}

// Glyph is what one column of a row shows.
type Glyph uint8

const (
	Blank    Glyph = iota // no lane
	Line                  // │ a lane passes
	Dot                   // the row's node (the renderer picks its sign)
	Leave                 // ~ the lane leaves the graph: its parent is not drawn
	Fork                  // ├ the lane the others join: they forked from the node below
	Join                  // ╯ the rightmost lane joining
	JoinMore              // ┴ a lane joining, with more joining to its right
	Cross                 // ┼ a lane passing under a join
	Across                // ─ an empty column a join passes over
)

var glyphs = [...]string{Blank: " ", Line: "│", Dot: "●", Leave: "~", Fork: "├", Join: "╯", JoinMore: "┴", Cross: "┼", Across: "─"}

func (g Glyph) String() string { return glyphs[g] }

// Row is one line of the drawing: a node's, or one of lanes only (a join,
// a lane leaving the graph).
type Row struct {
	Node   int     // index in Graph.Nodes; -1 for a row of lanes only
	Glyphs []Glyph // one per column, without trailing blanks
}

// Joined reports whether the gap after column c is crossed by a join (─).
func (r Row) Joined(c int) bool {
	if c+1 >= len(r.Glyphs) {
		return false
	}
	switch r.Glyphs[c] {
	case Fork, JoinMore, Cross, Across:
		return true
	}
	return false
}

// Text draws the row's lanes as the panel and `cairn log` show them, a gap
// between columns (─ where a join crosses it): before is everything left of
// the node's column, after everything right of it, each with its gaps; the
// renderer puts the node's sign between them. A row of lanes only (no
// node) is all in before, with dot false.
func (r Row) Text() (before, after string, dot bool) {
	var b strings.Builder
	for c, gl := range r.Glyphs {
		if gl == Dot {
			before, dot = b.String(), true
			b.Reset()
		} else {
			b.WriteString(gl.String())
		}
		if c+1 < len(r.Glyphs) {
			if r.Joined(c) {
				b.WriteString("─")
			} else {
				b.WriteString(" ")
			}
		}
	}
	if !dot {
		return b.String(), "", false
	}
	return before, b.String(), true
}

// Graph is the laid-out timeline.
type Graph struct {
	Nodes []Node // newest first
	Edges []Edge // one per node with a parent, in node order
	Rows  []Row
}

const free = -1 // a column no lane holds

// Layout lays out the ledger recs (any order). Nodes are the records opts
// keep, newest (highest ledger number) first. Each node sits in the column
// of the lanes that wait for it (the leftmost, when several children wait:
// the others join it in a row above it), or, when none does, in the first
// free column. Its lane then waits for its parent, or ends: with a Leave
// row when the parent is a ledger record not drawn, silently when the
// ledger lacks the parent (the history cairn knows starts there).
func Layout(recs []ckpt.Record, opts Options) Graph {
	all := slices.Clone(recs)
	slices.SortStableFunc(all, func(a, b ckpt.Record) int { return cmp.Compare(num(b), num(a)) })

	var g Graph
	index := map[string]int{} // ledger id → node index
	for _, r := range all {
		if r.Pruned() && !opts.All {
			continue
		}
		if opts.Limit > 0 && len(g.Nodes) == opts.Limit {
			break
		}
		index[r.ID] = len(g.Nodes)
		g.Nodes = append(g.Nodes, Node{Record: r, Head: opts.Head != "" && r.ID == opts.Head})
	}

	bySHA := map[string][]ckpt.Record{} // records of each commit, newest first
	for _, r := range all {
		if r.SHA != "" && r.ID != "" {
			bySHA[r.SHA] = append(bySHA[r.SHA], r)
		}
	}
	parent := make([]int, len(g.Nodes)) // node index of each node's parent, or free
	leaves := make([]bool, len(g.Nodes))
	for i, n := range g.Nodes {
		parent[i] = free
		if n.Parent == "" {
			continue
		}
		e := Edge{From: n.ID, Parent: n.Parent}
		p, ok := parentOf(bySHA, n.Record)
		switch j, shown := index[p.ID]; {
		case !ok:
			e.Hidden = HiddenOutside
		case shown:
			e.To, parent[i] = p.ID, j
		default:
			e.To, e.Hidden, leaves[i] = p.ID, HiddenLimit, true
			if p.Pruned() && !opts.All {
				e.Hidden = HiddenPruned
			}
		}
		g.Edges = append(g.Edges, e)
	}

	var cols []int // the node index each column's lane waits for, or free
	rest := -1     // the column of a lane that ended silently in the row above
	for i := range g.Nodes {
		var mine []int
		for c, w := range cols {
			if w == i {
				mine = append(mine, c)
			}
		}
		var col int
		if len(mine) > 0 {
			col = mine[0]
		} else {
			col = firstFree(cols, rest)
			for len(cols) <= col {
				cols = append(cols, free)
			}
		}
		if len(mine) > 1 {
			g.Rows = append(g.Rows, joinRow(cols, mine))
			for _, c := range mine[1:] {
				cols[c] = free
			}
		}
		cols[col] = i
		g.Rows = append(g.Rows, lanes(cols, i, col, Dot))
		g.Nodes[i].Column = col
		if leaves[i] {
			g.Rows = append(g.Rows, lanes(cols, -1, col, Leave))
		}
		cols[col], rest = parent[i], -1
		if parent[i] == free && !leaves[i] {
			rest = col
		}
		for len(cols) > 0 && cols[len(cols)-1] == free {
			cols = cols[:len(cols)-1]
		}
	}
	return g
}

// firstFree is the first column no lane holds, other than rest (a new node
// right below a lane's end would read as its parent), or a new column.
func firstFree(cols []int, rest int) int {
	for c, w := range cols {
		if w == free && c != rest {
			return c
		}
	}
	if len(cols) == rest {
		return rest + 1
	}
	return len(cols)
}

// lanes is a row showing g in column col and a Line in every other column a
// lane holds.
func lanes(cols []int, node, col int, g Glyph) Row {
	r := Row{Node: node, Glyphs: make([]Glyph, len(cols))}
	for c, w := range cols {
		switch {
		case c == col:
			r.Glyphs[c] = g
		case w != free:
			r.Glyphs[c] = Line
		}
	}
	return r.trim()
}

// joinRow draws the lanes in mine[1:] joining the lane in mine[0].
func joinRow(cols, mine []int) Row {
	first, last := mine[0], mine[len(mine)-1]
	r := Row{Node: -1, Glyphs: make([]Glyph, len(cols))}
	for c, w := range cols {
		switch {
		case c == first:
			r.Glyphs[c] = Fork
		case c == last:
			r.Glyphs[c] = Join
		case c > first && c < last && slices.Contains(mine, c):
			r.Glyphs[c] = JoinMore
		case c > first && c < last && w != free:
			r.Glyphs[c] = Cross
		case c > first && c < last:
			r.Glyphs[c] = Across
		case w != free:
			r.Glyphs[c] = Line
		}
	}
	return r.trim()
}

func (r Row) trim() Row {
	for len(r.Glyphs) > 0 && r.Glyphs[len(r.Glyphs)-1] == Blank {
		r.Glyphs = r.Glyphs[:len(r.Glyphs)-1]
	}
	return r
}

// parentOf finds the ledger record of r's parent commit: of the records of
// that commit older than r, the newest (restore.HeadMarker also prefers the
// newest). Older only, so a parent is always drawn below its child.
func parentOf(bySHA map[string][]ckpt.Record, r ckpt.Record) (ckpt.Record, bool) {
	n := num(r)
	for _, p := range bySHA[r.Parent] { // newest first
		if num(p) < n {
			return p, true
		}
	}
	return ckpt.Record{}, false
}

// num is a record's ledger number; a record without one sorts last.
func num(r ckpt.Record) int {
	if n, ok := ckpt.LedgerNum(r.ID); ok {
		return n
	}
	return -1
}

// Mark is the listing's mark of a kind, as `cairn list`, `cairn log` and
// the panel print it (README.md, "Commands").
func Mark(k ckpt.Kind) string {
	switch k {
	case ckpt.KindBaseline:
		return "─"
	case ckpt.KindCompleted:
		return "✔"
	case ckpt.KindError:
		return "✗"
	case ckpt.KindSkipped:
		return "⊘"
	case ckpt.KindExit:
		return "⏻"
	case ckpt.KindRigSetup:
		return "◆"
	case ckpt.KindAutosave:
		return "·"
	case ckpt.KindPreRestore:
		return "⤿"
	case ckpt.KindManual:
		return "+"
	}
	return "?"
}

// Sign is a node's sign in its lane: ● a checkpoint of a run, ○ one
// outside runs (autosave, manual, pre-restore, baseline), × a failed seal
// (no commit).
func Sign(r ckpt.Record) string {
	switch {
	case r.State == ckpt.StateFailed:
		return "×"
	case r.RunID != "":
		return "●"
	}
	return "○"
}
