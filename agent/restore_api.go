package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/hankweave"
	"github.com/cairn-dev/cairn/platform"
	"github.com/cairn-dev/cairn/restore"
	"github.com/cairn-dev/cairn/snapshot"
)

// The socket API of restores, rollbacks, listings, diffs, watches and events
// (docs/cairn-formats.md, "Socket API in brief"). Restores run on the
// workspace's goroutine, never beside its seals.

// restoreJob is a restore run on the workspace's goroutine.
type restoreJob struct {
	// fn runs on the workspace's goroutine; changed is its dirty set (nil
	// when only a full reconcile knows what changed).
	fn   func(ctx context.Context, changed []string)
	done chan struct{}
}

// restoreTimeout bounds one restore; shutdown does not cut one short.
const restoreTimeout = 30 * time.Minute

func (j restoreJob) run(ctx context.Context, changed []string) {
	defer close(j.done)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), restoreTimeout)
	defer cancel()
	j.fn(rctx, changed)
}

// listSnap is the ledger as it was when a rollback began: listings answer
// from it while the rollback holds the store.
type listSnap struct {
	recs []snapshot.Record
	pos  string
}

func (w *workspace) cache() *atomic.Pointer[listSnap] { return &w.snap }

// openStore is the workspace's store once it is open, else nil.
func (w *workspace) openStore() *snapshot.Store {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.status.Store != "" {
		return w.store // set under mu: a deleted store is replaced while serving
	}
	return nil
}

// ledger is the workspace's records and position; during a rollback, as
// they were when it began (the store is busy).
func (w *workspace) ledger(st *snapshot.Store) ([]snapshot.Record, string) {
	if w.rolling.Load() {
		if c := w.cache().Load(); c != nil {
			return c.recs, c.pos
		}
	}
	return st.Records(), st.Position()
}

// routes adds the restore API to the mux.
func (d *Daemon) routes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/command", d.handleCommand)
	mux.HandleFunc("POST /v1/restore", d.handleRestore)
	mux.HandleFunc("POST /v1/undo", d.handleUndo)
	mux.HandleFunc("GET /v1/list", d.handleList)
	mux.HandleFunc("GET /v1/diff", d.handleDiff)
	mux.HandleFunc("GET /v1/show", d.handleShow)
	mux.HandleFunc("POST /v1/watch", d.handleWatch)
	mux.HandleFunc("POST /v1/unwatch", d.handleUnwatch)
	mux.HandleFunc("GET /v1/events", d.handleEvents)
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
	if err := checkPath(dir); err != nil {
		writeError(w, http.StatusBadRequest, "BAD_WORKSPACE", err.Error())
		return nil, nil, false
	}
	d.mu.Lock()
	ws := d.workspaces[dir]
	d.mu.Unlock()
	if ws == nil || !d.authorize(r, ws.dir) {
		writeError(w, http.StatusForbidden, "FORBIDDEN", "not a workspace you may act on: "+dir)
		return nil, nil, false
	}
	st := ws.openStore()
	if st == nil {
		writeError(w, http.StatusServiceUnavailable, "NOT_READY", "the workspace's store is not open yet; see cairn status")
		return nil, nil, false
	}
	return ws, st, true
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
		dec := json.NewDecoder(strings.NewReader(string(cmd.Data)))
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
	op := RestoreOp{Target: t, Paths: data.Paths, DryRun: data.DryRun, Continue: true}
	res, code, errCode, err := d.restoreOn(ws, st, cmd.Type, op, data.AutoRestart)
	if err != nil {
		d.answerRefusal(w, cmd.Type, code, errCode, err)
		return
	}
	writeJSON(w, http.StatusOK, api.CommandReply{ID: cmd.ID, Type: cmd.Type, Data: res})
}

// checkpointList answers checkpoint.list: lifecycle checkpoints, newest first.
func checkpointList(ws *workspace, st *snapshot.Store, runID string) api.CheckpointList {
	recs, _ := ws.ledger(st)
	out := api.CheckpointList{RunID: runID, Checkpoints: []api.CheckpointInfo{}}
	cur := ""
	if ws.hank != nil || st.Layout() == snapshot.LayoutHankweave {
		if s, err := hankweave.ReadState(ws.dir); err == nil && s.CurrentRunID != nil {
			cur = *s.CurrentRunID
		}
	}
	if cur == "" {
		for i := len(recs) - 1; i >= 0; i-- {
			if recs[i].RunID != "" {
				cur = recs[i].RunID
				break
			}
		}
	}
	if out.RunID == "" {
		out.RunID = cur
	}
	if cur != "" {
		out.CurrentBranch = "run-" + cur
	}
	for i := len(recs) - 1; i >= 0; i-- {
		r := recs[i]
		if !r.Kind.IsLifecycle() || r.SHA == "" || r.State == snapshot.StateFailed {
			continue
		}
		if runID != "" && r.RunID != runID {
			continue
		}
		out.Checkpoints = append(out.Checkpoints, api.CheckpointInfo{CodonID: r.CodonID, CodonName: r.CodonName,
			CheckpointType: string(r.Kind), SHA: r.SHA, Status: string(r.State),
			Timestamp: r.Time.UTC().Format("2006-01-02T15:04:05.000Z")})
	}
	return out
}

// restoreOn runs one restore (or rollback, or undo: op nil) on the
// workspace's goroutine. It refuses while another runs. On a refusal it
// answers with errCode ROLLBACK_IN_PROGRESS and the payload as err.
func (d *Daemon) restoreOn(ws *workspace, st *snapshot.Store, cmdType string, op RestoreOp, autoRestart bool) (api.RestoreResult, int, string, error) {
	undo := cmdType == "undo"
	if !op.DryRun {
		if !ws.rolling.CompareAndSwap(false, true) {
			if strings.HasPrefix(cmdType, "rollback.") {
				//lint:ignore ST1005 the runtime's exact wording (docs/runtime-formats.md)
				return api.RestoreResult{}, http.StatusConflict, restore.CodeRollbackInProgress, errors.New(restore.ErrRollbackInProgress)
			}
			b := restore.RollbackBlocked(cmdType)
			return api.RestoreResult{}, http.StatusConflict, restore.CodeRollbackInProgress, errors.New(b.Message + " (" + b.Context + ")")
		}
		defer ws.rolling.Store(false)
		ws.cache().Store(&listSnap{recs: st.Records(), pos: st.Position()})
		defer ws.cache().Store(nil)
	}
	emit := func(typ string, data any) {
		if ws.emit != nil && !op.DryRun {
			ws.emit(api.Event{Type: typ, Workspace: ws.dir, Time: time.Now(), Data: data})
		}
	}
	fromRun, fromCodon := "", ""
	if st.Layout() == snapshot.LayoutHankweave {
		if s, err := hankweave.ReadState(ws.dir); err == nil {
			if run := s.CurrentRun(); run != nil {
				fromRun = run.RunID
				if n := len(run.Codons); n > 0 {
					fromCodon = run.Codons[n-1].CodonID
				}
			}
		}
	}
	var target restore.Checkpoint
	op.Resolved = func(c restore.Checkpoint) {
		target = c
		emit(api.EvRollbackStarted, api.RollbackStarted{FromRun: fromRun, FromCodon: fromCodon, ToCodon: c.CodonID,
			ToCheckpoint: c.SHA, CheckpointType: c.Kind, CodonsToProcess: codonsAfter(st.Records(), c)})
	}
	op.Progress = func(step, total int, msg string) {
		emit(api.EvRollbackProgress, api.RollbackProgress{CurrentStep: step, TotalSteps: total, Message: msg})
	}
	var res api.RestoreResult
	var err error
	job := restoreJob{done: make(chan struct{}), fn: func(ctx context.Context, changed []string) {
		op.Changed = changed
		if undo {
			res, err = Undo(ctx, st, ws.dir, op)
		} else {
			res, err = RunRestore(ctx, st, ws.dir, op)
		}
	}}
	select {
	case ws.restores <- job:
	case <-ws.done:
		return res, http.StatusServiceUnavailable, "NOT_READY", errNotServing
	}
	<-job.done
	if err != nil {
		code, errCode := targetError(err)
		emit(api.EvError, api.ErrorEvent{Code: errCode, Message: err.Error()})
		d.log.Warn().Err(err).Str("workspace", ws.dir).Str("command", cmdType).Msg("restore refused or failed")
		return res, code, errCode, err
	}
	if res.Archive != nil {
		emit(api.EvRollbackArchiveRestore, res.Archive)
	}
	if !op.DryRun {
		toRun := ""
		if res.Continued != nil {
			toRun = res.Continued.ToRun
		}
		emit(api.EvRollbackCompleted, api.RollbackCompleted{FromRun: fromRun, ToRun: toRun, Checkpoint: target.SHA,
			CodonID: target.CodonID, CodonName: target.CodonName, CheckpointType: target.Kind, AutoRestart: autoRestart})
		d.log.Info().Str("workspace", ws.dir).Str("command", cmdType).Str("target", describe(target)).
			Int("written", len(res.Write)).Int("deleted", len(res.Delete)).Msg("restored")
	}
	return res, http.StatusOK, "", nil
}

func (d *Daemon) handleRestore(w http.ResponseWriter, r *http.Request) {
	var req api.RestoreRequest
	if !decode(w, r, &req) {
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
	res, code, errCode, err := d.restoreOn(ws, st, "restore", RestoreOp{Target: t, Paths: req.Paths, DryRun: req.DryRun, Continue: true}, false)
	if err != nil {
		d.answerRefusal(w, "restore", code, errCode, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// answerRefusal writes a restore error; ROLLBACK_IN_PROGRESS for a request
// other than a rollback carries the runtime's payload.
func (d *Daemon) answerRefusal(w http.ResponseWriter, cmdType string, code int, errCode string, err error) {
	if errCode == restore.CodeRollbackInProgress && !strings.HasPrefix(cmdType, "rollback.") {
		writeBlocked(w, cmdType)
		return
	}
	writeError(w, code, errCode, err.Error())
}

func (d *Daemon) handleUndo(w http.ResponseWriter, r *http.Request) {
	var req api.UndoRequest
	if !decode(w, r, &req) {
		return
	}
	ws, st, ok := d.workspaceFor(w, r, req.Workspace)
	if !ok {
		return
	}
	res, code, errCode, err := d.restoreOn(ws, st, "undo", RestoreOp{Paths: req.Paths, DryRun: req.DryRun}, false)
	if err != nil {
		d.answerRefusal(w, "undo", code, errCode, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (d *Daemon) handleList(w http.ResponseWriter, r *http.Request) {
	ws, st, ok := d.workspaceFor(w, r, r.URL.Query().Get("workspace"))
	if !ok {
		return
	}
	recs, pos := ws.ledger(st)
	out := api.List{Workspace: ws.dir, Position: pos, Head: restore.HeadMarker(Checkpoints(recs), pos), Records: []api.Record{}}
	for i := len(recs) - 1; i >= 0; i-- {
		out.Records = append(out.Records, toAPIRecord(recs[i]))
	}
	writeJSON(w, http.StatusOK, out)
}

// resolveArg resolves a target given in a query (ledger id, SHA prefix, …) to a full SHA.
func resolveArg(ctx context.Context, st *snapshot.Store, arg string) (snapshot.Record, error) {
	t, err := restore.ParseTarget(arg)
	if err != nil {
		return snapshot.Record{}, err
	}
	_, rec, err := ResolveTarget(ctx, st, t)
	return rec, err
}

func (d *Daemon) handleDiff(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	_, st, ok := d.workspaceFor(w, r, q.Get("workspace"))
	if !ok {
		return
	}
	a, err := resolveArg(r.Context(), st, q.Get("a"))
	if err != nil {
		code, errCode := targetError(err)
		writeError(w, code, errCode, err.Error())
		return
	}
	out := api.Diff{A: a.SHA}
	if b := q.Get("b"); b != "" {
		rb, err := resolveArg(r.Context(), st, b)
		if err != nil {
			code, errCode := targetError(err)
			writeError(w, code, errCode, err.Error())
			return
		}
		out.B = rb.SHA
	}
	out.Stat, out.Patch, err = st.Diff(r.Context(), out.A, out.B, q.Get("patch") != "")
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
	rec, err := resolveArg(r.Context(), st, q.Get("id"))
	if err != nil {
		code, errCode := targetError(err)
		writeError(w, code, errCode, err.Error())
		return
	}
	out, err := Show(r.Context(), st, rec)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "DIFF_FAILED", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// Show is a record and the files it changed from its parent, with a diffstat.
func Show(ctx context.Context, st *snapshot.Store, rec snapshot.Record) (api.Diff, error) {
	ar := toAPIRecord(rec)
	out := api.Diff{A: rec.Parent, B: rec.SHA, Record: &ar}
	var err error
	out.Stat, _, err = st.Diff(ctx, rec.Parent, rec.SHA, false)
	return out, err
}

func (d *Daemon) handleWatch(w http.ResponseWriter, r *http.Request)   { d.watchChange(w, r, true) }
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
	return uid == 0 || uid == selfUID() || owner == uid
}

// bus fans events out to subscribers; a subscriber whose buffer is full is
// dropped, never waited for.
type bus struct {
	mu   sync.Mutex
	subs map[*subscriber]struct{}
}

type subscriber struct {
	ch    chan api.Event
	allow func(dir string) bool
	only  string
}

func newBus() *bus { return &bus{subs: map[*subscriber]struct{}{}} }

func (b *bus) subscribe(allow func(string) bool, only string) *subscriber {
	s := &subscriber{ch: make(chan api.Event, 256), allow: allow, only: only}
	b.mu.Lock()
	b.subs[s] = struct{}{}
	b.mu.Unlock()
	return s
}

func (b *bus) unsubscribe(s *subscriber) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.subs[s]; ok {
		delete(b.subs, s)
		close(s.ch)
	}
}

func (b *bus) publish(ev api.Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs {
		if (s.only != "" && s.only != ev.Workspace) || !s.allow(ev.Workspace) {
			continue
		}
		select {
		case s.ch <- ev:
		default: // too slow: dropped
			delete(b.subs, s)
			close(s.ch)
		}
	}
}

func (d *Daemon) handleEvents(w http.ResponseWriter, r *http.Request) {
	uid, ok := r.Context().Value(peerKey{}).(uint32)
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

// codonsAfter counts the codons whose lifecycle checkpoints came after the
// target: the work the rollback undoes.
func codonsAfter(recs []snapshot.Record, target restore.Checkpoint) int {
	seen := map[string]bool{}
	for _, r := range recs {
		if r.CodonID != "" && r.Kind.IsLifecycle() && r.Time.After(target.Time) && r.SHA != target.SHA {
			seen[r.RunID+"/"+r.CodonID] = true
		}
	}
	return len(seen)
}
