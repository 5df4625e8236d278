// Package ui is the panel: a small web page, embedded in the binary, that
// shows the workspaces a viewer may see, a workspace's timeline (the graph
// of `cairn log`), a checkpoint's files and diffs, and restores one through
// its dry-run plan (docs/operating.md, "The panel").
//
// The daemon serves the page under /ui/ on its socket (Handler); every
// fact on it comes from the socket API, so the socket's authorisation
// applies unchanged. `cairn ui` puts it on a loopback port behind a Gate.
package ui

import (
	"bytes"
	"embed"
	"encoding/json"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/restore/ckpt"
	"github.com/cairn-dev/cairn/restore/timeline"
)

//go:embed assets
var assets embed.FS

// Prefix is where the panel lives.
const Prefix = "/ui/"

// Handler serves the panel under Prefix. socketAPI answers the socket API
// (/v1/...) for the same peer: the timeline is laid out from its /v1/list,
// asked with the request's own context, so what the peer may see is
// decided there.
func Handler(socketAPI http.Handler) http.Handler {
	files, _ := fs.Sub(assets, "assets")
	static := http.StripPrefix(Prefix, http.FileServerFS(files))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pageHeaders(w.Header())
		switch {
		case r.Method != http.MethodGet && r.Method != http.MethodHead:
			writeError(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "the panel's pages are read only")
		case r.URL.Path == Prefix+"timeline":
			serveTimeline(w, r, socketAPI)
		case r.URL.Path == Prefix+"index.html":
			// FileServer would redirect it to the folder; the folder is the page.
			http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
		default:
			static.ServeHTTP(w, r)
		}
	})
}

// pageHeaders keep the panel in its own origin: no framing, no scripts or
// styles from anywhere else, no referrer carrying a URL out.
func pageHeaders(h http.Header) {
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
}

func writeError(w http.ResponseWriter, code int, errCode, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(api.Error{Code: errCode, Message: msg})
}

// Timeline is the answer of GET /ui/timeline?workspace=DIR[&all=1][&limit=N]:
// the graph `cairn log` draws, row by row, ready to show.
type Timeline struct {
	Workspace string          `json:"workspace"`
	Head      string          `json:"head,omitempty"` // the id marked ← HEAD
	Rows      []Row           `json:"rows"`
	Nodes     []Node          `json:"nodes"` // newest first
	Edges     []timeline.Edge `json:"edges"`
}

// Row is one line of the graph: the lanes left of the node's sign, the
// sign, the lanes right of it. A row of lanes only (a join, a lane
// leaving) has Node -1 and everything in Lanes.
type Row struct {
	Lanes string `json:"lanes"`
	Sign  string `json:"sign,omitempty"`
	After string `json:"after,omitempty"`
	Node  int    `json:"node"`
}

// Node is one checkpoint of the graph with the words `cairn log` prints.
type Node struct {
	timeline.Node
	Mark   string `json:"mark"`   // the listing's mark: ✔ completed, ⤿ pre-restore, …
	Sign   string `json:"sign"`   // ● in a run, ○ outside runs, × a failed seal
	Title  string `json:"title"`  // the label, else the codon's name, else —
	Where  string `json:"where"`  // codon/run (retry n), run R, or —
	Usable bool   `json:"usable"` // a restore may use it
}

func serveTimeline(w http.ResponseWriter, r *http.Request, socketAPI http.Handler) {
	q := r.URL.Query()
	opts := timeline.Options{All: q.Get("all") != ""}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, "BAD_REQUEST", "limit: want 0 (all) or more")
			return
		}
		opts.Limit = n
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, api.PathPrefix+"list?"+url.Values{"workspace": {q.Get("workspace")}}.Encode(), nil)
	if err != nil {
		writeError(w, http.StatusBadRequest, "BAD_REQUEST", err.Error())
		return
	}
	var rec recorder
	socketAPI.ServeHTTP(&rec, req)
	if rec.code != http.StatusOK {
		// The socket's refusal, as it gave it.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rec.code)
		_, _ = w.Write(rec.body.Bytes())
		return
	}
	var l api.List
	if err := json.Unmarshal(rec.body.Bytes(), &l); err != nil {
		writeError(w, http.StatusBadGateway, "BAD_ANSWER", "the daemon's list is not valid JSON: "+err.Error())
		return
	}
	opts.Head = l.Head
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(Layout(l, opts))
}

// Layout lays out a listing as the panel shows it.
func Layout(l api.List, opts timeline.Options) Timeline {
	g := timeline.Layout(l.Records, opts)
	out := Timeline{Workspace: l.Workspace, Head: opts.Head, Rows: []Row{}, Nodes: []Node{}, Edges: g.Edges}
	if out.Edges == nil {
		out.Edges = []timeline.Edge{}
	}
	for _, n := range g.Nodes {
		out.Nodes = append(out.Nodes, Node{Node: n, Mark: Mark(n.Kind), Sign: sign(n.Record), Title: title(n.Record), Where: where(n.Record), Usable: n.Usable()})
	}
	for _, row := range g.Rows {
		r := Row{Node: row.Node}
		before, after, dot := row.Text()
		if dot {
			r.Lanes, r.Sign, r.After = before, sign(g.Nodes[row.Node].Record), after
		} else {
			r.Lanes = before
		}
		out.Rows = append(out.Rows, r)
	}
	return out
}

// Mark is the listing's mark of a kind (as `cairn list` prints it).
func Mark(k ckpt.Kind) string { return timeline.Mark(k) }

func sign(r ckpt.Record) string { return timeline.Sign(r) }

func title(r ckpt.Record) string {
	switch {
	case r.Label != "":
		return r.Label
	case r.CodonName != "":
		return r.CodonName
	}
	return "—"
}

func where(r ckpt.Record) string {
	w := "—"
	switch {
	case r.CodonID != "":
		w = r.CodonID + "/" + r.RunID
	case r.RunID != "":
		w = "run " + r.RunID
	}
	if r.Attempt > 0 {
		w += " (retry " + strconv.Itoa(r.Attempt) + ")"
	}
	return w
}

// recorder keeps the answer of an in-process request to the socket API.
type recorder struct {
	h    http.Header
	code int
	body bytes.Buffer
}

func (r *recorder) Header() http.Header {
	if r.h == nil {
		r.h = http.Header{}
	}
	return r.h
}

func (r *recorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(b)
}
