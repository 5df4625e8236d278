package timeline

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// rec is a hand-made record: id cN, SHA "sN", parent "sM" (or "" / any SHA).
func rec(id, parent string, kind ckpt.Kind) ckpt.Record {
	return ckpt.Record{ID: id, SHA: "s" + id[1:], Parent: parent, Kind: kind, State: ckpt.StateOK}
}

func pruned(r ckpt.Record) ckpt.Record { r.State = ckpt.StatePruned; return r }

// draw renders g as `cairn log` lays it out, with each node's id after it.
func draw(t *testing.T, g Graph) string {
	t.Helper()
	var b strings.Builder
	for _, r := range g.Rows {
		line, after, dot := r.Text()
		if dot != (r.Node >= 0) {
			t.Fatalf("row %+v: Text says dot %v", r, dot)
		}
		if dot {
			line += Dot.String() + after
		}
		if r.Node >= 0 {
			line += " " + g.Nodes[r.Node].ID
			if g.Nodes[r.Node].Head {
				line += " ← HEAD"
			}
		}
		b.WriteString(strings.TrimRight(line, " ") + "\n")
	}
	return b.String()
}

func TestTimelineLayout(t *testing.T) {
	root := "s0" // a commit the ledger lacks: the store's first
	for _, tc := range []struct {
		name string
		recs []ckpt.Record // any order
		opts Options
		want string
	}{
		{"empty", nil, Options{}, ""},
		{"one run, newest first whatever the input order", []ckpt.Record{
			rec("c1", root, ckpt.KindRigSetup), rec("c3", "s2", ckpt.KindCompleted), rec("c2", "s1", ckpt.KindCompleted),
		}, Options{Head: "c3"}, `
● c3 ← HEAD
● c2
● c1
`},
		{"an autosave hangs off the checkpoint it followed", []ckpt.Record{
			rec("c1", root, ckpt.KindCompleted), rec("c2", "s1", ckpt.KindAutosave), rec("c3", "s1", ckpt.KindCompleted),
			rec("c4", "s3", ckpt.KindAutosave),
		}, Options{}, `
● c4
● c3
│ ● c2
├─╯
● c1
`},
		{"a rollback: the continuation, the pre-restore, the abandoned line", []ckpt.Record{
			rec("c1", root, ckpt.KindCompleted), rec("c2", "s1", ckpt.KindCompleted), rec("c3", "s2", ckpt.KindCompleted),
			rec("c4", "s3", ckpt.KindPreRestore), rec("c5", "s1", ckpt.KindCompleted), rec("c6", "s5", ckpt.KindCompleted),
		}, Options{}, `
● c6
● c5
│ ● c4
│ ● c3
│ ● c2
├─╯
● c1
`},
		{"three children of one node join it in one row", []ckpt.Record{
			rec("c1", root, ckpt.KindCompleted), rec("c2", "s1", ckpt.KindAutosave), rec("c3", "s1", ckpt.KindAutosave),
			rec("c4", "s1", ckpt.KindCompleted),
		}, Options{}, `
● c4
│ ● c3
│ │ ● c2
├─┴─╯
● c1
`},
		{"a join passes over a free column", []ckpt.Record{
			rec("c1", root, ckpt.KindCompleted), rec("c2", "s1", ckpt.KindCompleted),
			rec("c3", root, ckpt.KindManual), // a second line of history
			rec("c4", "s2", ckpt.KindAutosave), rec("c5", "s3", ckpt.KindManual), rec("c6", "s2", ckpt.KindAutosave),
			rec("c7", "s2", ckpt.KindCompleted),
		}, Options{}, `
● c7
│ ● c6
│ │ ● c5
│ │ │ ● c4
│ │ ● │ c3
├─┴───╯
● c2
● c1
`},
		{"a join passes over a lane that goes on", []ckpt.Record{
			rec("c1", root, ckpt.KindManual), rec("c2", root, ckpt.KindCompleted), // two lines of history
			rec("c3", "s2", ckpt.KindAutosave), rec("c4", "s1", ckpt.KindManual), rec("c5", "s2", ckpt.KindCompleted),
		}, Options{}, `
● c5
│ ● c4
│ │ ● c3
├─┼─╯
● │ c2
  ● c1
`},
		{"failed seals and commits outside the ledger start lanes of their own", []ckpt.Record{
			rec("c1", root, ckpt.KindCompleted), {ID: "c2", Kind: ckpt.KindCompleted, State: ckpt.StateFailed},
			rec("c3", "s1", ckpt.KindCompleted), rec("c4", "runtime", ckpt.KindManual),
		}, Options{}, `
● c4
  ● c3
● │ c2
  ● c1
`},
		{"pruned parents leave the graph; with --all they are drawn", []ckpt.Record{
			rec("c1", root, ckpt.KindCompleted), pruned(rec("c2", "s1", ckpt.KindAutosave)), rec("c3", "s2", ckpt.KindAutosave),
			rec("c4", "s1", ckpt.KindCompleted),
		}, Options{}, `
● c4
│ ● c3
│ ~
● c1
`},
		{"with --all", []ckpt.Record{
			rec("c1", root, ckpt.KindCompleted), pruned(rec("c2", "s1", ckpt.KindAutosave)), rec("c3", "s2", ckpt.KindAutosave),
			rec("c4", "s1", ckpt.KindCompleted),
		}, Options{All: true}, `
● c4
│ ● c3
│ ● c2
├─╯
● c1
`},
		{"--limit: lanes to older nodes leave the graph", []ckpt.Record{
			rec("c1", root, ckpt.KindCompleted), rec("c2", "s1", ckpt.KindCompleted), rec("c3", "s1", ckpt.KindAutosave),
			rec("c4", "s2", ckpt.KindCompleted),
		}, Options{Limit: 2}, `
● c4
~
● c3
~
`},
		{"of several records of the parent's commit, the newest older than the child", []ckpt.Record{
			rec("c1", root, ckpt.KindCompleted), {ID: "c2", SHA: "s1", Parent: root, Kind: ckpt.KindRigSetup, State: ckpt.StateOK},
			rec("c3", "s1", ckpt.KindCompleted), {ID: "c4", SHA: "s1", Parent: root, Kind: ckpt.KindManual, State: ckpt.StateOK},
		}, Options{}, `
● c4
  ● c3
  ● c2
● c1
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := Layout(tc.recs, tc.opts)
			if got, want := draw(t, g), strings.TrimPrefix(tc.want, "\n"); got != want {
				t.Errorf("got\n%s\nwant\n%s", got, want)
			}
		})
	}
}

// TestTimelineEdges: every node with a parent has one edge, saying which
// record it leads to and, when that is not drawn, why.
func TestTimelineEdges(t *testing.T) {
	recs := []ckpt.Record{
		rec("c1", "s0", ckpt.KindCompleted), pruned(rec("c2", "s1", ckpt.KindAutosave)), rec("c3", "s2", ckpt.KindAutosave),
		rec("c4", "s1", ckpt.KindCompleted), rec("c5", "s4", ckpt.KindCompleted), {ID: "c6", State: ckpt.StateFailed},
	}
	g := Layout(recs, Options{Limit: 4, Head: "c4"})
	want := []Edge{
		{From: "c5", To: "c4", Parent: "s4"},
		{From: "c4", To: "c1", Parent: "s1", Hidden: HiddenLimit},
		{From: "c3", To: "c2", Parent: "s2", Hidden: HiddenPruned},
	}
	if !reflect.DeepEqual(g.Edges, want) {
		t.Errorf("edges %+v\nwant %+v", g.Edges, want)
	}
	var ids []string
	for _, n := range g.Nodes {
		ids = append(ids, n.ID)
		if n.Head != (n.ID == "c4") {
			t.Errorf("%s: head %v", n.ID, n.Head)
		}
	}
	if !reflect.DeepEqual(ids, []string{"c6", "c5", "c4", "c3"}) {
		t.Errorf("nodes %v", ids)
	}
	g = Layout(recs, Options{All: true})
	if e := g.Edges[len(g.Edges)-1]; e != (Edge{From: "c1", Parent: "s0", Hidden: HiddenOutside}) {
		t.Errorf("edge to a commit the ledger lacks: %+v", e)
	}
}

// BenchmarkLayout10k lays out 10,000 chained autosaves, the shape a store
// that autosaves all week has (parents were once found by a scan per node).
func BenchmarkLayout10k(b *testing.B) {
	recs := make([]ckpt.Record, 10000)
	for i := range recs {
		recs[i] = ckpt.Record{ID: fmt.Sprintf("c%d", i+1), SHA: fmt.Sprintf("%040x", i+1), Kind: ckpt.KindAutosave}
		if i > 0 {
			recs[i].Parent = recs[i-1].SHA
		}
	}
	for b.Loop() {
		if g := Layout(recs, Options{}); len(g.Nodes) != len(recs) {
			b.Fatal(len(g.Nodes))
		}
	}
}
