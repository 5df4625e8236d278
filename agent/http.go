package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/checkpoints"
	"github.com/cairn-dev/cairn/agent/ui"
	"github.com/cairn-dev/cairn/agent/workerproto"
	"github.com/cairn-dev/cairn/restore"
	"github.com/cairn-dev/cairn/restore/ckpt"
	"github.com/cairn-dev/cairn/snapshot"
)

// The daemon's HTTP layer (docs/cairn-formats.md, "Socket API in brief"):
// every handler, the request decoding and path checks, and the one mapping
// of the daemon's typed errors to a status and an error code (errorStatus).
// The daemon's logic answers domain results and errors; only the HTTP
// layer knows HTTP: this file, http_workers.go (forwarding to a worker, a
// worker's assignment), http_autodev.go (the autodev layout's list and
// restore), http_metrics.go (GET /metrics, on the socket and on
// metrics_listen) and server.go (the socket's server).

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
	if !decode(w, r, &req) {
		return
	}
	ws, ok := d.servedFor(w, r, req.Workspace)
	if !ok {
		return
	}
	if ws.rolling.Load() {
		writeBlocked(w, "checkpoint")
		return
	}
	sreq := snapshot.SealRequest{Kind: ckpt.KindManual, Label: req.Label, RunID: req.RunID}
	if req.Status != "" {
		sreq.Kind, sreq.CodonID, sreq.CodonName = ckpt.Kind(req.Status), req.CodonID, req.CodonName
		if !sreq.Kind.IsLifecycle() {
			writeError(w, http.StatusBadRequest, "BAD_REQUEST", "status must be rig-setup, completed, error, skipped or exit")
			return
		}
	}
	rec, err := ws.checkpoint(r.Context(), sreq)
	if err == nil {
		writeJSON(w, http.StatusOK, rec)
		return
	}
	// Every failure answers {code, message}; a seal recorded as failed
	// carries its record too, so the reason survives the socket.
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		err = notReadyError{err} // the workspace stopped serving under the seal
	}
	code, errCode := errorStatus(err, codeSealFailed)
	e := api.Error{Code: errCode, Message: err.Error()}
	if rec.ID != "" {
		ar := rec
		e.Record = &ar
	}
	writeJSON(w, code, e)
}

// routes adds every endpoint of the socket API to the mux.
func (d *Daemon) routes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/status", d.handleStatus)
	mux.HandleFunc("POST /v1/checkpoint", d.handleCheckpoint)
	mux.HandleFunc("POST /v1/command", d.handleCommand)
	mux.HandleFunc("POST /v1/restore", d.handleRestore)
	mux.HandleFunc("POST /v1/undo", d.handleUndo)
	mux.HandleFunc("GET /v1/list", d.handleList)
	mux.HandleFunc("GET /v1/diff", d.handleDiff)
	mux.HandleFunc("GET /v1/show", d.handleShow)
	mux.HandleFunc("GET /v1/verify", d.handleVerify)
	mux.HandleFunc("POST /v1/watch", d.handleWatch)
	mux.HandleFunc("POST /v1/unwatch", d.handleUnwatch)
	mux.HandleFunc("POST /v1/pin", d.handlePin)
	mux.HandleFunc("POST /v1/unpin", d.handlePin)
	mux.HandleFunc("POST /v1/gc", d.handleGC)
	mux.HandleFunc("POST /v1/prune", d.handlePrune)
	mux.HandleFunc("GET /v1/events", d.handleEvents)
	mux.Handle("GET "+ui.Prefix, ui.Handler(d.route(mux))) // the panel (README.md, "The panel")
	mux.HandleFunc("GET /metrics", d.handleMetrics)
	if d.opts.Worker {
		mux.HandleFunc("POST "+workerproto.PathAssign, d.handleAssign)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "NOT_FOUND", fmt.Sprintf("no such endpoint: %s %s", r.Method, r.URL.Path))
	})
}

func (d *Daemon) handleStatus(w http.ResponseWriter, r *http.Request) {
	uid, ok := peerOf(r)
	if !ok {
		writeError(w, http.StatusForbidden, "FORBIDDEN", "unknown peer credentials")
		return
	}
	writeJSON(w, http.StatusOK, d.statusFor(r.Context(), uid))
}

// decode reads a capped JSON body into v; it answers the error itself.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("trailing data after the JSON object")
	}
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, "BODY_TOO_LARGE", fmt.Sprintf("request body is larger than %d bytes", maxBody))
			return false
		}
		writeError(w, http.StatusBadRequest, "BAD_REQUEST", "request body is not valid JSON for this endpoint: "+err.Error())
		return false
	}
	return true
}

// checkPath refuses a workspace path that is not absolute and clean. It is
// lexical only: resolving links as root would tell a user what exists in
// folders they cannot read. Workspaces are only ever found by a walk that
// never follows a link, so a path through one matches none.
func checkPath(p string) error {
	switch {
	case p == "":
		return errors.New("no workspace given")
	case !filepath.IsAbs(p):
		return fmt.Errorf("workspace path %q is not absolute", p)
	case slices.Contains(strings.Split(filepath.ToSlash(p), "/"), ".."):
		return fmt.Errorf("workspace path %q contains '..'; give the real path", p)
	case filepath.Clean(p) != p || strings.Contains(p, "//"):
		return fmt.Errorf("workspace path %q is not clean; give the real path", p)
	case strings.ContainsRune(p, 0):
		return fmt.Errorf("workspace path %q contains a NUL byte", p)
	}
	return nil
}

// workspaceFor finds the workspace a request acts on and checks the peer
// may; it answers the refusal itself. A workspace that is not watched and
// one the peer may not act on get the same answer.
func (d *Daemon) workspaceFor(w http.ResponseWriter, r *http.Request, dir string) (*workspace, *snapshot.Store, bool) {
	ws, ok := d.servedFor(w, r, dir)
	if !ok {
		return nil, nil, false
	}
	if ws.set.Layout == layoutAutodev {
		answerError(w, errAutodevLayout, codeRestoreFailed)
		return nil, nil, false
	}
	st := ws.openStore()
	if st == nil {
		writeError(w, http.StatusServiceUnavailable, "NOT_READY", "the workspace's store is not open yet; see cairn status")
		return nil, nil, false
	}
	return ws, st, true
}

// servedFor is workspaceFor without the store: the checked, authorised
// workspace this process serves at dir, or the refusal answered.
func (d *Daemon) servedFor(w http.ResponseWriter, r *http.Request, dir string) (*workspace, bool) {
	if err := checkPath(dir); err != nil {
		writeError(w, http.StatusBadRequest, "BAD_WORKSPACE", err.Error())
		return nil, false
	}
	ws := d.lookup(dir)
	if ws == nil || !d.authorize(r, ws.dir) {
		writeError(w, http.StatusForbidden, "FORBIDDEN", "not a workspace you may act on: "+dir)
		return nil, false
	}
	return ws, true
}

func writeBlocked(w http.ResponseWriter, cmdType string) {
	writeJSON(w, http.StatusConflict, restore.RollbackBlocked(cmdType))
}

func (d *Daemon) handleCommand(w http.ResponseWriter, r *http.Request) {
	var cmd api.Command
	if !decode(w, r, &cmd) {
		return
	}
	var data api.RollbackData
	var list api.CheckpointListData
	if len(cmd.Data) > 0 && string(cmd.Data) != "null" {
		dec := json.NewDecoder(bytes.NewReader(cmd.Data))
		dec.DisallowUnknownFields()
		var err error
		if cmd.Type == api.CmdCheckpointList {
			err = dec.Decode(&list)
			data.Workspace = list.Workspace
		} else {
			err = dec.Decode(&data)
		}
		if err != nil {
			writeError(w, http.StatusBadRequest, "BAD_REQUEST", fmt.Sprintf("data of %s is not valid: %v", cmd.Type, err))
			return
		}
	}
	dir := cmd.Workspace
	if dir == "" {
		dir = data.Workspace
	}
	var t restore.Target
	switch cmd.Type {
	case api.CmdCheckpointList:
		ws, st, ok := d.workspaceFor(w, r, dir)
		if !ok {
			return
		}
		writeJSON(w, http.StatusOK, api.CommandReply{ID: cmd.ID, Type: cmd.Type, Data: checkpointList(ws, st, list.RunID)})
		return
	case api.CmdRollbackToCheckpoint:
		if data.CheckpointSHA == "" {
			writeError(w, http.StatusBadRequest, "BAD_REQUEST", "rollback.toCheckpoint needs data.checkpointSha")
			return
		}
		t = restore.BySHA(data.CheckpointSHA)
		t.Raw = data.CheckpointSHA
	case api.CmdRollbackToCodon:
		if data.CodonID == "" || data.CheckpointType == "" {
			writeError(w, http.StatusBadRequest, "BAD_REQUEST", "rollback.toCodon needs data.codonId and data.checkpointType")
			return
		}
		t = restore.ByCodon(data.CodonID, data.CheckpointType)
	case api.CmdRollbackToLastSucc:
		t = restore.ByLastSuccess()
	default:
		writeError(w, http.StatusBadRequest, "UNKNOWN_COMMAND", fmt.Sprintf("unknown command type %q", cmd.Type))
		return
	}
	ws, st, ok := d.workspaceFor(w, r, dir)
	if !ok {
		return
	}
	op := restore.Op{Target: t, Paths: data.Paths, DryRun: data.DryRun, Continue: true}
	res, err := d.restoreOn(ws, st, cmd.Type, op, data.AutoRestart)
	if err != nil {
		answerError(w, err, codeRestoreFailed)
		return
	}
	writeJSON(w, http.StatusOK, api.CommandReply{ID: cmd.ID, Type: cmd.Type, Data: res})
}

func (d *Daemon) handleRestore(w http.ResponseWriter, r *http.Request) {
	var req api.RestoreRequest
	if !decode(w, r, &req) {
		return
	}
	if d.autodevRestore(w, r, req.Workspace, req.Target, req.DryRun) {
		return
	}
	ws, st, ok := d.workspaceFor(w, r, req.Workspace)
	if !ok {
		return
	}
	t, err := restore.ParseTarget(req.Target)
	if err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_TARGET", err.Error())
		return
	}
	res, err := d.restoreOn(ws, st, "restore", restore.Op{Target: t, Paths: req.Paths, DryRun: req.DryRun, Continue: true}, false)
	if err != nil {
		answerError(w, err, codeRestoreFailed)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (d *Daemon) handleUndo(w http.ResponseWriter, r *http.Request) {
	var req api.UndoRequest
	if !decode(w, r, &req) {
		return
	}
	if d.autodevRestore(w, r, req.Workspace, "", req.DryRun) {
		return
	}
	ws, st, ok := d.workspaceFor(w, r, req.Workspace)
	if !ok {
		return
	}
	res, err := d.restoreOn(ws, st, "undo", restore.Op{Paths: req.Paths, DryRun: req.DryRun}, false)
	if err != nil {
		answerError(w, err, codeRestoreFailed)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// handlePin pins or unpins a checkpoint (README.md, "Retention").
func (d *Daemon) handlePin(w http.ResponseWriter, r *http.Request) {
	var req api.PinRequest
	if !decode(w, r, &req) {
		return
	}
	_, st, ok := d.workspaceFor(w, r, req.Workspace)
	if !ok {
		return
	}
	if req.Target == "" {
		writeError(w, http.StatusBadRequest, "INVALID_TARGET", "no checkpoint given to pin")
		return
	}
	res, err := checkpoints.Pin(r.Context(), st, req.Target, r.URL.Path == "/v1/unpin")
	if err != nil {
		answerError(w, err, codePinFailed)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// handlePrune applies retention and the size budget now (README, "Budgets
// and disk space"), with the workspace's settings.
func (d *Daemon) handlePrune(w http.ResponseWriter, r *http.Request) {
	var req api.PruneRequest
	if !decode(w, r, &req) {
		return
	}
	ws, st, ok := d.workspaceFor(w, r, req.Workspace)
	if !ok {
		return
	}
	opts := pruneOptions(ws.set)
	opts.DryRun = req.DryRun
	if req.MaxStoreSize > 0 {
		opts.MaxStoreSize = req.MaxStoreSize
	}
	res, err := Prune(r.Context(), st, opts, time.Now(), true)
	if err != nil {
		answerError(w, err, codePruneFailed)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (d *Daemon) handleList(w http.ResponseWriter, r *http.Request) {
	if d.autodevList(w, r) {
		return
	}
	ws, st, ok := d.workspaceFor(w, r, r.URL.Query().Get("workspace"))
	if !ok {
		return
	}
	recs, pos := ws.ledger(st)
	out := api.List{Workspace: ws.dir, Position: pos, Head: restore.HeadMarker(recs, pos), Records: []api.Record{}}
	for i := len(recs) - 1; i >= 0; i-- {
		out.Records = append(out.Records, recs[i])
	}
	writeJSON(w, http.StatusOK, out)
}

func (d *Daemon) handleDiff(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	_, st, ok := d.workspaceFor(w, r, q.Get("workspace"))
	if !ok {
		return
	}
	a, err := checkpoints.ResolveArg(r.Context(), st, q.Get("a"))
	if err != nil {
		answerError(w, err, codeRestoreFailed)
		return
	}
	out := api.Diff{A: a.SHA}
	if b := q.Get("b"); b != "" {
		rb, err := checkpoints.ResolveArg(r.Context(), st, b)
		if err != nil {
			answerError(w, err, codeRestoreFailed)
			return
		}
		out.B = rb.SHA
	}
	res, err := st.DiffWith(r.Context(), out.A, out.B, diffOptions(q))
	out.Stat, out.Patch, out.Files = res.Stat, res.Patch, res.Files
	if err != nil {
		writeError(w, http.StatusInternalServerError, "DIFF_FAILED", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (d *Daemon) handleShow(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	_, st, ok := d.workspaceFor(w, r, q.Get("workspace"))
	if !ok {
		return
	}
	rec, err := checkpoints.ResolveArg(r.Context(), st, q.Get("id"))
	if err != nil {
		answerError(w, err, codeRestoreFailed)
		return
	}
	out, err := checkpoints.ShowWith(r.Context(), st, rec, diffOptions(q))
	if err != nil {
		writeError(w, http.StatusInternalServerError, "DIFF_FAILED", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// handleVerify compares a checkpoint with git's own view of the work tree
// (checkpoints.Verify), under the workspace's selection and configured excludes.
func (d *Daemon) handleVerify(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	ws, st, ok := d.workspaceFor(w, r, q.Get("workspace"))
	if !ok {
		return
	}
	out, err := checkpoints.Verify(r.Context(), st, q.Get("id"), ws.patterns)
	if err != nil {
		answerError(w, err, codeVerifyFailed)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (d *Daemon) handleWatch(w http.ResponseWriter, r *http.Request) { d.watchChange(w, r, true) }

func (d *Daemon) handleUnwatch(w http.ResponseWriter, r *http.Request) { d.watchChange(w, r, false) }

// watchChange adds or removes a watch root given over the socket.
func (d *Daemon) watchChange(w http.ResponseWriter, r *http.Request, add bool) {
	var req api.WorkspaceRequest
	if !decode(w, r, &req) {
		return
	}
	dir := req.Workspace
	if err := checkPath(dir); err != nil {
		writeError(w, http.StatusBadRequest, "BAD_WORKSPACE", err.Error())
		return
	}
	uid, known := peerOf(r)
	if !known || !d.mayWatch(uid, dir) {
		writeError(w, http.StatusForbidden, "FORBIDDEN", "not a workspace you may act on: "+dir)
		return
	}
	d.mu.Lock()
	if ws := d.workspaces[dir]; ws != nil && ws.rolling.Load() && !add {
		d.mu.Unlock()
		writeBlocked(w, "unwatch")
		return
	}
	i := slices.Index(d.extra, dir)
	switch {
	case add && i < 0:
		d.extra = append(d.extra, dir)
	case !add && i >= 0:
		d.extra = slices.Delete(d.extra, i, i+1)
	}
	d.mu.Unlock()
	d.discover(d.ctx())
	d.mu.Lock()
	_, watched := d.owners[dir]
	var why string
	for _, rf := range d.refused {
		if rf.Dir == dir {
			why = rf.Reason
		}
	}
	d.mu.Unlock()
	if add && !watched && why != "" {
		writeError(w, http.StatusUnprocessableEntity, "WATCH_REFUSED", why)
		return
	}
	if !add && watched {
		writeError(w, http.StatusConflict, "WATCHED_BY_CONFIG", "the daemon's config or --watch watches "+dir+"; remove it there")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"workspace": dir, "watching": watched})
}

func (d *Daemon) handleEvents(w http.ResponseWriter, r *http.Request) {
	uid, ok := peerOf(r)
	if !ok {
		writeError(w, http.StatusForbidden, "FORBIDDEN", "unknown peer credentials")
		return
	}
	only := r.URL.Query().Get("workspace")
	if only != "" {
		if err := checkPath(only); err != nil {
			writeError(w, http.StatusBadRequest, "BAD_WORKSPACE", err.Error())
			return
		}
		d.mu.Lock()
		_, served := d.owners[only]
		d.mu.Unlock()
		if !served || !d.mayAct(uid, only) {
			writeError(w, http.StatusForbidden, "FORBIDDEN", "not a workspace you may act on: "+only)
			return
		}
	}
	// A daemon that is stopping still accepts connections until its
	// listener closes; a stream opened then would end at once, and a
	// client that reconnects would spin. Say so instead.
	if r.Context().Err() != nil {
		writeError(w, http.StatusServiceUnavailable, "STOPPING", "the daemon is stopping")
		return
	}
	allow := func(dir string) bool { return d.mayAct(uid, dir) }
	sub := d.bus.subscribe(allow, only)
	defer d.bus.unsubscribe(sub)
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	enc := json.NewEncoder(w)
	for {
		select {
		case <-r.Context().Done():
			return
		case ev, open := <-sub.ch:
			if !open {
				_ = enc.Encode(api.Event{Type: api.EvError, Time: time.Now(),
					Data: api.ErrorEvent{Code: "EVENTS_DROPPED", Message: "this client read events too slowly and was dropped"}})
				return
			}
			_ = rc.SetWriteDeadline(time.Now().Add(10 * time.Second))
			if err := enc.Encode(ev); err != nil {
				return
			}
			if err := rc.Flush(); err != nil {
				return
			}
		}
	}
}

// Codes of failures that are none of the daemon's typed errors.
const (
	codeRestoreFailed = "RESTORE_FAILED"
	codeSealFailed    = "SEAL_FAILED"
	codePinFailed     = "PIN_FAILED"
	codePruneFailed   = "PRUNE_FAILED"
	codeVerifyFailed  = "VERIFY_FAILED"
)

// notReadyError is a failure because the workspace stopped serving (its
// context ended); its message is the cause's.
type notReadyError struct{ err error }

func (e notReadyError) Error() string { return e.err.Error() }
func (e notReadyError) Unwrap() error { return e.err }

// errorStatus is the one mapping of the daemon's errors to an HTTP status
// and error code; an error it does not know is a 500 with fallback.
func errorStatus(err error, fallback string) (int, string) {
	var busy *busyError
	var notReady notReadyError
	var inv *restore.InvalidTargetError
	var amb *restore.AmbiguousError
	var unusable *restore.UnusableError
	var damaged *ckpt.TargetDamagedError
	if code, errCode, ok := autodevStatus(err); ok {
		return code, errCode
	}
	switch {
	case errors.As(err, &busy):
		return http.StatusConflict, restore.CodeRollbackInProgress
	case errors.Is(err, errWorkspaceGone):
		return http.StatusGone, "WORKSPACE_GONE"
	case errors.Is(err, errNotServing), errors.As(err, &notReady):
		return http.StatusServiceUnavailable, "NOT_READY"
	case errors.Is(err, restore.ErrCodonRunning):
		return http.StatusConflict, "CODON_RUNNING"
	case restore.IsNotFound(err):
		return http.StatusNotFound, "UNKNOWN_CHECKPOINT"
	case errors.As(err, &inv):
		return http.StatusBadRequest, "INVALID_TARGET"
	case errors.As(err, &amb):
		return http.StatusConflict, "AMBIGUOUS_CHECKPOINT"
	case errors.As(err, &unusable):
		return http.StatusConflict, "UNUSABLE_CHECKPOINT"
	case errors.Is(err, restore.ErrNothingToUndo):
		return http.StatusConflict, "NOTHING_TO_UNDO"
	case errors.As(err, &damaged):
		return http.StatusConflict, api.CodeTargetDamaged
	}
	return http.StatusInternalServerError, fallback
}

// answerError writes err as {code, message}; a request refused because a
// rollback runs (other than a rollback) gets the runtime's payload.
func answerError(w http.ResponseWriter, err error, fallback string) {
	var busy *busyError
	if errors.As(err, &busy) && !busy.rollback() {
		writeBlocked(w, busy.cmdType)
		return
	}
	code, errCode := errorStatus(err, fallback)
	var damaged *ckpt.TargetDamagedError
	if errors.As(err, &damaged) {
		writeJSON(w, code, api.Error{Code: errCode, Message: err.Error(), Lost: damaged.Lost})
		return
	}
	writeError(w, code, errCode, err.Error())
}

// handleGC is POST /v1/gc: maintenance of one workspace's store now.
func (d *Daemon) handleGC(w http.ResponseWriter, r *http.Request) {
	var req api.GCRequest
	if !decode(w, r, &req) {
		return
	}
	ws, _, ok := d.workspaceFor(w, r, req.Workspace)
	if !ok {
		return
	}
	if ws.rolling.Load() {
		writeBlocked(w, "gc")
		return
	}
	res, err := ws.gc(r.Context(), req.Full)
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, errNotServing) {
			err = notReadyError{err}
		}
		answerError(w, err, codeGCFailed)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// isRefusal answers whether err is a refusal (the asker's to fix, answered
// 4xx) rather than a failure.
func isRefusal(err error) bool {
	code, _ := errorStatus(err, codeRestoreFailed)
	return code < http.StatusInternalServerError
}
