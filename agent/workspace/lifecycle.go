package workspace

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/checkpoints"
	"github.com/cairn-dev/cairn/agent/hankweave"
	"github.com/cairn-dev/cairn/restore/ckpt"
	"github.com/cairn-dev/cairn/snapshot"
	"github.com/cairn-dev/cairn/watcher"
)

// Timers of the lifecycle, each named: a torn state.json is re-read after
// stateRetry; while the runtime's lock is held, it is checked every
// lockCheck for a runtime that died without removing it. In a run whose
// runtime checkpoints by itself, cairn waits at most adoptWait for the
// runtime's rig-setup SHA before sealing one of its own: long enough for the
// runtime to commit a large tree, and only spent when a runtime stalls in
// starting (one that moves on without recording a SHA ends the wait).
const (
	stateRetry = 250 * time.Millisecond
	lockCheck  = 10 * time.Second
	adoptWait  = 10 * time.Second
)

// stateRel is state.json relative to the execution directory, as the watch names it.
const stateRel = ".hankweave/state.json"

// hankState is what a Hankweave workspace remembers between markers.
type hankState struct {
	exec    string
	last    *hankweave.State   // the last state.json that parsed
	journal *hankweave.Journal // tailed by offset; it survives compaction and reappearance
	// primed is the selection the index of primedIn was last primed for: a
	// store recreated under the daemon starts with an empty index.
	primed   string
	primedIn *snapshot.Store
	// stateTime is the mtime of the state.json last read.
	stateTime time.Time

	// readAt is when the last valid state.json was read: a marker it did not
	// show was written after it. firstEvent is the watch time of the first
	// state.json event taken since then: a change taken before that event
	// precedes every state.json written after readAt.
	readAt, firstEvent time.Time
	// unread: a control file changed after the last read (an event taken
	// while sealing), so the state must be read again.
	unread bool
	sights map[string]*sighting // markers due and not yet in the ledger, by key
	// ckptRuns are the runs the journal shows a CheckpointCreated for.
	ckptRuns map[string]bool
	// holds are the rig-setups captured at starting and not yet published
	// or discarded, by marker key (captureRigSetup).
	holds map[string]*hold
}

// hold is a rig-setup checkpoint captured when its codon entered starting,
// in a run that had not yet shown whether its runtime checkpoints by itself.
type hold struct {
	held snapshot.Held
	m    hankweave.Marker
}

// sighting is what cairn knows of a marker from the pass that first saw it.
type sighting struct {
	// boundary is the watch time of the first state.json event after the
	// last read that did not show the marker (zero: none taken yet). A change
	// taken from the watch before it was made before the marker, whatever
	// its file time says.
	boundary, floor time.Time
	stateTime       time.Time // mtime of the state.json that first showed it
	seen            time.Time // when cairn first saw it
	late            bool      // first seen as the daemon started watching
	unbarred        bool      // sealed with no barrier: a full reconcile, racy
	waited          bool      // held back for the runtime's own checkpoint
}

func newHankState(exec string) *hankState {
	return &hankState{exec: exec, journal: hankweave.NewJournal(exec),
		sights: map[string]*sighting{}, ckptRuns: map[string]bool{}, holds: map[string]*hold{}}
}

// saw notes a control file's change taken from the watch, outside the
// lifecycle pass's own reads: it orders the changes around a marker and says
// whether the state must be read again.
func (h *hankState) saw(c watcher.Change) {
	if c.Path == stateRel {
		for _, s := range h.sights {
			if s.boundary.IsZero() && !c.Time.Before(s.floor) {
				s.boundary = c.Time
			}
		}
	}
	if c.Time.Before(h.readAt) {
		return // taken by the watch before the last read: that read reflects it
	}
	h.unread = true
	if c.Path == stateRel && h.firstEvent.IsZero() {
		h.firstEvent = c.Time
	}
}

// sight returns the marker's sighting, recording it if this pass is the first to see it.
func (h *hankState) sight(key string, floor, first time.Time, now time.Time, startup bool) *sighting {
	s := h.sights[key]
	if s == nil {
		s = &sighting{floor: floor, boundary: first, stateTime: h.stateTime, seen: now, late: startup}
		h.sights[key] = s
	}
	return s
}

// currentPatterns is the selection of the codon running now (or last run)
// (checkpoints.CurrentPatterns).
func (h *hankState) currentPatterns() ([]string, bool) { return checkpoints.CurrentPatterns(h.last) }

// lifecycle reads the runtime's state and seals every lifecycle checkpoint
// it implies that the ledger lacks. A barrier first takes in every change
// made before the state was read; a terminal checkpoint whose files were
// written after the codon ended is racy. startup says the daemon has just
// begun watching (missing markers are sealed late, and marked so).
// It returns when to look again, or nil.
func (l *hankLayout) lifecycle(ctx context.Context, wt *watcher.Watcher, startup bool) <-chan time.Time {
	w, h := l.w, l.h
	if startup {
		l.dropHolds(ctx)
	}
	// The journal says what moved (logged) and which runs the runtime
	// checkpoints itself; state.json is the record of truth.
	if evs, err := h.journal.Read(); err != nil {
		w.log.Debug().Err(err).Msg("journal unreadable")
	} else {
		for _, ev := range evs {
			if tr, ok := ev.Transition(); ok {
				w.log.Debug().Str("transition", tr.TransitionType).Str("codon", tr.CodonID).Str("run", tr.RunID).
					Str("from", tr.From).Str("to", tr.To).Msg("runtime transition")
				if tr.TransitionType == "CheckpointCreated" && tr.RunID != "" && tr.SHA != "" {
					h.ckptRuns[tr.RunID] = true
				}
			}
		}
	}
	// The lock before the state: a runtime writes its lock before its first transition.
	lock, lockErr := hankweave.ReadLock(w.dir)
	readAt := time.Now()
	st, err := hankweave.ReadState(w.dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // no run yet
		}
		w.log.Warn().Err(err).Msg("state.json unreadable; retrying")
		w.setStatus(func(s *api.WorkspaceStatus) { s.Error = "state.json unreadable (retrying): " + err.Error() })
		return time.After(stateRetry)
	}
	h.unread = false
	// Markers this read shows for the first time were written after floor.
	floor, first := h.readAt, h.firstEvent
	if st.Warning != nil {
		// An older state: what it lacks may already be in state.json.
		w.log.Warn().Err(st.Warning).Msg("state.json invalid; read state.json.bak")
	} else {
		h.readAt, h.firstEvent = readAt, time.Time{}
	}
	h.last = st
	// The file's own mtime says when the newest transition landed, on the
	// same clock as the agent's files.
	h.stateTime = time.Time{}
	if fi, err := os.Stat(hankweave.StatePath(w.dir)); err == nil {
		h.stateTime = fi.ModTime()
	}
	alive := lockErr == nil && lock != nil && lock.Alive(time.Now())
	have := map[string]bool{}
	recs := w.store.Records()
	var since time.Time // markers older than the first checkpoint predate cairn
	for _, r := range recs {
		if since.IsZero() || r.Time.Before(since) {
			since = r.Time
		}
		if r.RunID != "" && r.CodonID != "" && r.State != ckpt.StateFailed {
			have[markerKey(r.RunID, r.CodonID, r.Attempt, string(r.Kind))] = true
		}
	}
	all := hankweave.Due(st)
	if m := hankweave.ExitDue(st, alive); m != nil {
		all = append(all, *m)
	}
	now := time.Now()
	var due []hankweave.Marker
	var wake time.Time        // when a marker held for the runtime's checkpoint stops waiting
	held := map[string]bool{} // runs whose markers wait behind a held one, to keep the branch in order
	keep := map[string]bool{}
	capture := map[string]bool{} // rig-setups captured now, published when their codon leaves starting
	for _, m := range all {
		if have[m.Key()] || predates(m, since) {
			continue
		}
		s := h.sight(m.Key(), floor, first, now, startup && !stampedAfter(m, w.watchingSince))
		keep[m.Key()] = true
		if held[m.RunID] {
			continue
		}
		if hd := h.holds[m.Key()]; hd != nil {
			hd.m = m
			if startingStill(m, alive) {
				held[m.RunID] = true
				continue
			}
			due = append(due, m) // released: the runtime's own adopted, else the capture published
			continue
		}
		if l.capturesRigSetup(ctx, st, m, alive) {
			capture[m.Key()], held[m.RunID] = true, true
			due = append(due, m)
			continue
		}
		if l.awaitsRuntime(ctx, st, m, alive) {
			if deadline := s.seen.Add(adoptWait); now.Before(deadline) {
				if !s.waited {
					w.log.Debug().Str("codon", m.CodonID).Str("run", m.RunID).Msg("waiting for the runtime's own rig-setup checkpoint")
				}
				s.waited, held[m.RunID] = true, true
				if wake.IsZero() || deadline.Before(wake) {
					wake = deadline
				}
				continue
			}
			w.log.Warn().Str("codon", m.CodonID).Str("run", m.RunID).Dur("waited", adoptWait).
				Msg("the runtime recorded no rig-setup checkpoint in time; sealing one")
		}
		due = append(due, m)
	}
	for k := range h.sights {
		if !keep[k] {
			delete(h.sights, k)
		}
	}
	// A capture whose marker the ledger now has is dropped; one whose marker
	// the state no longer shows is still owed: published.
	for k, hd := range h.holds {
		if have[k] {
			l.discardHold(ctx, hd, "its marker is in the ledger")
		} else if !keep[k] {
			l.release(ctx, wt, st, hd)
		}
	}
	rerun := false
	if slices.ContainsFunc(due, func(m hankweave.Marker) bool { return h.holds[m.Key()] == nil }) {
		// Every change made before the state was read is taken in before
		// anything is sealed. Without a barrier (none could be made, or its
		// mark was not read in time) the changes the watch reported so far
		// cannot vouch for that: the checkpoints are full reconciles, and
		// racy, since what changed after the marker cannot be told apart.
		var sure bool
		rerun, sure = w.barrier(wt)
		if !sure {
			w.needFull = true
		}
		for _, m := range due {
			if s := h.sights[m.Key()]; s != nil {
				s.unbarred = !sure // this pass's: a seal tried again in a later pass has that pass's barrier
			}
		}
	}
	for _, m := range due {
		switch hd := h.holds[m.Key()]; {
		case hd != nil:
			l.release(ctx, wt, st, hd)
		case capture[m.Key()]:
			l.captureRigSetup(ctx, wt, st, m, h.sights[m.Key()])
		default:
			w.sealMarker(ctx, wt, st, m, h.sights[m.Key()])
		}
		if ctx.Err() != nil {
			return nil
		}
	}
	l.prime(ctx)
	if _, control, _ := w.drain(wt, ""); control || rerun || h.unread {
		return time.After(0) // another transition may have landed since the state was read
	}
	if !wake.IsZero() {
		return time.After(min(time.Until(wake), lockCheck))
	}
	if alive {
		return time.After(lockCheck)
	}
	return nil
}

// startingStill reports whether marker m's codon is still starting under a
// live runtime, with no rig-setup SHA recorded: a captured rig-setup is held
// on.
func startingStill(m hankweave.Marker, alive bool) bool {
	return m.Kind == hankweave.KindRigSetup && m.RecordedSHA == "" && m.Status == hankweave.StatusStarting && alive
}

// capturesRigSetup reports whether marker m is a rig-setup to capture now
// rather than seal: its codon is starting, the runtime lives and has
// recorded no SHA, and nothing tells yet whether the run's runtime
// checkpoints by itself (a workspace's first run, before its first codon
// completes). Where it is known either way, the rules of awaitsRuntime
// stand.
func (l *hankLayout) capturesRigSetup(ctx context.Context, st *hankweave.State, m hankweave.Marker, alive bool) bool {
	if !startingStill(m, alive) {
		return false
	}
	yes, known := l.checkpointing(ctx, st, m.RunID)
	return !yes && !known
}

// awaitsRuntime reports whether cairn leaves marker m to the runtime for now:
// a rig-setup the runtime has not recorded yet, in a run whose runtime
// checkpoints by itself, while the codon is still starting (the runtime
// records it before moving on) and the runtime lives. Terminal markers never
// wait: the runtime commits before the terminal write, so its SHA comes with
// the marker or not at all. Exit and autosaves are always cairn's.
func (l *hankLayout) awaitsRuntime(ctx context.Context, st *hankweave.State, m hankweave.Marker, alive bool) bool {
	if m.Kind != hankweave.KindRigSetup || m.RecordedSHA != "" || m.Status != hankweave.StatusStarting || !alive {
		return false
	}
	return l.selfCheckpointing(ctx, st, m.RunID)
}

// selfCheckpointing reports whether the runtime seals its own lifecycle
// checkpoints in the run: the run shows it (SHAs in its records, a
// CheckpointCreated in the journal, or its branch's tip a commit cairn did
// not seal) or, while its records tell neither way, the newest older run
// that tells did. A run's first rig-setup comes before it can show anything.
func (l *hankLayout) selfCheckpointing(ctx context.Context, st *hankweave.State, runID string) bool {
	yes, _ := l.checkpointing(ctx, st, runID)
	return yes
}

// checkpointing is selfCheckpointing, and whether anything tells either way.
func (l *hankLayout) checkpointing(ctx context.Context, st *hankweave.State, runID string) (yes, known bool) {
	i := slices.IndexFunc(st.Runs, func(r hankweave.Run) bool { return r.RunID == runID })
	if i < 0 {
		return false, true // not a run of the state: nothing to wait for
	}
	for j := i; j < len(st.Runs); j++ {
		yes, known := hankweave.RuntimeCheckpoints(&st.Runs[j])
		if yes || l.h.ckptRuns[st.Runs[j].RunID] {
			return true, true
		}
		if known {
			return false, true
		}
	}
	// Git last: a commit on the branch may precede the write that records it.
	if l.w.foreignTip(ctx, runID) {
		return true, true
	}
	return false, false
}

// foreignTip reports whether run-<runID>'s tip is a commit cairn did not
// seal itself: the runtime's own (or one cairn adopted from it).
func (w *Workspace) foreignTip(ctx context.Context, runID string) bool {
	tip, ok := w.store.Resolve(ctx, "refs/heads/run-"+runID)
	if !ok {
		return false // no branch yet
	}
	for _, r := range w.store.Records() {
		if r.SHA == tip {
			return r.Adopted
		}
	}
	return tip != ""
}

func markerKey(run, codon string, attempt int, kind string) string {
	return (hankweave.Marker{RunID: run, CodonID: codon, Attempt: attempt, Kind: hankweave.Kind(kind)}).Key()
}

// predates reports whether the marker happened before cairn first watched
// the workspace: its checkpoint would hold today's files, not that moment's.
// An exit counts from when the runtime ended its run; a run still marked
// running may have lost its runtime at any time, so its exit is always owed.
func predates(m hankweave.Marker, since time.Time) bool {
	if since.IsZero() {
		return false
	}
	t := markerTime(m)
	return !t.IsZero() && t.Before(since)
}

// stampedAfter reports whether marker m's time is later than since, so the
// watch that began at since saw what followed it: the first pass of a watch
// seals such a marker as any other, not "sealed late". A marker with no
// time, or one in the watch's own millisecond, counts as late.
func stampedAfter(m hankweave.Marker, since time.Time) bool {
	t := markerTime(m)
	return !since.IsZero() && !t.IsZero() && t.After(since)
}

// markerTime is when marker m happened, by the runtime's clock: an exit
// when the runtime ended its run, else when the codon ended or started.
func markerTime(m hankweave.Marker) time.Time {
	switch {
	case m.Kind == hankweave.KindExit:
		return m.Stopped
	case !m.EndTime.IsZero():
		return m.EndTime
	default:
		return m.StartTime
	}
}

// sealMarker adopts the runtime's own checkpoint when git confirms it, and
// otherwise seals one.
func (w *Workspace) sealMarker(ctx context.Context, wt *watcher.Watcher, st *hankweave.State, m hankweave.Marker, s *sighting) {
	if m.RecordedSHA != "" && w.adoptMarker(ctx, m) {
		return
	}
	rec, err := w.seal(ctx, wt, w.markerRequest(st, m, s), true)
	if err == nil && rec.ID != "" {
		w.markerSealed(s)
	}
}

// adoptMarker adopts the runtime's own checkpoint of m when git confirms it.
func (w *Workspace) adoptMarker(ctx context.Context, m hankweave.Marker) bool {
	rec, err := w.store.Adopt(ctx, snapshot.AdoptRequest{SHA: m.RecordedSHA, Kind: m.Kind, CodonID: m.CodonID,
		CodonName: m.CodonName, RunID: m.RunID, Attempt: m.Attempt})
	if err != nil {
		w.log.Warn().Err(err).Str("codon", m.CodonID).Msg("runtime checkpoint not confirmed by git; sealing one")
		return false
	}
	w.log.Info().Str("id", rec.ID).Str("sha", rec.SHA).Str("codon", m.CodonID).Msg("adopted the runtime's checkpoint")
	w.met.Checkpoint(rec)
	w.replicateSoon(rec.Kind)
	return true
}

// markerRequest is the seal request of marker m's checkpoint.
func (w *Workspace) markerRequest(st *hankweave.State, m hankweave.Marker, s *sighting) snapshot.SealRequest {
	req := snapshot.SealRequest{Kind: m.Kind, CodonID: m.CodonID, CodonName: m.CodonName, RunID: m.RunID,
		Attempt: m.Attempt, Duration: m.Duration(), Patterns: w.Patterns(m.Patterns)}
	if m.Patterns == nil {
		req.Patterns = nil
	}
	if run := st.Run(m.RunID); run != nil && run.StartingConditions.Source != nil {
		req.StartSHA = run.StartingConditions.Source.CheckpointSHA
	}
	switch {
	case s.late:
		req.Racy = []ckpt.PathIssue{{Path: ".", Reason: "sealed late: the daemon was not watching at the marker; files may have changed since"}}
	case s.unbarred:
		req.Racy = append(w.changedAfter(m, s), ckpt.PathIssue{Path: ".", Reason: "sealed with no barrier: the whole tree reconciled, and changes made after the marker cannot be told from those before it"})
	default:
		req.Racy = w.changedAfter(m, s)
	}
	return req
}

// markerSealed observes the latency of a marker's checkpoint taken now.
func (w *Workspace) markerSealed(s *sighting) {
	if s.late {
		return
	}
	// From the state.json that showed the marker (the agent's clock), else from first sight.
	marked := s.stateTime
	if marked.IsZero() {
		marked = s.seen
	}
	w.met.MarkerSealed(marked)
}

// captureRigSetup captures marker m's rig-setup as sealMarker would seal
// it, the barrier and racy rules alike, but holds it (snapshot.Store.Capture)
// until the codon leaves starting: in a run not yet known to checkpoint by
// itself, the runtime may still record its own, which is adopted instead.
// A capture that fails is recorded as a failed seal; the marker stays due.
func (l *hankLayout) captureRigSetup(ctx context.Context, wt *watcher.Watcher, st *hankweave.State, m hankweave.Marker, s *sighting) {
	w := l.w
	h, err := w.capture(ctx, wt, w.markerRequest(st, m, s))
	if err != nil {
		return
	}
	l.h.holds[m.Key()] = &hold{held: h, m: m}
	w.markerSealed(s)
}

// release ends a capture whose codon left starting (or whose runtime
// died): the runtime's own rig-setup is adopted if it recorded one git
// confirms, and the capture dropped; otherwise the capture is published.
func (l *hankLayout) release(ctx context.Context, wt *watcher.Watcher, st *hankweave.State, hd *hold) {
	w, m := l.w, hd.m
	if m.RecordedSHA != "" && w.adoptMarker(ctx, m) {
		l.discardHold(ctx, hd, "the runtime recorded its own")
		return
	}
	delete(l.h.holds, m.Key())
	rec, err := w.store.Publish(ctx, hd.held)
	if err != nil {
		// Owed all the same: sealed now, saying its files are not those of starting.
		w.log.Error().Err(err).Str("codon", m.CodonID).Str("run", m.RunID).Msg("the rig-setup captured at starting could not be published; sealing one")
		w.setStatus(func(s *api.WorkspaceStatus) { s.Failures++ })
		w.publishError("SEAL_FAILED", err.Error())
		req := w.markerRequest(st, m, &sighting{})
		req.Racy = []ckpt.PathIssue{{Path: ".", Reason: "sealed after its codon left starting: the capture taken at starting was lost; files may have changed since"}}
		_, _ = w.seal(ctx, wt, req, true)
		return
	}
	w.log.Info().Str("id", rec.ID).Str("sha", rec.SHA).Str("state", string(rec.State)).Str("codon", m.CodonID).
		Str("run", m.RunID).Msg("published the rig-setup captured at starting")
	w.met.Checkpoint(rec)
	if w.emit != nil {
		w.emit(api.Event{Type: api.EvCheckpointSealed, Workspace: w.dir, Time: time.Now(), Data: rec})
	}
	w.replicateSoon(rec.Kind)
	k := kept(w.store)
	w.setStatus(func(s *api.WorkspaceStatus) {
		s.Seals++
		s.Last, s.LastState, s.LastTime = rec.ID, string(rec.State), rec.Time
		s.Kept = k
	})
}

// discardHold drops a capture, saying why in the log.
func (l *hankLayout) discardHold(ctx context.Context, hd *hold, why string) {
	delete(l.h.holds, hd.m.Key())
	if err := l.w.store.Discard(ctx, hd.held); err != nil {
		l.w.noteHeldLeft(err, "dropping a captured rig-setup failed; its ref is dropped at the next start")
		return
	}
	l.w.log.Debug().Str("codon", hd.m.CodonID).Str("run", hd.m.RunID).Str("why", why).Msg("captured rig-setup dropped")
}

// dropHolds forgets every capture at the start of a watch, and drops the
// held refs an earlier daemon left: a capture does not survive a restart.
// Its marker, still due, is captured again or sealed, marked racy as
// "sealed late" (the daemon was not watching at the marker).
func (l *hankLayout) dropHolds(ctx context.Context) {
	clear(l.h.holds)
	if l.w.store == nil {
		return
	}
	gone, err := l.w.store.DiscardHeld(ctx)
	if err != nil {
		l.w.noteHeldLeft(err, "dropping captured rig-setups left by an earlier start failed; tried again at the next start")
	}
	if len(gone) > 0 {
		l.w.log.Info().Strs("refs", gone).Msg("dropped captured rig-setups an earlier start left unpublished")
	}
}

// changedAfter names the pending paths changed after the marker. The watch's
// single queue orders them first: a change taken before the first state.json
// event that can carry the marker precedes it, whatever its file time says
// (a file written in the marker's millisecond, or tick, reads as newer).
// Only later ones are judged by file time (a path that is gone, by when its
// event was read): for a terminal marker, in a later millisecond than its
// endTime, or not before the state file that showed it (the agent writes up
// to its marker and right after it, so a tie counts as racy); for a
// rig-setup cairn sealed after waiting for the runtime, taken since it was
// first seen and stamped after that state file. The changes taken while
// sealing are added by seal.
func (w *Workspace) changedAfter(m hankweave.Marker, s *sighting) []ckpt.PathIssue {
	var after func(taken, when time.Time) bool
	switch {
	case !m.EndTime.IsZero():
		after = func(taken, when time.Time) bool {
			if s.boundary.IsZero() || taken.Before(s.boundary) {
				return false
			}
			return m.EndedBefore(when) || (!s.stateTime.IsZero() && !when.Before(s.stateTime))
		}
	case s.waited && !s.stateTime.IsZero():
		after = func(taken, when time.Time) bool { return !taken.Before(s.seen) && when.After(s.stateTime) }
	default:
		return nil
	}
	var racy []ckpt.PathIssue
	seen := make(map[string]time.Time, len(w.dirty)+len(w.racyCarry))
	for p, taken := range w.racyCarry {
		seen[p] = taken
	}
	for p, taken := range w.dirty {
		seen[p] = taken
	}
	for p, taken := range seen {
		when := taken
		if fi, err := os.Lstat(filepath.Join(w.store.WorkTree(), filepath.FromSlash(p))); err == nil {
			when = fi.ModTime()
		}
		if after(taken, when) {
			racy = append(racy, ckpt.PathIssue{Path: p, Reason: "changed after the lifecycle marker"})
		}
	}
	sort.Slice(racy, func(i, j int) bool { return racy[i].Path < racy[j].Path })
	return racy
}

// barrierWait is how long a barrier waits for its mark to be read.
const barrierWait = time.Second

// barrier takes in every change queued before now; it reports whether a
// control file changed meanwhile, and whether every change made before the
// call is now known to have been taken in (sure): false when no mark could
// be made (watcher.Watcher.Mark, in the state folder: nothing is written in
// the work tree) or it was not read within barrierWait.
func (w *Workspace) barrier(wt *watcher.Watcher) (control, sure bool) {
	if wt == nil {
		return false, false
	}
	mark, err := wt.Mark()
	if err != nil && err.Error() != w.markErr {
		// Said once per reason: every lifecycle pass makes a barrier.
		w.markErr = err.Error()
		const why = "no barrier: restores and lifecycle checkpoints reconcile the whole work tree, lifecycle checkpoints are recorded racy"
		w.log.Warn().Err(err).Msg(why)
		at := time.Now().Format(time.RFC3339)
		w.setStatus(func(s *api.WorkspaceStatus) { s.Notice = at + ": " + why + ": " + err.Error() })
	}
	_, control, sure = w.drain(wt, mark)
	return control, sure
}

// prime stages the index under the selection of the codon now running, as
// soon as it starts: its lifecycle checkpoints then only stage the last
// changes, instead of reconciling the whole tree under new patterns at the
// marker, when the agent is waiting.
func (l *hankLayout) prime(ctx context.Context) {
	w, h := l.w, l.h
	pats, ok := h.currentPatterns()
	if !ok {
		return
	}
	pats = w.Patterns(pats)
	key := strings.Join(pats, "\x00")
	if key == h.primed && w.store == h.primedIn {
		return
	}
	start := time.Now()
	if err := w.store.Stage(ctx, pats, w.changed()); err != nil {
		w.log.Warn().Err(err).Msg("priming the index for the next codon failed")
		return
	}
	h.primed, h.primedIn = key, w.store
	w.log.Debug().Int64("duration_ms", time.Since(start).Milliseconds()).Msg("index primed for the running codon")
}

// noteHeldLeft says in the log and status that a held ref could not be
// removed: no checkpoint is lost, but git keeps its objects until it is.
func (w *Workspace) noteHeldLeft(err error, msg string) {
	w.log.Warn().Err(err).Msg(msg)
	at := time.Now().Format(time.RFC3339)
	w.setStatus(func(s *api.WorkspaceStatus) { s.Notice = at + ": " + msg + ": " + err.Error() })
}
