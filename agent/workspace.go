package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/rs/zerolog"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/hankweave"
	"github.com/cairn-dev/cairn/snapshot"
	"github.com/cairn-dev/cairn/watcher"
)

// Workspace states in status.
const (
	stateStarting = "starting"
	stateWatching = "watching"
	stateDegraded = "degraded" // watch limit hit: periodic full reconciles
	stateFailed   = "failed"
)

// sealGrace is how long a seal in progress may finish after shutdown begins.
const sealGrace = 7 * time.Second

// workspace watches one execution directory and seals its checkpoints. All
// of its work runs on one goroutine, so seals of a workspace never overlap.
type workspace struct {
	dir      string
	set      Settings
	stateDir string
	log      zerolog.Logger

	store *snapshot.Store
	hank  *hankState // lifecycle tracking; nil for the plain layout

	dirty    map[string]time.Time // work-tree paths changed since the last seal, with their latest event time
	deb      *watcher.Debouncer   // autosave timing; nil until watching
	needFull bool                 // events were lost: the next seal reconciles everything

	mu     sync.Mutex
	status api.WorkspaceStatus
	wt     *watcher.Watcher // for live watch counts in status

	jobs     chan sealJob    // checkpoints asked for over the socket
	restores chan restoreJob // restores and rollbacks asked for over the socket (restore_api.go)
	// rolling is set while a restore or rollback is under way: other
	// state-changing requests are refused with ROLLBACK_IN_PROGRESS.
	rolling atomic.Bool
	snap    atomic.Pointer[listSnap] // the ledger as a rollback found it: listings answer from it meanwhile
	// emit publishes an event (nil: nobody listens).
	emit func(api.Event)

	cancel context.CancelFunc
	done   chan struct{}
}

// sealJob is a checkpoint requested from outside the workspace's goroutine.
type sealJob struct {
	req   snapshot.SealRequest
	reply chan sealResult // buffered: the workspace never blocks on it
}

type sealResult struct {
	rec snapshot.Record
	err error
}

// errNotServing means the workspace is not watching yet (or failed).
var errNotServing = errors.New("workspace is not being watched right now; see cairn status")

// checkpoint asks the workspace's goroutine to seal req and waits for it.
func (w *workspace) checkpoint(ctx context.Context, req snapshot.SealRequest) (snapshot.Record, error) {
	job := sealJob{req: req, reply: make(chan sealResult, 1)}
	select {
	case w.jobs <- job:
	case <-ctx.Done():
		return snapshot.Record{}, ctx.Err()
	case <-w.done:
		return snapshot.Record{}, errNotServing
	case <-time.After(30 * time.Second):
		return snapshot.Record{}, errNotServing
	}
	select {
	case r := <-job.reply:
		return r.rec, r.err
	case <-ctx.Done():
		return snapshot.Record{}, ctx.Err()
	}
}

func newWorkspace(dir string, set Settings, stateDir string, log zerolog.Logger) *workspace {
	return &workspace{
		dir: dir, set: set, stateDir: stateDir,
		log:      log.With().Str("workspace", dir).Logger(),
		dirty:    map[string]time.Time{},
		jobs:     make(chan sealJob),
		restores: make(chan restoreJob),
		status:   api.WorkspaceStatus{Dir: dir, Layout: set.Layout, State: stateStarting},
	}
}

// start runs the workspace until ctx ends or stop is called.
func (w *workspace) start(ctx context.Context) {
	ctx, w.cancel = context.WithCancel(ctx)
	w.done = make(chan struct{})
	go func() {
		defer close(w.done)
		w.run(ctx)
	}()
}

// stop ends the workspace and waits for it.
func (w *workspace) stop() {
	w.cancel()
	<-w.done
}

func (w *workspace) snapshotStatus() api.WorkspaceStatus {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.status
	st.Rolling = w.rolling.Load()
	if w.wt != nil {
		st.Watches = w.wt.Status().Watches
	}
	return st
}

func (w *workspace) setStatus(fn func(s *api.WorkspaceStatus)) {
	w.mu.Lock()
	fn(&w.status)
	w.mu.Unlock()
}

func (w *workspace) fail(err error) {
	w.log.Error().Err(err).Msg("workspace failed")
	w.setStatus(func(s *api.WorkspaceStatus) { s.State, s.Error = stateFailed, err.Error() })
}

// run opens the store (retrying with backoff while it fails), then serves
// the workspace's events.
func (w *workspace) run(ctx context.Context) {
	backoff := time.Second
	for {
		err := w.open(ctx)
		if err == nil {
			break
		}
		w.fail(err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Minute)
	}
	if err := w.serve(ctx); err != nil && ctx.Err() == nil {
		w.fail(err)
	}
}

func (w *workspace) open(ctx context.Context) error {
	w.adoptStore()
	st, err := snapshot.Open(ctx, w.dir, snapshot.Options{
		Layout: snapshot.Layout(w.set.Layout), StateDir: w.stateDir,
		MaxFileSize: int64(w.set.MaxFileSize), Patterns: w.patterns(w.set.Patterns),
	})
	if err != nil {
		return err
	}
	w.store = st
	w.setStatus(func(s *api.WorkspaceStatus) {
		s.Layout, s.WorkTree, s.Store, s.Error = string(st.Layout()), st.WorkTree(), st.GitDir(), ""
	})
	if st.Layout() == snapshot.LayoutHankweave {
		w.hank = newHankState(w.dir)
	}
	return nil
}

// adoptStore moves a store its supervisor handed over (an earlier cairn kept
// it in the shared stores folder) into this worker's stores folder.
func (w *workspace) adoptStore() {
	name := snapshot.PlainStoreName(w.dir)
	src := filepath.Join(w.stateDir, migratePrefix+name)
	if fi, err := os.Lstat(src); err != nil || !fi.IsDir() {
		return
	}
	dst := filepath.Join(w.stateDir, "stores", name)
	if _, err := os.Lstat(dst); err == nil {
		w.log.Warn().Str("store", src).Msg("a handed-over store waits beside a newer one; keeping both")
		return
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		w.log.Warn().Err(err).Msg("could not adopt a handed-over store")
		return
	}
	if err := os.Rename(src, dst); err != nil {
		w.log.Warn().Err(err).Msg("could not adopt a handed-over store")
		return
	}
	w.log.Info().Str("store", dst).Msg("store adopted from the shared stores folder")
}

// patterns adds the configured excludes to a selection.
func (w *workspace) patterns(base []string) []string {
	out := append([]string(nil), base...)
	for _, e := range w.set.Excludes {
		if len(e) > 0 && e[0] != '!' {
			e = "!" + e
		}
		out = append(out, e)
	}
	return out
}

// skip keeps the store, .git folders, runtime folders and configured
// excludes out of the watch.
func (w *workspace) skip(rel string, isDir bool) bool {
	if snapshot.Excluded(rel) {
		return true
	}
	for _, e := range w.set.Excludes {
		e = path.Clean(e)
		if ok, _ := doublestar.Match(e, rel); ok {
			return true
		}
		if ok, _ := doublestar.Match(e+"/**", rel); ok {
			return true
		}
	}
	return false
}

func (w *workspace) serve(ctx context.Context) error {
	// One watch, one queue: for the Hankweave layout it covers the work tree
	// and the runtime's control files, so a marker is ordered exactly against
	// the file changes around it.
	root := w.store.WorkTree()
	if w.hank != nil {
		root = w.dir
	}
	opts := watcher.Options{Root: root, Skip: w.skipFromRoot}
	wt, err := watcher.Start(ctx, opts)
	if err != nil {
		return fmt.Errorf("watch %s: %w", root, err)
	}
	w.setStatus(func(*api.WorkspaceStatus) { w.wt = wt })
	defer func() {
		w.setStatus(func(*api.WorkspaceStatus) { w.wt = nil })
		wt.Close()
	}()
	deb := watcher.NewDebouncer(w.set.AutosaveQuiet.Duration, w.set.AutosaveMaxWait.Duration)
	defer deb.Stop()
	w.deb = deb

	w.updateWatchStatus(wt)
	w.initialSeal(ctx)
	var lifecycleTimer <-chan time.Time
	if w.hank != nil {
		lifecycleTimer = w.lifecycle(ctx, wt, true)
	}

	degradedBackoff := 30 * time.Second
	var degraded <-chan time.Time
	if wt.Status().LimitHit {
		degraded = time.After(degradedBackoff)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case c, open := <-wt.Changes():
			if !open {
				return nil // the watcher stopped: the workspace is shutting down
			}
			if rel, ok := w.workRel(c.Path); ok {
				w.note(rel, c.Time)
			} else if w.hank != nil && c.Path != barrierRel {
				lifecycleTimer = w.lifecycle(ctx, wt, false)
			}
		case <-wt.Overflow():
			w.needFull = true
			w.updateWatchStatus(wt)
			if wt.Status().LimitHit && degraded == nil {
				degraded = time.After(degradedBackoff)
			}
			if w.autosaveOn() {
				deb.Add("", time.Now())
			}
			if w.hank != nil { // a lost event may have been a marker
				lifecycleTimer = w.lifecycle(ctx, wt, false)
			}
		case <-lifecycleTimer:
			lifecycleTimer = w.lifecycle(ctx, wt, false)
		case <-deb.C():
			deb.Take()
			w.autosave(ctx, wt)
		case job := <-w.jobs:
			rec, err := w.seal(ctx, wt, job.req, false)
			job.reply <- sealResult{rec, err}
		case job := <-w.restores:
			w.drain(wt)
			// The pre-restore checkpoint stages only what the watch saw change.
			var changed []string
			if !w.needFull {
				changed = make([]string, 0, len(w.dirty))
				for p := range w.dirty {
					if p != "" {
						changed = append(changed, p)
					}
				}
			}
			job.run(ctx, changed)
			// The checkout rewrote files: the next seal reconciles everything.
			w.needFull = true
		case <-degraded:
			// Without a complete watch, only a full reconcile sees every change.
			w.needFull = true
			w.autosave(ctx, wt)
			// The limit may have been raised (or other watches released): try again.
			if nw, err := watcher.Start(ctx, opts); err == nil && !nw.Status().LimitHit {
				wt.Close()
				wt = nw
				w.setStatus(func(*api.WorkspaceStatus) { w.wt = nw })
				w.needFull = true // changes between the two watches
				w.updateWatchStatus(wt)
				degraded = nil
				w.log.Info().Msg("watch complete again")
				continue
			} else if err == nil {
				nw.Close()
			}
			degradedBackoff = min(degradedBackoff*2, 10*time.Minute)
			degraded = time.After(degradedBackoff)
		}
		w.setStatus(func(s *api.WorkspaceStatus) { s.Pending = len(w.dirty) })
	}
}

// workRel turns a path relative to the watch root into one relative to the
// work tree; ok is false for the runtime's control files.
func (w *workspace) workRel(rel string) (string, bool) {
	if w.hank == nil || w.store.WorkTree() == w.dir {
		if w.hank != nil && isControl(rel) {
			return "", false
		}
		return rel, true
	}
	if r, ok := strings.CutPrefix(rel, "agentRoot/"); ok {
		return r, true
	}
	return "", false
}

// skipFromRoot is the watch filter: the work tree minus what is never
// checkpointed, plus (Hankweave) the runtime's state, lock and journal.
func (w *workspace) skipFromRoot(rel string, isDir bool) bool {
	if w.hank != nil {
		if rel == ".hankweave" || rel == ".hankweave/events" {
			return false
		}
		if strings.HasPrefix(rel, ".hankweave/") {
			return !isControl(rel) && rel != barrierRel
		}
		if w.store.WorkTree() != w.dir {
			if rel == "agentRoot" {
				return false
			}
			r, ok := strings.CutPrefix(rel, "agentRoot/")
			if !ok {
				return true
			}
			rel = r
		}
	}
	return w.skip(rel, isDir)
}

// isControl reports whether rel (from the execution directory) is a runtime
// file whose change may be a lifecycle marker.
func isControl(rel string) bool {
	switch rel {
	case ".hankweave/state.json", ".hankweave/runtime.lock", ".hankweave/events/events.jsonl", ".hankweave/events/events.jsonl.zst":
		return true
	}
	return false
}

// note records a work-tree change: dirty for the next seal, and a nudge to the autosave timer.
func (w *workspace) note(rel string, t time.Time) {
	w.dirty[rel] = t
	if w.deb != nil && w.autosaveOn() {
		w.deb.Add(rel, t)
	}
}

func (w *workspace) autosaveOn() bool { return w.set.Autosave == nil || *w.set.Autosave }

func (w *workspace) updateWatchStatus(wt *watcher.Watcher) {
	ws := wt.Status()
	w.setStatus(func(s *api.WorkspaceStatus) {
		s.Watches = ws.Watches
		switch {
		case ws.LimitHit:
			s.State, s.Error = stateDegraded, ws.Err
		case s.State != stateFailed:
			s.State, s.Error = stateWatching, ""
		}
	})
	if ws.LimitHit {
		w.log.Warn().Str("error", ws.Err).Msg("watch limit hit; falling back to periodic full reconciles")
	}
}

// initialSeal seals a baseline the first time a workspace is watched, and
// otherwise reconciles what changed while cairn was not watching.
func (w *workspace) initialSeal(ctx context.Context) {
	req := snapshot.SealRequest{Kind: snapshot.KindAutosave, Label: "changes while cairn was not watching", SkipUnchanged: true}
	if len(w.store.Records()) == 0 {
		req = snapshot.SealRequest{Kind: snapshot.KindBaseline, Label: "first watched"}
	}
	w.needFull = true // nothing says what changed while cairn was not watching
	if w.hank != nil {
		if st, err := hankweave.ReadState(w.dir); err == nil {
			w.hank.last = st
		}
		pats, ok := w.hank.currentPatterns()
		if !ok && req.Kind == snapshot.KindAutosave {
			return // no plan yet: nothing the runtime checkpoints
		}
		req.Patterns = w.patterns(pats)
	}
	w.seal(ctx, nil, req, false)
}

// autosave seals what changed since the last checkpoint, if anything did.
func (w *workspace) autosave(ctx context.Context, wt *watcher.Watcher) {
	req := snapshot.SealRequest{Kind: snapshot.KindAutosave, SkipUnchanged: true}
	if w.hank != nil {
		pats, ok := w.hank.currentPatterns()
		if !ok {
			return
		}
		req.Patterns = w.patterns(pats)
	}
	w.seal(ctx, wt, req, false)
}

// drain moves events already queued by the watcher into the dirty set, so a
// seal sees every change reported before it began. It returns the work-tree
// paths it moved (changes that came after whatever is being sealed for) and
// whether a control file changed meanwhile.
func (w *workspace) drain(wt *watcher.Watcher) (moved []string, control bool) {
	if wt == nil {
		return nil, false
	}
	for {
		select {
		case c, open := <-wt.Changes():
			if !open {
				return moved, control // the watcher stopped (shutdown)
			}
			if rel, ok := w.workRel(c.Path); ok {
				w.note(rel, c.Time)
				moved = append(moved, rel)
			} else if c.Path != barrierRel {
				control = true
			}
		case <-wt.Overflow():
			w.needFull = true
		default:
			return moved, control
		}
	}
}

// seal seals one checkpoint from the dirty set. For a lifecycle marker
// (marker true), paths whose changes were queued after the marker's own event
// make the checkpoint racy: the agent was already writing again.
func (w *workspace) seal(ctx context.Context, wt *watcher.Watcher, req snapshot.SealRequest, marker bool) (snapshot.Record, error) {
	after, _ := w.drain(wt)
	if !w.needFull {
		req.Changed = make([]string, 0, len(w.dirty))
		for p := range w.dirty {
			if p != "" {
				req.Changed = append(req.Changed, p)
			}
		}
		sort.Strings(req.Changed)
	}
	if marker {
		seen := map[string]bool{}
		for _, r := range req.Racy {
			seen[r.Path] = true
		}
		for _, p := range after {
			if !seen[p] {
				seen[p] = true
				req.Racy = append(req.Racy, snapshot.PathIssue{Path: p, Reason: "changed after the lifecycle marker"})
			}
		}
	}
	// A seal in progress may finish after shutdown begins, within a grace.
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stopOnCancel := context.AfterFunc(ctx, func() {
		select {
		case <-time.After(sealGrace):
			cancel()
		case <-sctx.Done():
		}
	})
	defer stopOnCancel()
	rec, err := w.store.Seal(sctx, req)
	log := w.log.With().Str("kind", string(req.Kind)).Str("codon", req.CodonID).Str("run", req.RunID).Logger()
	if err != nil {
		log.Error().Err(err).Str("id", rec.ID).Msg("seal failed")
		w.setStatus(func(s *api.WorkspaceStatus) {
			s.Failures++
			s.Error = err.Error()
			if rec.ID != "" {
				s.Last, s.LastState, s.LastTime = rec.ID, string(rec.State), rec.Time
			}
		})
		return rec, err
	}
	clear(w.dirty)
	w.needFull = false
	if w.deb != nil {
		w.deb.Take() // what it was waiting to autosave is sealed
	}
	if rec.ID == "" {
		return rec, nil // autosave with nothing changed
	}
	ev := log.Info()
	if rec.State != snapshot.StateOK {
		ev = log.Warn().Interface("issues", rec.Issues)
	}
	ev.Str("id", rec.ID).Str("sha", rec.SHA).Str("state", string(rec.State)).Int64("duration_ms", rec.DurationMS).
		Int("added", rec.Added).Int("changed", rec.Changed).Int("removed", rec.Removed).Msg("checkpoint sealed")
	if w.emit != nil {
		w.emit(api.Event{Type: api.EvCheckpointSealed, Workspace: w.dir, Time: time.Now(), Data: toAPIRecord(rec)})
	}
	w.setStatus(func(s *api.WorkspaceStatus) {
		s.Seals++
		s.Last, s.LastState, s.LastTime = rec.ID, string(rec.State), rec.Time
		if s.State != stateDegraded {
			s.Error = ""
		}
	})
	return rec, nil
}
