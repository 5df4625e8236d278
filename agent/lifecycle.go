package agent

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/hankweave"
	"github.com/cairn-dev/cairn/snapshot"
	"github.com/cairn-dev/cairn/watcher"
)

// Timers of the lifecycle, each named: a torn state.json is re-read after
// stateRetry; while the runtime's lock is held, it is checked every
// lockCheck for a runtime that died without removing it.
const (
	stateRetry = 250 * time.Millisecond
	lockCheck  = 10 * time.Second
)

// hankState is what a Hankweave workspace remembers between markers.
type hankState struct {
	exec    string
	last    *hankweave.State   // the last state.json that parsed
	journal *hankweave.Journal // tailed by offset; it survives compaction and reappearance
	primed  string             // the selection the index was last primed for
	// stateTime is the mtime of the state.json last read.
	stateTime time.Time
}

func newHankState(exec string) *hankState {
	return &hankState{exec: exec, journal: hankweave.NewJournal(exec)}
}

// currentPatterns is the selection of the codon running now (or last run):
// the union of checkpointedFiles through it in plan order. ok is false
// before there is a plan.
func (h *hankState) currentPatterns() ([]string, bool) {
	st := h.last
	if st == nil || len(st.ExecutionPlan) == 0 {
		return nil, false
	}
	codon := ""
	if _, rec, _ := hankweave.Active(st); rec != nil {
		codon = rec.CodonID
	} else if run := st.CurrentRun(); run != nil && len(run.Codons) > 0 {
		codon = run.Codons[len(run.Codons)-1].CodonID
	} else if len(st.Runs) > 0 && len(st.Runs[0].Codons) > 0 {
		codon = st.Runs[0].Codons[len(st.Runs[0].Codons)-1].CodonID
	}
	var pats []string
	seen := map[string]bool{}
	for _, e := range st.ExecutionPlan {
		for _, p := range e.Codon.CheckpointedFiles {
			if !seen[p] {
				seen[p] = true
				pats = append(pats, p)
			}
		}
		if e.CodonID == codon {
			break
		}
	}
	return pats, true
}

// lifecycle reads the runtime's state and seals every lifecycle checkpoint
// it implies that the ledger lacks. A barrier first takes in every change
// made before the state was read; a terminal checkpoint whose files were
// written after the codon ended is racy. startup says the daemon has just
// begun watching (missing markers are sealed late, and marked so).
// It returns when to look again, or nil.
func (w *workspace) lifecycle(ctx context.Context, wt *watcher.Watcher, startup bool) <-chan time.Time {
	// The journal says what moved (logged); state.json is the record of truth.
	if evs, err := w.hank.journal.Read(); err != nil {
		w.log.Debug().Err(err).Msg("journal unreadable")
	} else {
		for _, ev := range evs {
			if tr, ok := ev.Transition(); ok {
				w.log.Debug().Str("transition", tr.TransitionType).Str("codon", tr.CodonID).Str("run", tr.RunID).
					Str("from", tr.From).Str("to", tr.To).Msg("runtime transition")
			}
		}
	}
	// The lock before the state: a runtime writes its lock before its first transition.
	lock, lockErr := hankweave.ReadLock(w.dir)
	st, err := hankweave.ReadState(w.dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // no run yet
		}
		w.log.Warn().Err(err).Msg("state.json unreadable; retrying")
		w.setStatus(func(s *api.WorkspaceStatus) { s.Error = "state.json unreadable (retrying): " + err.Error() })
		return time.After(stateRetry)
	}
	if st.Warning != nil {
		w.log.Warn().Err(st.Warning).Msg("state.json invalid; read state.json.bak")
	}
	w.hank.last = st
	// The file's own mtime says when the newest transition landed, on the
	// same clock as the agent's files.
	w.hank.stateTime = time.Time{}
	if fi, err := os.Stat(filepath.Join(w.dir, ".hankweave", "state.json")); err == nil {
		w.hank.stateTime = fi.ModTime()
	}
	alive := lockErr == nil && lock != nil && lock.Alive(time.Now())
	have := map[string]bool{}
	recs := w.store.Records()
	var since time.Time // markers older than the first checkpoint predate cairn
	for _, r := range recs {
		if since.IsZero() || r.Time.Before(since) {
			since = r.Time
		}
		if r.RunID != "" && r.CodonID != "" && r.State != snapshot.StateFailed {
			have[markerKey(r.RunID, r.CodonID, r.Attempt, string(r.Kind))] = true
		}
	}
	all := hankweave.Due(st)
	if m := hankweave.ExitDue(st, alive); m != nil {
		all = append(all, *m)
	}
	var due []hankweave.Marker
	for _, m := range all {
		if !have[m.Key()] && (m.Kind == hankweave.KindExit || !predates(m, since)) {
			due = append(due, m)
		}
	}
	rerun := false
	if len(due) > 0 {
		// Every change made before the state was read is taken in before anything is sealed.
		rerun = w.barrier(wt)
	}
	for _, m := range due {
		w.sealMarker(ctx, wt, st, m, startup)
		if ctx.Err() != nil {
			return nil
		}
	}
	w.prime(ctx)
	if _, control := w.drain(wt); control || rerun {
		return time.After(0) // another transition may have landed since the state was read
	}
	if alive {
		return time.After(lockCheck)
	}
	return nil
}

func markerKey(run, codon string, attempt int, kind string) string {
	return (hankweave.Marker{RunID: run, CodonID: codon, Attempt: attempt, Kind: hankweave.Kind(kind)}).Key()
}

// predates reports whether the marker happened before cairn first watched
// the workspace: its checkpoint would hold today's files, not that moment's.
func predates(m hankweave.Marker, since time.Time) bool {
	if since.IsZero() {
		return false
	}
	t := m.EndTime
	if t.IsZero() {
		t = m.StartTime
	}
	return !t.IsZero() && t.Before(since)
}

// sealMarker adopts the runtime's own checkpoint when git confirms it, and
// otherwise seals one.
func (w *workspace) sealMarker(ctx context.Context, wt *watcher.Watcher, st *hankweave.State, m hankweave.Marker, startup bool) {
	kind := snapshot.Kind(m.Kind)
	if m.RecordedSHA != "" {
		rec, err := w.store.Adopt(ctx, snapshot.AdoptRequest{SHA: m.RecordedSHA, Kind: kind, CodonID: m.CodonID,
			CodonName: m.CodonName, RunID: m.RunID, Attempt: m.Attempt})
		if err == nil {
			w.log.Info().Str("id", rec.ID).Str("sha", rec.SHA).Str("codon", m.CodonID).Msg("adopted the runtime's checkpoint")
			return
		}
		w.log.Warn().Err(err).Str("codon", m.CodonID).Msg("runtime checkpoint not confirmed by git; sealing one")
	}
	req := snapshot.SealRequest{Kind: kind, CodonID: m.CodonID, CodonName: m.CodonName, RunID: m.RunID,
		Attempt: m.Attempt, Duration: m.Duration(), Patterns: w.patterns(m.Patterns)}
	if m.Patterns == nil {
		req.Patterns = nil
	}
	if run := st.Run(m.RunID); run != nil && run.StartingConditions.Source != nil {
		req.StartSHA = run.StartingConditions.Source.CheckpointSHA
	}
	switch {
	case startup:
		req.Racy = []snapshot.PathIssue{{Path: ".", Reason: "sealed late: the daemon was not watching at the marker; files may have changed since"}}
	case !m.EndTime.IsZero():
		// The marker's moment: its endTime, or the state file's mtime if
		// earlier (a transition is written right after its endTime is taken).
		// The runtime's endTime has millisecond precision: a millisecond of
		// slack. File times are coarse (a kernel tick): a file stamped in the
		// same tick as state.json cannot be proven older, so it counts as racy.
		at := m.EndTime.Add(time.Millisecond)
		if st := w.hank.stateTime; !st.IsZero() && st.Before(at) {
			at = st.Add(-time.Nanosecond)
		}
		req.Racy = w.changedAfter(at)
	}
	w.seal(ctx, wt, req, true)
}

// changedAfter names the pending paths written after limit (by their mtime;
// a path that is gone, by when its event was read).
func (w *workspace) changedAfter(limit time.Time) []snapshot.PathIssue {
	var racy []snapshot.PathIssue
	for p, seen := range w.dirty {
		when := seen
		if fi, err := os.Lstat(filepath.Join(w.store.WorkTree(), filepath.FromSlash(p))); err == nil {
			when = fi.ModTime()
		}
		if when.After(limit) {
			racy = append(racy, snapshot.PathIssue{Path: p, Reason: "changed after the lifecycle marker"})
		}
	}
	sort.Slice(racy, func(i, j int) bool { return racy[i].Path < racy[j].Path })
	return racy
}

// barrierRel is a file cairn creates and removes in .hankweave/ to mark a
// point in the watch's single event queue: once its removal is read, every
// change made before it has been read too.
const barrierRel = ".hankweave/.cairn-barrier"

// barrier takes in every change queued before now; it reports whether a
// control file changed meanwhile.
func (w *workspace) barrier(wt *watcher.Watcher) (control bool) {
	if wt == nil {
		return false
	}
	p := filepath.Join(w.dir, filepath.FromSlash(barrierRel))
	// O_EXCL never follows a link the workspace owner may have planted.
	_ = os.Remove(p)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		_, control = w.drain(wt)
		return control
	}
	f.Close()
	_ = os.Remove(p)
	timeout := time.NewTimer(time.Second)
	defer timeout.Stop()
	for {
		select {
		case c, open := <-wt.Changes():
			if !open {
				return control
			}
			if c.Path == barrierRel {
				if c.Op.Has(watcher.Remove) {
					return control
				}
				continue
			}
			if rel, ok := w.workRel(c.Path); ok {
				w.note(rel, c.Time)
			} else {
				control = true
			}
		case <-wt.Overflow():
			w.needFull = true
		case <-timeout.C:
			return control
		}
	}
}

// prime stages the index under the selection of the codon now running, as
// soon as it starts: its lifecycle checkpoints then only stage the last
// changes, instead of reconciling the whole tree under new patterns at the
// marker, when the agent is waiting.
func (w *workspace) prime(ctx context.Context) {
	pats, ok := w.hank.currentPatterns()
	if !ok {
		return
	}
	pats = w.patterns(pats)
	key := strings.Join(pats, "\x00")
	if key == w.hank.primed {
		return
	}
	start := time.Now()
	changed := make([]string, 0, len(w.dirty))
	for p := range w.dirty {
		changed = append(changed, p)
	}
	if err := w.store.Stage(ctx, pats, changed); err != nil {
		w.log.Warn().Err(err).Msg("priming the index for the next codon failed")
		return
	}
	w.hank.primed = key
	w.log.Debug().Int64("duration_ms", time.Since(start).Milliseconds()).Msg("index primed for the running codon")
}
