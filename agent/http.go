package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/checkpoints"
	"github.com/cairn-dev/cairn/agent/config"
	"github.com/cairn-dev/cairn/agent/ui"
	"github.com/cairn-dev/cairn/agent/workerproto"
	"github.com/cairn-dev/cairn/agent/workspace"
	"github.com/cairn-dev/cairn/platform"
	"github.com/cairn-dev/cairn/restore"
	"github.com/cairn-dev/cairn/restore/ckpt"
	"github.com/cairn-dev/cairn/snapshot"
)

// The daemon's HTTP layer (docs/cairn-formats.md, "Socket API in brief"):
// every handler, the request decoding and path checks, and the one mapping
// of the daemon's typed errors to a status and an error code (errorStatus).
// The daemon's logic answers domain results and errors; only the HTTP
// layer knows HTTP: this file, http_workers.go (forwarding to a worker, a
// worker's assignment), http_autodev.go (the autodev layout's list; its
// restores take the same path as every layout's), http_metrics.go (GET /metrics, on the socket and on
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
	if ws.Busy() {
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
	rec, err := ws.Checkpoint(r.Context(), sreq)
	if err == nil {
		writeJSON(w, http.StatusOK, rec)
		return
	}
	// Every failure answers {code, message}; a seal recorded as failed
	// carries its record too, so the reason survives the socket.
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		err = workspace.Unserved(err) // the workspace stopped serving under the seal
	}
	code, errCode := errorStatus(err, workspace.CodeSealFailed)
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
	mux.Handle("GET "+ui.Prefix, ui.Handler(d.route(mux))) // the panel (docs/operating.md, "The panel")
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
func (d *Daemon) workspaceFor(w http.ResponseWriter, r *http.Request, dir string) (*workspace.Workspace, *snapshot.Store, bool) {
	ws, ok := d.servedFor(w, r, dir)
	if !ok {
		return nil, nil, false
	}
	st, ok := storeOf(w, ws)
	return ws, st, ok
}

// restorableFor is workspaceFor for a restore or an undo, which every layout
// has: in the autodev layout the store is nil, and the restore runs on the
// user's repository (workspace.Restore).
func (d *Daemon) restorableFor(w http.ResponseWriter, r *http.Request, dir string) (*workspace.Workspace, *snapshot.Store, bool) {
	ws, ok := d.servedFor(w, r, dir)
	if !ok {
		return nil, nil, false
	}
	if ws.Autodev() != nil {
		return ws, nil, true
	}
	if ws.Settings().Layout == config.LayoutAutodev {
		writeError(w, http.StatusServiceUnavailable, "NOT_READY", "the workspace is not open yet; see cairn status")
		return nil, nil, false
	}
	st, ok := storeOf(w, ws)
	return ws, st, ok
}

// storeOf is the open store of ws, or the refusal answered: the autodev
// layout has none, and a store not open yet is not ready.
func storeOf(w http.ResponseWriter, ws *workspace.Workspace) (*snapshot.Store, bool) {
	if ws.Settings().Layout == config.LayoutAutodev {
		answerError(w, workspace.ErrAutodevLayout, workspace.CodeRestoreFailed)
		return nil, false
	}
	st := ws.Store()
	if st == nil {
		writeError(w, http.StatusServiceUnavailable, "NOT_READY", "the workspace's store is not open yet; see cairn status")
		return nil, false
	}
	return st, true
}

// servedFor is workspaceFor without the store: the checked, authorised
// workspace this process serves at dir, or the refusal answered.
func (d *Daemon) servedFor(w http.ResponseWriter, r *http.Request, dir string) (*workspace.Workspace, bool) {
	if err := checkPath(dir); err != nil {
		writeError(w, http.StatusBadRequest, "BAD_WORKSPACE", err.Error())
		return nil, false
	}
	ws := d.lookup(dir)
	if ws == nil || !d.authorize(r, ws.Dir()) {
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
		writeJSON(w, http.StatusOK, api.CommandReply{ID: cmd.ID, Type: cmd.Type, Data: ws.CheckpointList(st, list.RunID)})
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
	res, err := ws.Restore(st, cmd.Type, op, data.AutoRestart)
	if err != nil {
		answerError(w, err, workspace.CodeRestoreFailed)
		return
	}
	writeJSON(w, http.StatusOK, api.CommandReply{ID: cmd.ID, Type: cmd.Type, Data: res})
}

func (d *Daemon) handleRestore(w http.ResponseWriter, r *http.Request) {
	var req api.RestoreRequest
	if !decode(w, r, &req) {
		return
	}
	ws, st, ok := d.restorableFor(w, r, req.Workspace)
	if !ok {
		return
	}
	t, err := restore.ParseTarget(req.Target)
	if err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_TARGET", err.Error())
		return
	}
	res, err := ws.Restore(st, "restore", restore.Op{Target: t, Paths: req.Paths, DryRun: req.DryRun, Continue: true}, false)
	if err != nil {
		answerError(w, err, workspace.CodeRestoreFailed)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (d *Daemon) handleUndo(w http.ResponseWriter, r *http.Request) {
	var req api.UndoRequest
	if !decode(w, r, &req) {
		return
	}
	ws, st, ok := d.restorableFor(w, r, req.Workspace)
	if !ok {
		return
	}
	res, err := ws.Restore(st, "undo", restore.Op{Paths: req.Paths, DryRun: req.DryRun}, false)
	if err != nil {
		answerError(w, err, workspace.CodeRestoreFailed)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// handlePin pins or unpins a checkpoint (docs/operating.md, "Retention").
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
		answerError(w, err, workspace.CodePinFailed)
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
	opts := workspace.PruneOptionsFor(ws.Settings())
	opts.DryRun = req.DryRun
	if req.MaxStoreSize > 0 {
		opts.MaxStoreSize = req.MaxStoreSize
	}
	res, err := workspace.Prune(r.Context(), st, opts, time.Now(), true)
	if err != nil {
		answerError(w, err, workspace.CodePruneFailed)
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
	recs, pos := ws.Ledger(st)
	out := api.List{Workspace: ws.Dir(), Position: pos, Head: restore.HeadMarker(recs, pos), Records: []api.Record{}}
	for i := len(recs) - 1; i >= 0; i-- {
		out.Records = append(out.Records, recs[i])
	}
	if pins, err := st.Pins(); err != nil {
		d.log.Warn().Err(err).Str("workspace", ws.Dir()).Msg("list: pins unreadable; the list shows none")
	} else {
		out.Pins = pins
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
		answerError(w, err, workspace.CodeRestoreFailed)
		return
	}
	out := api.Diff{A: a.SHA}
	if b := q.Get("b"); b != "" {
		rb, err := checkpoints.ResolveArg(r.Context(), st, b)
		if err != nil {
			answerError(w, err, workspace.CodeRestoreFailed)
			return
		}
		out.B = rb.SHA
	}
	if err := checkpoints.DiffPage(r.Context(), st, &out, diffOptions(q), pagingOf(q)); err != nil {
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
		answerError(w, err, workspace.CodeRestoreFailed)
		return
	}
	out, err := checkpoints.ShowWith(r.Context(), st, rec, diffOptions(q), pagingOf(q))
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
	out, err := checkpoints.Verify(r.Context(), st, q.Get("id"), ws.Patterns)
	if err != nil {
		answerError(w, err, workspace.CodeVerifyFailed)
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
	if ws := d.workspaces[dir]; ws != nil && ws.Busy() && !add {
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
// statusOf is the HTTP status of each class of error (workspace.Classify).
var statusOf = map[workspace.Class]int{
	workspace.Failed:   http.StatusInternalServerError,
	workspace.Invalid:  http.StatusBadRequest,
	workspace.NotFound: http.StatusNotFound,
	workspace.Conflict: http.StatusConflict,
	workspace.Gone:     http.StatusGone,
	workspace.NotReady: http.StatusServiceUnavailable,
}

// errorStatus is the HTTP status and error code of err; an error the
// workspace does not know is a 500 with fallback.
func errorStatus(err error, fallback string) (int, string) {
	class, code := workspace.Classify(err, fallback)
	return statusOf[class], code
}

// answerError writes err as {code, message}; a request refused because a
// rollback runs (other than a rollback) gets the runtime's payload.
func answerError(w http.ResponseWriter, err error, fallback string) {
	if cmdType, ok := workspace.Blocked(err); ok {
		writeBlocked(w, cmdType)
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
	if ws.Busy() {
		writeBlocked(w, "gc")
		return
	}
	res, err := ws.GC(r.Context(), req.Full)
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, workspace.ErrNotServing) {
			err = workspace.Unserved(err)
		}
		answerError(w, err, workspace.CodeGCFailed)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// mayWatch answers whether uid may add or remove dir as a watch root: root,
// or the owner of the folder, read from a descriptor opened without
// following any link. Missing and forbidden look the same to the caller.
func (d *Daemon) mayWatch(uid uint32, dir string) bool {
	f, err := platform.OpenDirNoFollow(dir)
	if err != nil {
		return false
	}
	defer f.Close()
	owner, _, _, _, err := platform.DirInfo(f)
	if err != nil {
		return false
	}
	return uid == 0 || uid == platform.SelfUID() || owner == uid
}

// diffOptions reads a diff's options from its query: patch=1, files=1,
// path=P (repeatable).
func diffOptions(q url.Values) snapshot.DiffOptions {
	return snapshot.DiffOptions{Patch: q.Get("patch") != "", Files: q.Get("files") != "", Paths: q["path"]}
}

// pagingOf reads a diff's paging from its query: offset=K, limit=N,
// folders=1, folder=P. Numbers that do not parse are ignored (no paging).
func pagingOf(q url.Values) checkpoints.Paging {
	atoi := func(k string) int {
		n, err := strconv.Atoi(q.Get(k))
		if err != nil || n < 0 {
			return 0
		}
		return n
	}
	return checkpoints.Paging{Offset: atoi("offset"), Limit: atoi("limit"), Folders: q.Get("folders") != "", Folder: q.Get("folder")}
}
