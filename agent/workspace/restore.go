package workspace

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/checkpoints"
	"github.com/cairn-dev/cairn/agent/hankweave"
	"github.com/cairn-dev/cairn/restore"
	"github.com/cairn-dev/cairn/restore/ckpt"
	"github.com/cairn-dev/cairn/snapshot"
)

// A workspace's restore jobs and listings: restores and rollbacks run on the
// workspace's goroutine, never beside its seals (the restore itself is
// checkpoints.RunRestore, or checkpoints.RunAutodev in the autodev layout;
// its HTTP handlers are in the daemon's http.go).

// restoreJob is a restore run on the workspace's goroutine.
type restoreJob struct {
	// fn runs on the workspace's goroutine; changed is its dirty set (nil
	// when only a full reconcile knows what changed).
	fn   func(ctx context.Context, changed []string)
	done chan struct{}
	// reconcileAfter: the next seal reconciles the whole work tree (a
	// restore of the user's repository, which cairn's store does not see).
	// A restore of cairn's store tells the store what it left
	// (snapshot.Store.Restore): seals told what changed stay exact.
	reconcileAfter bool
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
	recs []ckpt.Record
	pos  string
}

func (w *Workspace) cache() *atomic.Pointer[listSnap] { return &w.snap }

// openStore is the workspace's store once it is open, else nil.
func (w *Workspace) Store() *snapshot.Store {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.status.Store != "" {
		return w.store // set under mu: a deleted store is replaced while serving
	}
	return nil
}

// ledger is the workspace's records and position; during a rollback, as
// they were when it began (the store is busy).
func (w *Workspace) Ledger(st *snapshot.Store) ([]ckpt.Record, string) {
	if w.rolling.Load() {
		if c := w.cache().Load(); c != nil {
			return c.recs, c.pos
		}
	}
	return st.Records(), st.Position()
}

// CheckpointList answers checkpoint.list: lifecycle checkpoints, newest first.
func (ws *Workspace) CheckpointList(st *snapshot.Store, runID string) api.CheckpointList {
	recs, _ := ws.Ledger(st)
	out := api.CheckpointList{RunID: runID, Checkpoints: []api.CheckpointInfo{}}
	cur := ""
	if st.Layout() == snapshot.LayoutHankweave {
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
		if !r.Kind.IsLifecycle() || r.SHA == "" || r.State == ckpt.StateFailed {
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

// Restore runs one restore (or rollback, or undo: cmdType "undo") of st on
// the workspace's goroutine; st is nil in the autodev layout, whose restores
// run on the user's repository (checkpoints.RunAutodev), by the same path.
// It refuses while another runs (Blocked), and answers ErrNotServing when
// the workspace stops serving first.
func (ws *Workspace) Restore(st *snapshot.Store, cmdType string, op restore.Op, autoRestart bool) (api.RestoreResult, error) {
	began := time.Now()
	res, err := ws.restoreRun(st, cmdType, op, autoRestart)
	if op.DryRun {
		return res, err
	}
	ws.met.Restored(cmdType, time.Since(began), res, err)
	// The pre-restore checkpoint counts too. Not after a refusal because a
	// restore is under way: that one holds the store, and reading the
	// ledger here would wait for it.
	if _, busy := err.(*busyError); !busy && st != nil {
		k := kept(st)
		ws.setStatus(func(s *api.WorkspaceStatus) { s.Kept = k })
	}
	return res, err
}

// restoreRun is Restore without the counting.
func (ws *Workspace) restoreRun(st *snapshot.Store, cmdType string, op restore.Op, autoRestart bool) (api.RestoreResult, error) {
	undo := cmdType == "undo"
	repo := ws.Autodev()
	if st == nil && repo == nil {
		return api.RestoreResult{}, ErrNotServing
	}
	if !op.DryRun {
		if !ws.rolling.CompareAndSwap(false, true) {
			return api.RestoreResult{}, &busyError{cmdType: cmdType}
		}
		defer ws.rolling.Store(false)
		if st != nil {
			ws.cache().Store(&listSnap{recs: st.Records(), pos: st.Position()})
			defer ws.cache().Store(nil)
		}
	}
	emit := func(typ string, data any) {
		if ws.emit != nil && !op.DryRun {
			ws.emit(api.Event{Type: typ, Workspace: ws.dir, Time: time.Now(), Data: data})
		}
	}
	fromRun, fromCodon := "", ""
	if st != nil && st.Layout() == snapshot.LayoutHankweave {
		if s, err := hankweave.ReadState(ws.dir); err == nil {
			if run := s.CurrentRun(); run != nil {
				fromRun = run.RunID
				if n := len(run.Codons); n > 0 {
					fromCodon = run.Codons[n-1].CodonID
				}
			}
		}
	}
	var target ckpt.Record
	op.Resolved = func(c ckpt.Record) {
		target = c
		codons := 0 // an autodev task is no codon of the runtime's lifecycle
		if st != nil {
			codons = restore.CodonsAfter(st.Records(), c)
		}
		emit(api.EvRollbackStarted, api.RollbackStarted{FromRun: fromRun, FromCodon: fromCodon, ToCodon: c.CodonID,
			ToCheckpoint: c.SHA, CheckpointType: string(c.Kind), CodonsToProcess: codons})
	}
	op.Progress = func(step, total int, msg string) {
		emit(api.EvRollbackProgress, api.RollbackProgress{CurrentStep: step, TotalSteps: total, Message: msg})
	}
	var res api.RestoreResult
	var err error
	job := restoreJob{done: make(chan struct{}), reconcileAfter: st == nil, fn: func(ctx context.Context, changed []string) {
		op.Changed = changed
		if st == nil {
			res, err = checkpoints.RunAutodev(ctx, repo, undo, op)
		} else if undo {
			res, err = checkpoints.Undo(ctx, st, ws.dir, op)
		} else {
			res, err = checkpoints.RunRestore(ctx, st, ws.dir, op)
		}
		// The pre-restore checkpoint is the newest, as a seal's would be;
		// set here, on the workspace's goroutine, so no later seal is undone.
		if p := res.PreRestore; p != nil && p.ID != "" {
			ws.setStatus(func(s *api.WorkspaceStatus) { s.Last, s.LastState, s.LastTime = p.ID, string(p.State), p.Time })
		}
	}}
	select {
	case ws.restores <- job:
	case <-ws.done:
		return res, ErrNotServing
	}
	<-job.done
	if err != nil {
		_, errCode := Classify(err, CodeRestoreFailed)
		emit(api.EvError, api.ErrorEvent{Code: errCode, Message: err.Error()})
		ws.log.Warn().Err(err).Str("command", cmdType).Msg("restore refused or failed")
		return res, err
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
			CodonID: target.CodonID, CodonName: target.CodonName, CheckpointType: string(target.Kind), AutoRestart: autoRestart})
		l := ws.log.Info().Str("command", cmdType).Str("target", checkpoints.Describe(target))
		if res.SavedOn != "" {
			l = l.Str("saved_on", res.SavedOn)
		}
		l.Int("written", len(res.Write)).Int("deleted", len(res.Delete)).Msg("restored")
	}
	return res, nil
}
