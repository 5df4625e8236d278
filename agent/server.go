package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/snapshot"
)

// server is the daemon's HTTP API on its Unix socket.
type server struct {
	http *http.Server
	ln   net.Listener
	path string
	keep bool // the socket file is not ours to remove
	done chan struct{}
}

// listen creates the socket safely: a live daemon on the path is refused, a
// stale socket file replaced, the folder and modes set deliberately.
func (d *Daemon) listen(ctx context.Context) (*server, error) {
	path := d.SocketPath()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("socket folder: %w", err)
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return nil, fmt.Errorf("a daemon already answers on %s", path)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("%s exists and is not a socket; not replacing it", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove stale socket: %w", err)
		}
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	// Every local user may connect; each request is authorised on its own.
	if err := os.Chmod(path, 0o666); err != nil {
		ln.Close()
		return nil, err
	}
	return d.serve(ctx, ln, path)
}

// maxConnsPerUser caps the connections one uid other than root holds open at
// once, so one user cannot take the descriptors every other user needs.
var maxConnsPerUser = 64

// serve answers the API on ln.
func (d *Daemon) serve(ctx context.Context, ln net.Listener, path string) (*server, error) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) {
		uid, ok := peerOf(r)
		if !ok {
			writeError(w, http.StatusForbidden, "FORBIDDEN", "unknown peer credentials")
			return
		}
		writeJSON(w, http.StatusOK, d.statusFor(r.Context(), uid))
	})
	mux.HandleFunc("POST /v1/checkpoint", d.handleCheckpoint)
	d.routes(mux)
	if d.opts.Worker {
		mux.HandleFunc("POST "+assignPath, d.handleAssign)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "NOT_FOUND", fmt.Sprintf("no such endpoint: %s %s", r.Method, r.URL.Path))
	})
	capped := newCapListener(ln, maxConnsPerUser, d.log)
	s := &server{ln: capped, path: path, done: make(chan struct{}),
		http: &http.Server{
			Handler:           versioned(d.route(mux)),
			ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout:       30 * time.Second,
			IdleTimeout:       60 * time.Second,
			BaseContext:       func(net.Listener) context.Context { return ctx },
			// Who is asking is decided once per connection, from the kernel.
			ConnContext: func(ctx context.Context, c net.Conn) context.Context {
				if pc, ok := c.(*peerConn); ok && pc.known {
					return context.WithValue(ctx, peerKey{}, pc.uid)
				}
				return ctx
			},
		}}
	go func() {
		defer close(s.done)
		if err := s.http.Serve(capped); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.log.Error().Err(err).Msg("socket server stopped")
		}
	}()
	return s, nil
}

func (s *server) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = s.http.Shutdown(ctx)
	<-s.done
	if !s.keep {
		_ = os.Remove(s.path)
	}
}

// versioned stamps the API version on every answer.
func versioned(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(api.VersionHeader, api.Version)
		h.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, errCode, msg string) {
	writeJSON(w, code, api.Error{Code: errCode, Message: msg})
}

type peerKey struct{}

// maxBody caps every request body.
const maxBody = 1 << 20

// authorize answers whether the peer may act on dir: root, or the uid owning
// it (as discovery read it from an open descriptor). Unknown credentials fail
// closed; a refusal says nothing about the workspace.
func (d *Daemon) authorize(r *http.Request, dir string) bool {
	uid, ok := peerOf(r)
	return ok && d.mayAct(uid, dir)
}

func (d *Daemon) handleCheckpoint(w http.ResponseWriter, r *http.Request) {
	var req api.CheckpointRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "BAD_REQUEST", "request body is not a valid checkpoint request: "+err.Error())
		return
	}
	if err := checkPath(req.Workspace); err != nil {
		writeError(w, http.StatusBadRequest, "BAD_WORKSPACE", err.Error())
		return
	}
	ws := d.lookup(req.Workspace)
	if ws == nil || !d.authorize(r, ws.dir) {
		writeError(w, http.StatusForbidden, "FORBIDDEN", "not a workspace you may act on: "+req.Workspace)
		return
	}
	if ws.rolling.Load() {
		writeBlocked(w, "checkpoint")
		return
	}
	sreq := snapshot.SealRequest{Kind: snapshot.KindManual, Label: req.Label, RunID: req.RunID}
	if req.Status != "" {
		sreq.Kind, sreq.CodonID, sreq.CodonName = snapshot.Kind(req.Status), req.CodonID, req.CodonName
		if !sreq.Kind.IsLifecycle() {
			writeError(w, http.StatusBadRequest, "BAD_REQUEST", "status must be rig-setup, completed, error, skipped or exit")
			return
		}
	}
	rec, err := ws.checkpoint(r.Context(), sreq)
	if err == nil {
		writeJSON(w, http.StatusOK, toAPIRecord(rec))
		return
	}
	// Every failure answers {code, message}; a seal recorded as failed
	// carries its record too, so the reason survives the socket.
	code, errCode := http.StatusInternalServerError, "SEAL_FAILED"
	switch {
	case errors.Is(err, errWorkspaceGone):
		code, errCode = http.StatusGone, "WORKSPACE_GONE"
	case errors.Is(err, errNotServing), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		code, errCode = http.StatusServiceUnavailable, "NOT_READY"
	}
	e := api.Error{Code: errCode, Message: err.Error()}
	if rec.ID != "" {
		ar := toAPIRecord(rec)
		e.Record = &ar
	}
	writeJSON(w, code, e)
}

// lookup finds a workspace this process serves by its exact path.
func (d *Daemon) lookup(dir string) *workspace {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.workspaces[dir]
}

func toAPIRecord(r snapshot.Record) api.Record {
	conv := func(v []snapshot.PathIssue) []api.PathIssue {
		var out []api.PathIssue
		for _, p := range v {
			out = append(out, api.PathIssue{Path: p.Path, Reason: p.Reason})
		}
		return out
	}
	return api.Record{ID: r.ID, SHA: r.SHA, Parent: r.Parent, Kind: string(r.Kind), Label: r.Label, CodonID: r.CodonID,
		CodonName: r.CodonName, RunID: r.RunID, Attempt: r.Attempt, Ref: r.Ref, Time: r.Time, DurationMS: r.DurationMS,
		Changed: r.Changed, Added: r.Added, Removed: r.Removed, State: string(r.State), Issues: conv(r.Issues),
		Skipped: conv(r.Skipped), Error: r.Error, Adopted: r.Adopted, Recovered: r.Recovered}
}
