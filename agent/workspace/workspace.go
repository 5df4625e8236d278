package workspace

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cairn-dev/cairn/agent/config"

	"github.com/rs/zerolog"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/autodev"
	"github.com/cairn-dev/cairn/restore/ckpt"
	"github.com/cairn-dev/cairn/snapshot"
	"github.com/cairn-dev/cairn/watcher"
)

// Workspace states in status.
const (
	StateStarting = "starting"
	StateWatching = "watching"
	StateDegraded = "degraded" // watch limit hit: every seal a full reconcile, plus periodic ones
	StateFailed   = "failed"   // the store cannot be opened, or the last seal failed (retried)
	StateGone     = "gone"     // the workspace folder was removed
)

// SealGrace is how long a seal in progress may finish after shutdown begins.
const SealGrace = 7 * time.Second

// Timings of a workspace's recovery. A degraded workspace retries a complete
// watch after rewatchFirst, doubling to rewatchMax; a failed seal is retried
// after retryFirst, doubling to retryMax (each attempt is a ledger record, so
// not faster). Every healthEvery the folder and the store are checked to
// still exist.
var (
	rewatchFirst = 30 * time.Second
	rewatchMax   = 10 * time.Minute
	retryFirst   = 2 * time.Second
	floorRecheck = 10 * time.Second // how often paused autosaves look at the disk again
	retryMax     = 5 * time.Minute
	healthEvery  = 5 * time.Second
)

// MigratePrefix names a store handed from the shared stores folder to its
// owner's folder; the owner's worker moves it into place (adoptStore).
const MigratePrefix = ".cairn-migrated-"

// maxSkippedShown bounds the over-size files status names.
const maxSkippedShown = 50

// workspace watches one execution directory and seals its checkpoints. All
// of its work runs on one goroutine, so seals of a workspace never overlap.
type Workspace struct {
	dir      string
	set      config.Settings
	stateDir string
	log      zerolog.Logger

	store *snapshot.Store
	lay   layout // plain or Hankweave, chosen when the store opens; or autodev (no store)
	// adRepo is the user's repository in the autodev layout (autodev.go).
	adRepo atomic.Pointer[autodev.Repo]

	// What the next seal holds: the work-tree paths changed since the last
	// seal (with their latest event time), or everything (needFull: events
	// were lost, or nothing says what changed).
	dirty    map[string]time.Time
	needFull bool
	// controlTaken: a runtime control file's change was taken from the
	// watch since the last lifecycle pass (a seal's or a restore's drain
	// may take it): a pass is due, or a marker would wait for the next event.
	controlTaken bool
	markErr      string             // the last reason no barrier mark could be made, said once
	deb          *watcher.Debouncer // autosave timing (when, not what); nil until watching

	// Owned by the workspace's goroutine: degraded mode, seal retries, health.
	degraded       bool              // the watch limit was hit: part of the tree is unwatched
	reconcile      alarm             // degraded, autosave on: the next periodic full reconcile
	lastReconcile  time.Time         // the last full reconcile that sealed (or found nothing to seal)
	sealEnded      time.Time         // when the last seal that recorded a checkpoint ended: idle counts from it
	rewatch        alarm             // degraded: the next attempt at a complete watch
	rewatchBackoff time.Duration     //
	retry          alarm             // the last seal failed: the next attempt
	retryBackoff   time.Duration     //
	failing        error             // why the last seal failed; nil after a success
	gone           bool              // the workspace folder was removed
	tooBig         map[string]string // files left out for their size, with why, as last seen
	// unsealed are the paths the last checkpoint could not read (a full
	// disk, a permission): dirty until a checkpoint holds them.
	unsealed map[string]bool
	// racyCarry are the paths the last lifecycle checkpoint named racy
	// (written after its marker), with when the watch saw them: sealed, so
	// no longer dirty, yet the next marker's checkpoint holds them too and
	// must name those written after its own marker (changedAfter).
	racyCarry map[string]time.Time
	// fg are the folders in and above the workspace others can write (foreign.go).
	fg foreignState
	// watchingSince is when the current watch was complete: a marker
	// stamped after it was made while the daemon watched, even when the
	// watch's first lifecycle pass is the one that sees it.
	watchingSince time.Time

	mu     sync.Mutex
	status api.WorkspaceStatus
	wt     *watcher.Watcher // for live watch counts in status

	jobs     chan sealJob    // checkpoints asked for over the socket
	restores chan restoreJob // restores and rollbacks asked for over the socket (restore_jobs.go)
	gcs      chan gcJob      // maintenance asked for over the socket (maintenance.go)
	maint    maintState      // maintenance in idle time (maintenance.go)
	repl     replState       // pushes to the fleet remote (replication.go)
	// rolling is set while a restore or rollback is under way: other
	// state-changing requests are refused with ROLLBACK_IN_PROGRESS.
	rolling atomic.Bool
	// measuring is set while measureSoon measures the store; measureAgain
	// asks it for one more measurement when it ends.
	measuring, measureAgain atomic.Bool
	bg                      sync.WaitGroup           // measureSoon's goroutine: serve waits for it
	snap                    atomic.Pointer[listSnap] // the ledger as a rollback found it: listings answer from it meanwhile
	// emit publishes an event (nil: nobody listens).
	emit func(api.Event)
	met  Metrics // counts seals, restores, maintenance and overflows

	cancel context.CancelFunc
	done   chan struct{}
}

// Dir is the workspace's folder.
func (w *Workspace) Dir() string { return w.dir }

// Settings are the settings the workspace was started with.
func (w *Workspace) Settings() config.Settings { return w.set }

// Busy reports whether a restore or rollback of the workspace is under way:
// other state-changing requests are refused meanwhile.
func (w *Workspace) Busy() bool { return w.rolling.Load() }

// Metrics counts what workspaces do (the daemon's /metrics). A workspace
// made outside a daemon counts nothing.
type Metrics interface {
	// Sealed counts a seal that made a record or failed.
	Sealed(kind ckpt.Kind, rec ckpt.Record, err error, took time.Duration)
	// Checkpoint counts a record not sealed by the workspace's seal:
	// adopted from the runtime, or made before a restore.
	Checkpoint(rec ckpt.Record)
	// MarkerSealed observes the latency of a lifecycle checkpoint written at marked.
	MarkerSealed(marked time.Time)
	// Restored counts one restore, undo or rollback.
	Restored(cmdType string, took time.Duration, res api.RestoreResult, err error)
	// Maintained counts one maintenance run.
	Maintained(err error, skipped string)
	// Overflow counts a watch that lost events.
	Overflow()
	// Replicated counts one replication attempt: its pushes, and whether it failed.
	Replicated(pushes int, failed bool)
}

// noMetrics counts nothing.
type noMetrics struct{}

func (noMetrics) Sealed(ckpt.Kind, ckpt.Record, error, time.Duration)      {}
func (noMetrics) Checkpoint(ckpt.Record)                                   {}
func (noMetrics) MarkerSealed(time.Time)                                   {}
func (noMetrics) Restored(string, time.Duration, api.RestoreResult, error) {}
func (noMetrics) Maintained(error, string)                                 {}
func (noMetrics) Overflow()                                                {}
func (noMetrics) Replicated(int, bool)                                     {}

// SetHooks sets where the workspace publishes its events and what counts
// its work; call it before Start.
func (w *Workspace) SetHooks(emit func(api.Event), met Metrics) {
	w.emit, w.met = emit, met
	if w.met == nil {
		w.met = noMetrics{}
	}
}

// sealJob is a checkpoint requested from outside the workspace's goroutine.
type sealJob struct {
	req   snapshot.SealRequest
	reply chan sealResult // buffered: the workspace never blocks on it
}

type sealResult struct {
	rec ckpt.Record
	err error
}

// alarm is a one-shot timer owned by the workspace's goroutine; its channel
// is nil while it is not set, so a select on it waits forever.
type alarm struct {
	t  *time.Timer
	at time.Time // when it fires; zero when not set
}

func (a *alarm) set(d time.Duration) {
	a.stop()
	a.at, a.t = time.Now().Add(d), time.NewTimer(d)
}

func (a *alarm) stop() {
	if a.t != nil {
		a.t.Stop()
	}
	a.t, a.at = nil, time.Time{}
}

func (a *alarm) armed() bool { return a.t != nil }

func (a *alarm) C() <-chan time.Time {
	if a.t == nil {
		return nil
	}
	return a.t.C
}

// checkpoint asks the workspace's goroutine to seal req and waits for it.
func (w *Workspace) Checkpoint(ctx context.Context, req snapshot.SealRequest) (ckpt.Record, error) {
	w.mu.Lock()
	gone := w.status.State == StateGone
	w.mu.Unlock()
	if gone {
		return ckpt.Record{}, errWorkspaceGone
	}
	job := sealJob{req: req, reply: make(chan sealResult, 1)}
	select {
	case w.jobs <- job:
	case <-ctx.Done():
		return ckpt.Record{}, ctx.Err()
	case <-w.done:
		return ckpt.Record{}, ErrNotServing
	case <-time.After(30 * time.Second):
		return ckpt.Record{}, ErrNotServing
	}
	select {
	case r := <-job.reply:
		return r.rec, r.err
	case <-ctx.Done():
		return ckpt.Record{}, ctx.Err()
	}
}

func New(dir string, set config.Settings, stateDir string, log zerolog.Logger) *Workspace {
	return &Workspace{
		dir: dir, set: set, stateDir: stateDir,
		log:      log.With().Str("workspace", dir).Logger(),
		dirty:    map[string]time.Time{},
		tooBig:   map[string]string{},
		unsealed: map[string]bool{},
		jobs:     make(chan sealJob),
		restores: make(chan restoreJob),
		gcs:      make(chan gcJob),
		status:   api.WorkspaceStatus{Dir: dir, Layout: set.Layout, State: StateStarting},
		met:      noMetrics{},
	}
}

// start runs the workspace until ctx ends or stop is called.
func (w *Workspace) Start(ctx context.Context) {
	ctx, w.cancel = context.WithCancel(ctx)
	w.done = make(chan struct{})
	go func() {
		defer close(w.done)
		w.run(ctx)
	}()
}

// stop ends the workspace and waits for it.
func (w *Workspace) Stop() {
	w.cancel()
	<-w.done
}

func (w *Workspace) Status() api.WorkspaceStatus {
	// The store's modes, as they are now: looked at outside the lock.
	w.mu.Lock()
	store := w.store
	w.mu.Unlock()
	exposed := ""
	if store != nil {
		exposed = store.Exposure()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.status
	st.StoreExposed = exposed
	st.Rolling = w.rolling.Load()
	if w.wt != nil {
		ws := w.wt.Status()
		st.Watches, st.Unwatched, st.UnwatchedDirs = ws.Watches, ws.Unwatched, ws.UnwatchedDirs
	}
	st.Skipped = append([]api.PathIssue(nil), st.Skipped...)
	st.UnwatchedDirs = append([]string(nil), st.UnwatchedDirs...)
	st.Replication = w.replicationStatus()
	st.Foreign, st.ForeignMore = w.foreignStatus()
	return st
}

func (w *Workspace) setStatus(fn func(s *api.WorkspaceStatus)) {
	w.mu.Lock()
	fn(&w.status)
	w.mu.Unlock()
}

func (w *Workspace) fail(err error) {
	w.log.Error().Err(err).Msg("workspace failed")
	w.setStatus(func(s *api.WorkspaceStatus) { s.State, s.Error = StateFailed, err.Error() })
}

// run opens the store and serves the workspace's events, each retried with
// backoff while it fails; a removed folder waits (as gone) until it is back.
func (w *Workspace) run(ctx context.Context) {
	// Discovery may release a removed workspace before its watch noticed:
	// the log still says why it went.
	defer func() {
		if !w.gone && folderMissing(w.dir) {
			w.markGone()
		}
	}()
	backoff := time.Second
	for {
		err := w.open(ctx)
		if err == nil {
			err = w.serve(ctx)
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, errFolderBack) {
				w.log.Info().Msg("the workspace folder is back; watching it again")
				backoff = time.Second
				continue
			}
			if err == nil {
				return // the watcher stopped: shutting down
			}
		}
		if folderMissing(w.dir) {
			w.markGone()
		} else {
			w.fail(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Minute)
	}
}

// folderMissing reports whether dir no longer exists (or is no folder).
func folderMissing(dir string) bool {
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return true
	}
	return err == nil && !fi.IsDir()
}

func (w *Workspace) storeOptions() snapshot.Options {
	return snapshot.Options{
		Layout: snapshot.Layout(w.set.Layout), StateDir: w.stateDir,
		MaxFileSize: int64(w.set.MaxFileSize), Patterns: w.Patterns(w.set.Patterns),
		Engine: w.set.Engine,
	}
}

func (w *Workspace) open(ctx context.Context) error {
	if w.set.Layout == config.LayoutAutodev {
		return w.openAutodev(ctx)
	}
	w.adoptStore()
	st, err := snapshot.Open(ctx, w.dir, w.storeOptions())
	if err != nil {
		return err
	}
	// Under the status lock: request handlers read the store through openStore.
	w.setStatus(func(s *api.WorkspaceStatus) {
		w.store = st
		s.Layout, s.WorkTree, s.Store, s.Error = string(st.Layout()), st.WorkTree(), st.GitDir(), ""
	})
	w.lay = newLayout(w, st)
	w.noteStore(ctx, st)
	w.setStatus(func(s *api.WorkspaceStatus) { s.Kept = kept(st) })
	return nil
}

// adoptStore moves a store its supervisor handed over (an earlier cairn kept
// it in the shared stores folder) into this worker's stores folder.
func (w *Workspace) adoptStore() {
	name := snapshot.PlainStoreName(w.dir)
	src := filepath.Join(w.stateDir, MigratePrefix+name)
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

// patterns adds the configured excludes (.gitignore lines, translated by
// snapshot.ExcludeGlob) to a selection.
func (w *Workspace) Patterns(base []string) []string {
	out := append([]string(nil), base...)
	for _, e := range w.set.Excludes {
		if g := snapshot.ExcludeGlob(e); g != "" {
			out = append(out, "!"+g)
		}
	}
	return out
}

// skip keeps the store, .git folders, runtime folders and configured
// excludes out of the watch; excludes match as the selection reads them
// (snapshot.ExcludeMatch).
func (w *Workspace) skip(rel string, isDir bool) bool {
	if snapshot.Excluded(rel) {
		return true
	}
	for _, e := range w.set.Excludes {
		if snapshot.ExcludeMatch(e, rel, isDir) {
			return true
		}
	}
	return false
}

func (w *Workspace) serve(ctx context.Context) error {
	if w.Autodev() != nil {
		return w.serveAutodev(ctx)
	}
	root, skip := w.lay.watch()
	skip = w.foreignSkip(root, skip) // foreign.go: folders others can write
	opts := watcher.Options{Root: root, Skip: skip, MaxWatches: testMaxWatches(), Lag: testWatchLag(),
		Marks: filepath.Join(w.stateDir, "marks", snapshot.PlainStoreName(w.dir))}
	wt, err := watcher.Start(ctx, opts)
	if err != nil {
		return fmt.Errorf("watch %s: %w", root, err)
	}
	w.watchingSince = time.Now()
	w.setStatus(func(*api.WorkspaceStatus) { w.wt = wt })
	defer func() {
		w.setStatus(func(*api.WorkspaceStatus) { w.wt = nil })
		wt.Close()
	}()
	deb := watcher.NewDebouncer(w.set.AutosaveQuiet.Duration, w.set.AutosaveMaxWait.Duration)
	defer deb.Stop()
	w.deb = deb
	w.failing, w.gone, w.degraded = nil, false, false
	w.rewatchBackoff, w.retryBackoff = rewatchFirst, retryFirst
	defer func() {
		w.reconcile.stop()
		w.rewatch.stop()
		w.retry.stop()
	}()
	health := time.NewTicker(healthEvery)
	defer health.Stop()
	maintTick := time.NewTicker(w.maintenanceTick())
	defer maintTick.Stop()
	defer w.stopMaintenance() // after ctx ends: cancelled, and waited for
	defer w.bg.Wait()

	w.watchChanged(wt)
	w.initialSeal(ctx)
	// Replication (replication.go) starts after the first seal; it is stopped and waited for at the end.
	defer w.startReplication(ctx)()
	testStartupGate(ctx)
	// A pass reads the runtime's state after every control change taken so
	// far, and its timer asks for another when one comes during it.
	pass := func(startup bool) <-chan time.Time {
		t := w.lay.pass(ctx, wt, startup)
		w.controlTaken = false
		return t
	}
	lifecycleTimer := pass(true)

	for {
		if w.controlTaken {
			// Taken by a drain outside a pass (an autosave's, a manual
			// checkpoint's, a restore's barrier).
			lifecycleTimer = pass(false)
		}
		select {
		case <-ctx.Done():
			return nil
		case c, open := <-wt.Changes():
			if !open {
				return nil // the watcher stopped: the workspace is shutting down
			}
			if _, k := w.take(c); k == changeControl {
				lifecycleTimer = pass(false)
			}
		case <-wt.Overflow():
			w.met.Overflow()
			w.needFull = true
			w.watchChanged(wt)
			if w.checkGone() {
				break // the root went with its folder: nothing to seal
			}
			w.autosaveSoon()
			lifecycleTimer = pass(false) // a lost event may have been a marker
		case <-lifecycleTimer:
			lifecycleTimer = pass(false)
		case <-deb.C():
			deb.Take()
			w.autosave(ctx, wt)
		case job := <-w.jobs:
			rec, err := w.seal(ctx, wt, job.req, false)
			job.reply <- sealResult{rec, err}
		case job := <-w.restores:
			w.stopMaintenance() // never beside a restore
			// A file written an instant ago may not be reported by the watch
			// yet: the barrier takes in every change made before now, as for a
			// lifecycle marker, so the dirty set names all the pre-restore
			// checkpoint must seal. Without a barrier (no mark could be made)
			// or while the watch cannot vouch (events lost, part of the tree
			// unwatched, nothing sealed since it started), the whole work tree
			// is reconciled. Either way the restore reads every file it
			// overwrites or deletes that the set does not name (snapshot,
			// inprocrestore.go: unvouched) before writing any.
			control, sure := w.barrier(wt)
			if control {
				// A marker that landed before the restore was asked: its
				// checkpoint first, from the tree as the codon left it.
				lifecycleTimer = pass(false)
				_, sure = w.barrier(wt)
			}
			var changed []string
			if sure && !w.needFull && !w.incomplete() {
				changed = w.changed()
				w.pushLeftOut()
				w.log.Info().Int("paths", len(changed)).Msg("restore: the pre-restore checkpoint seals what the watch saw change")
			} else {
				w.checkForeign(ctx) // as before any full reconcile
				w.log.Info().Bool("barrier", sure).Msg("restore: the pre-restore checkpoint reconciles the whole work tree")
			}
			job.run(ctx, changed)
			// The restore's writes reach the dirty set as events; what it
			// left that no event names (files it kept) the store adds to
			// the next seal told what changed, and a restore stopped part
			// way makes that seal a full reconcile (snapshot, restore.go).
			w.needFull = w.needFull || job.reconcileAfter
		case <-w.reconcile.C():
			// Changes in unwatched folders have no events: only a full
			// reconcile finds them, at most a reconcile interval late.
			w.reconcile.stop()
			w.autosave(ctx, wt)
			if w.degraded && !w.reconcile.armed() {
				w.reconcile.set(w.reconcileEvery())
			}
			w.refreshStatus()
		case <-w.rewatch.C():
			w.rewatch.stop()
			// The limit may have been raised (or other watches released): try again.
			if nw, err := watcher.Start(ctx, opts); err == nil && !nw.Status().LimitHit {
				wt.Close()
				wt = nw
				w.setStatus(func(*api.WorkspaceStatus) { w.wt = nw })
				w.needFull = true // changes between the two watches
				w.rewatchBackoff = rewatchFirst
				w.watchChanged(wt)
				w.log.Info().Msg("watch complete again")
				continue
			} else if err == nil {
				nw.Close()
			}
			w.rewatchBackoff = min(w.rewatchBackoff*2, rewatchMax)
			w.rewatch.set(w.rewatchBackoff)
			w.refreshStatus()
		case <-w.retry.C():
			w.retry.stop()
			w.retrySeal(ctx, wt)
			lifecycleTimer = pass(false) // a lifecycle checkpoint that failed is due again
			w.refreshStatus()
		case <-maintTick.C:
			w.maybeMaintain(ctx)
		case job := <-w.gcs:
			w.startMaintenance(ctx, job.full, job.reply)
		case <-health.C:
			if w.gone {
				if !folderMissing(w.dir) {
					return errFolderBack
				}
				continue
			}
			if !w.checkGone() {
				if _, err := w.ensureStore(ctx); err != nil {
					w.sealFailed(err)
				}
			}
		}
		w.setStatus(func(s *api.WorkspaceStatus) { s.Pending = len(w.dirty) })
	}
}

// reconcileEvery is the degraded workspace's reconcile interval.
func (w *Workspace) reconcileEvery() time.Duration {
	if d := w.set.ReconcileInterval.Duration; d > 0 {
		return d
	}
	return config.DefaultReconcileInterval
}

// incomplete reports whether some part of the tree is unwatched: its changes
// come with no event, so no seal may trust the dirty set alone.
func (w *Workspace) incomplete() bool {
	if w.wt == nil {
		return false
	}
	st := w.wt.Status()
	return st.LimitHit || st.Unwatched > 0
}

// watchChanged takes in the watch's health: entering degraded mode (the
// watch limit) arms the periodic reconcile and the re-watch attempts.
func (w *Workspace) watchChanged(wt *watcher.Watcher) {
	ws := wt.Status()
	switch {
	case ws.LimitHit && !w.degraded:
		w.degraded = true
		w.rewatch.set(w.rewatchBackoff)
		if w.autosaveOn() {
			w.reconcile.set(w.reconcileEvery())
		}
		w.log.Warn().Str("error", ws.Err).Int("unwatched", ws.Unwatched).Dur("reconcile_interval", w.reconcileEvery()).
			Msg("watch limit hit; every seal reconciles the whole tree, and a full reconcile runs every reconcile_interval")
	case !ws.LimitHit && w.degraded:
		w.degraded = false
		w.rewatch.stop()
		w.reconcile.stop()
	}
	w.refreshStatus()
}

// refreshStatus derives the state shown in status from what the goroutine
// knows now: gone, a failing seal, a degraded watch, or watching.
func (w *Workspace) refreshStatus() {
	var ws watcher.Status
	if w.wt != nil {
		ws = w.wt.Status()
	}
	w.setStatus(func(s *api.WorkspaceStatus) {
		s.Watches, s.Unwatched, s.UnwatchedDirs = ws.Watches, ws.Unwatched, ws.UnwatchedDirs
		s.StaleUpTo, s.NextReconcile, s.LastReconcile, s.NextRewatch = "", time.Time{}, time.Time{}, time.Time{}
		if w.degraded {
			if w.autosaveOn() {
				s.StaleUpTo = w.reconcileEvery().String()
			}
			s.NextReconcile, s.LastReconcile, s.NextRewatch = w.reconcile.at, w.lastReconcile, w.rewatch.at
		}
		s.RetryAt = w.retry.at
		switch {
		case w.gone:
			s.State, s.Error = StateGone, errWorkspaceGone.Error()
		case w.failing != nil:
			s.State, s.Error = StateFailed, w.failing.Error()
			if w.retry.armed() {
				s.Error += fmt.Sprintf(" (changes kept; retrying at %s)", w.retry.at.Format(time.TimeOnly))
			}
		case w.degraded:
			s.State, s.Error = StateDegraded, ws.Err
		default:
			s.State, s.Error = StateWatching, ""
		}
	})
}

// checkGone notices that the workspace folder was removed: seals stop (with
// errWorkspaceGone) until it is back or discovery releases the workspace.
func (w *Workspace) checkGone() bool {
	if w.gone {
		return true
	}
	if !folderMissing(w.dir) {
		return false
	}
	w.markGone()
	w.retry.stop()
	w.reconcile.stop()
	w.rewatch.stop()
	w.refreshStatus()
	return true
}

// markGone records, says and publishes once that the folder is gone.
func (w *Workspace) markGone() {
	w.mu.Lock()
	was := w.status.State == StateGone
	w.status.State, w.status.Error = StateGone, errWorkspaceGone.Error()
	w.mu.Unlock()
	w.gone = true
	if was {
		return
	}
	w.log.Warn().Msg("the workspace folder is gone; nothing is sealed until it is back (or the workspace is released)")
	w.publishError("WORKSPACE_GONE", errWorkspaceGone.Error()+": "+w.dir)
}

func (w *Workspace) publishError(code, msg string) {
	if w.emit != nil {
		w.emit(api.Event{Type: api.EvError, Workspace: w.dir, Time: time.Now(), Data: api.ErrorEvent{Code: code, Message: msg}})
	}
}

// ensureStore recreates a store deleted under the daemon (rm -rf): every seal
// would fail on it. The new store begins with a baseline; the history the old
// one held is lost, and status and the log say so. recreated reports whether
// it did.
func (w *Workspace) ensureStore(ctx context.Context) (recreated bool, err error) {
	gitDir := w.store.GitDir()
	if _, err := os.Lstat(filepath.Join(gitDir, "HEAD")); !errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	w.log.Error().Str("store", gitDir).Msg("the store was deleted; recreating it with a new baseline (the checkpoints it held are lost)")
	// A ledger that outlived its store names commits that no longer exist.
	ledger := w.store.LedgerPath()
	if _, err := os.Lstat(ledger); err == nil {
		kept := fmt.Sprintf("%s.lost-%d", ledger, time.Now().Unix())
		if err := os.Rename(ledger, kept); err != nil {
			return false, fmt.Errorf("the store %s was deleted; moving its orphaned ledger aside: %w", gitDir, err)
		}
		w.log.Warn().Str("ledger", kept).Msg("the deleted store's ledger was kept aside")
	}
	st, err := snapshot.Open(ctx, w.dir, w.storeOptions())
	if err != nil {
		return false, fmt.Errorf("the store %s was deleted and could not be recreated: %w", gitDir, err)
	}
	notice := fmt.Sprintf("the store was deleted and recreated at %s: the checkpoints before then are lost",
		time.Now().Format(time.RFC3339))
	w.setStatus(func(s *api.WorkspaceStatus) {
		w.store = st
		s.Store, s.Notice = st.GitDir(), notice
		s.Last, s.LastState, s.LastTime = "", "", time.Time{}
	})
	w.needFull = true
	w.publishError("STORE_RECREATED", notice)
	req := snapshot.SealRequest{Kind: ckpt.KindBaseline, Label: "store recreated: the previous store was deleted, its history is lost"}
	if pats, ok := w.lay.selection(false); ok {
		req.Patterns = pats
	}
	if _, err := w.seal(ctx, nil, req, false); err != nil {
		return true, err
	}
	return true, nil
}

// sealFailed keeps the dirty set, shows the failure and arms a retry with
// backoff: nothing else would seal those changes before the next edit.
func (w *Workspace) sealFailed(err error) {
	if errors.Is(err, errWorkspaceGone) {
		return
	}
	w.failing = err
	// Only an autosave (or the baseline, or a lifecycle checkpoint) is
	// sealed again on its own; with autosave off a failed manual checkpoint
	// waits for the next one asked for.
	if !w.retry.armed() && (w.autosaveOn() || w.lay.ownSeals() || !w.hasCheckpoint()) {
		w.retry.set(w.retryBackoff)
		w.retryBackoff = min(w.retryBackoff*2, retryMax)
	}
	w.refreshStatus()
}

// retrySeal seals again what a failed seal left: the baseline if there is
// still none, else an autosave of the kept dirty set.
func (w *Workspace) retrySeal(ctx context.Context, wt *watcher.Watcher) {
	if !w.hasCheckpoint() {
		w.initialSeal(ctx)
		return
	}
	if w.autosaveOn() {
		w.autosave(ctx, wt)
	}
}

// hasCheckpoint reports whether the ledger holds a checkpoint (not only failures).
func (w *Workspace) hasCheckpoint() bool {
	for _, r := range w.store.Records() {
		if r.SHA != "" {
			return true
		}
	}
	return false
}

// take takes in a change from the watch: a work-tree path becomes dirty for
// the next seal and nudges the autosave timer; a control change is the
// layout's.
func (w *Workspace) take(c watcher.Change) (string, changeKind) {
	if c.Op.Has(watcher.Mark) {
		return "", changeNone // a barrier's, read after it gave up waiting
	}
	rel, k := w.lay.take(c)
	switch k {
	case changeWork:
		w.dirty[rel] = c.Time
		w.autosaveSoon()
	case changeControl:
		w.controlTaken = true
	}
	return rel, k
}

// autosaveSoon starts the autosave timer, or keeps it running.
func (w *Workspace) autosaveSoon() {
	if w.deb != nil && w.autosaveOn() {
		w.deb.Add()
	}
}

// changed is the dirty set's paths, sorted; never nil (nil would say that
// nothing knows what changed).
func (w *Workspace) changed() []string {
	out := slices.AppendSeq(make([]string, 0, len(w.dirty)), maps.Keys(w.dirty))
	slices.Sort(out)
	return out
}

func (w *Workspace) autosaveOn() bool { return w.set.Autosave == nil || *w.set.Autosave }

// initialSeal seals a baseline the first time a workspace is watched, and
// otherwise reconciles what changed while cairn was not watching.
func (w *Workspace) initialSeal(ctx context.Context) {
	req := snapshot.SealRequest{Kind: ckpt.KindAutosave, Label: "changes while cairn was not watching", SkipUnchanged: true}
	if !w.hasCheckpoint() {
		req = snapshot.SealRequest{Kind: ckpt.KindBaseline, Label: "first watched"}
	}
	w.needFull = true // nothing says what changed while cairn was not watching
	pats, ok := w.lay.selection(true)
	if !ok && req.Kind == ckpt.KindAutosave {
		return // no plan yet: nothing the runtime checkpoints
	}
	req.Patterns = pats
	w.seal(ctx, nil, req, false)
}

// autosave seals what changed since the last checkpoint, if anything did.
func (w *Workspace) autosave(ctx context.Context, wt *watcher.Watcher) {
	if w.autosavePaused() {
		// Disk under the floor (budget.go): the dirty set waits, and the
		// floor is checked again soon, so the pause ends by itself when
		// space returns.
		if len(w.dirty) > 0 && !w.retry.armed() {
			w.retry.set(floorRecheck)
			w.refreshStatus()
		}
		return
	}
	pats, ok := w.lay.selection(false)
	if !ok {
		return // no plan yet: nothing the runtime checkpoints
	}
	req := snapshot.SealRequest{Kind: ckpt.KindAutosave, SkipUnchanged: true, Patterns: pats}
	w.seal(ctx, wt, req, false)
}

// drain takes in the changes the watcher has queued (see take), so a seal
// sees every change reported before it began; lost events make the next
// seal a full reconcile. It returns the work-tree paths it took (changes that
// came after whatever is being sealed for) and whether a control file
// changed meanwhile. It stops when the queue is empty or, for a barrier
// (mark, from watcher.Watcher.Mark), once the mark is read (at most
// barrierWait later; seen says it was, and no event was lost meanwhile).
func (w *Workspace) drain(wt *watcher.Watcher, mark string) (moved []string, control, seen bool) {
	if wt == nil {
		return nil, false, false
	}
	lost := false
	barrier := mark != ""
	var timeout <-chan time.Time
	if barrier {
		t := time.NewTimer(barrierWait)
		defer t.Stop()
		timeout = t.C
	}
	for {
		var c watcher.Change
		open := true
		if barrier {
			select {
			case c, open = <-wt.Changes():
			case <-wt.Overflow():
				w.met.Overflow()
				w.needFull = true
				lost = true
				continue
			case <-timeout:
				return moved, control, false
			}
		} else {
			select {
			case c, open = <-wt.Changes():
			case <-wt.Overflow():
				w.met.Overflow()
				w.needFull = true
				continue
			default:
				return moved, control, false
			}
		}
		if !open {
			return moved, control, false // the watcher stopped (shutdown)
		}
		if barrier && c.Op.Has(watcher.Mark) && c.Path == mark {
			return moved, control, !lost
		}
		switch rel, k := w.take(c); k {
		case changeWork:
			moved = append(moved, rel)
		case changeControl:
			control = true
		}
	}
}

// seal seals one checkpoint from the dirty set. For a lifecycle marker
// (marker true), paths whose changes were queued after the marker's own event
// make the checkpoint racy: the agent was already writing again. While events
// were lost or part of the tree is unwatched, it reconciles the whole tree:
// the dirty set cannot vouch for what it did not see.
func (w *Workspace) seal(ctx context.Context, wt *watcher.Watcher, req snapshot.SealRequest, marker bool) (ckpt.Record, error) {
	rec, _, err := w.sealOrCapture(ctx, wt, req, marker, false)
	return rec, err
}

// capture is seal for a marker whose checkpoint is captured, not published
// (snapshot.Store.Capture): everything up to the record happens as for a
// seal (the dirty set it took is cleared), but nothing is recorded, counted
// or announced until it is published (lifecycle.go).
func (w *Workspace) capture(ctx context.Context, wt *watcher.Watcher, req snapshot.SealRequest) (snapshot.Held, error) {
	_, h, err := w.sealOrCapture(ctx, wt, req, true, true)
	return h, err
}

func (w *Workspace) sealOrCapture(ctx context.Context, wt *watcher.Watcher, req snapshot.SealRequest, marker, hold bool) (ckpt.Record, snapshot.Held, error) {
	var held snapshot.Held
	// Maintenance runs beside seals in bounded steps (maintenance.go): a
	// seal waits at most for one short locked step, never cancels it.
	if w.checkGone() {
		return ckpt.Record{}, held, errWorkspaceGone
	}
	if _, err := w.ensureStore(ctx); err != nil {
		w.sealFailed(err)
		return ckpt.Record{}, held, err
	}
	after, _, _ := w.drain(wt, "")
	changed := w.changed()
	// A manual checkpoint means "what is on disk now": a write made an
	// instant before the request may not be reported by the watch yet, so
	// it reconciles the whole tree instead of trusting the dirty set.
	full := w.needFull || w.incomplete() || req.Kind == ckpt.KindManual
	if !full {
		req.Changed = changed
	}
	if full {
		w.checkForeign(ctx) // foreign.go: what a full reconcile may not enter
	} else {
		w.pushLeftOut() // a store recreated meanwhile knows nothing yet
	}
	if marker {
		seen := map[string]bool{}
		for _, r := range req.Racy {
			seen[r.Path] = true
		}
		for _, p := range after {
			if !seen[p] {
				seen[p] = true
				req.Racy = append(req.Racy, ckpt.PathIssue{Path: p, Reason: "changed after the lifecycle marker"})
			}
		}
	}
	// A seal in progress may finish after shutdown begins, within a grace.
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stopOnCancel := context.AfterFunc(ctx, func() {
		select {
		case <-time.After(SealGrace):
			cancel()
		case <-sctx.Done():
		}
	})
	defer stopOnCancel()
	began := time.Now()
	if full {
		req.Progress = w.progressOf(req.Kind, began)
		defer w.setStatus(func(s *api.WorkspaceStatus) { s.Progress = nil })
	}
	var rec ckpt.Record
	var err error
	if hold {
		held, err = w.store.Capture(sctx, req)
		rec = held.Record
	} else {
		rec, err = w.store.Seal(sctx, req)
	}
	if !hold || err != nil {
		w.met.Sealed(req.Kind, rec, err, time.Since(began))
	}
	w.noteRepairs()
	log := w.log.With().Str("kind", string(req.Kind)).Str("codon", req.CodonID).Str("run", req.RunID).Logger()
	if err != nil {
		log.Error().Err(err).Str("id", rec.ID).Bool("full", full).Msg("seal failed; its changes are kept")
		w.setStatus(func(s *api.WorkspaceStatus) {
			s.Failures++
			if rec.ID != "" {
				s.Last, s.LastState, s.LastTime = rec.ID, string(rec.State), rec.Time
			}
		})
		w.publishError("SEAL_FAILED", err.Error())
		if ctx.Err() == nil {
			w.sealFailed(err)
		}
		return rec, held, err
	}
	w.racyCarry = nil
	if marker {
		for _, is := range req.Racy {
			if taken, ok := w.dirty[is.Path]; ok {
				if w.racyCarry == nil {
					w.racyCarry = map[string]time.Time{}
				}
				w.racyCarry[is.Path] = taken
			}
		}
	}
	clear(w.dirty)
	w.needFull = false
	if w.deb != nil {
		w.deb.Take() // what it was waiting to autosave is sealed
	}
	w.failing = nil
	if unsealed := w.keepUnsealed(rec, req); unsealed > 0 {
		// Paths the checkpoint could not read (a full disk, a permission, a
		// read error) stay dirty until one holds them: retried with backoff.
		if !w.retry.armed() && w.autosaveOn() {
			w.retry.set(w.retryBackoff)
			w.retryBackoff = min(w.retryBackoff*2, retryMax)
		}
	} else {
		w.retry.stop()
		w.retryBackoff = retryFirst
	}
	if full && w.degraded {
		// A full reconcile just ran: the next periodic one can wait.
		w.lastReconcile = time.Now()
		if w.reconcile.armed() {
			w.reconcile.set(w.reconcileEvery())
		}
	}
	var big map[string]string
	if rec.ID == "" {
		// No record names what was left out: check the changed paths' sizes here.
		big = w.oversized(req, changed)
	}
	w.noteSkipped(changed, full && rec.ID != "", rec, big)
	w.refreshStatus()
	if rec.ID == "" {
		return rec, held, nil // autosave with nothing changed
	}
	if hold {
		log.Info().Str("id", rec.ID).Str("sha", rec.SHA).Str("state", string(rec.State)).Int64("duration_ms", rec.DurationMS).
			Bool("full", full).Msg("checkpoint captured; held until the codon leaves starting")
		return rec, held, nil
	}
	ev := log.Info()
	if rec.State != ckpt.StateOK {
		ev = log.Warn().Interface("issues", rec.Issues)
	}
	ev.Str("id", rec.ID).Str("sha", rec.SHA).Str("state", string(rec.State)).Int64("duration_ms", rec.DurationMS).
		Int("added", rec.Added).Int("changed", rec.Changed).Int("removed", rec.Removed).Bool("full", full).Msg("checkpoint sealed")
	if w.emit != nil {
		w.emit(api.Event{Type: api.EvCheckpointSealed, Workspace: w.dir, Time: time.Now(), Data: rec})
	}
	w.replicateSoon(rec.Kind)
	w.sealEnded = time.Now()
	w.measureSoon(ctx, w.store)
	k := kept(w.store)
	w.setStatus(func(s *api.WorkspaceStatus) {
		s.Seals++
		s.Last, s.LastState, s.LastTime = rec.ID, string(rec.State), rec.Time
		s.Kept = k
	})
	return rec, held, nil
}

// noteRepairs shows what the store repaired by itself during a seal (a
// damaged private index rebuilt, an object another program removed stored
// again) in status and as an event; the store logged it.
func (w *Workspace) noteRepairs() {
	notes := w.store.TakeNotes()
	if len(notes) == 0 {
		return
	}
	at := time.Now().Format(time.RFC3339)
	w.setStatus(func(s *api.WorkspaceStatus) { s.Notice = at + ": " + notes[len(notes)-1] })
	for _, n := range notes {
		w.publishError("STORE_REPAIRED", n)
	}
}

// keepUnsealed keeps dirty the paths the last checkpoint could not read,
// and returns how many there are: they are unchanged on disk afterwards,
// so no event would name them again. A seal that recorded nothing (a retry
// that found the same paths still unreadable) keeps them; one that holds
// a path, or a full reconcile that did not name it, lets it go.
func (w *Workspace) keepUnsealed(rec ckpt.Record, req snapshot.SealRequest) int {
	if rec.ID != "" {
		clear(w.unsealed)
		if rec.State == ckpt.StatePartial {
			for _, is := range rec.Issues {
				if is.Path != "" && !slices.Contains(req.Racy, is) { // racy paths were sealed, only late
					w.unsealed[is.Path] = true
				}
			}
		}
	}
	for p := range w.unsealed {
		if _, ok := w.dirty[p]; !ok {
			w.dirty[p] = time.Now()
		}
	}
	w.setStatus(func(s *api.WorkspaceStatus) { s.Pending = len(w.dirty) })
	return len(w.unsealed)
}

// oversized names the changed paths a seal will leave out for their size
// (selected regular files over max_file_size). The store names them too, but
// only in a record, and an autosave that changes nothing else makes none.
func (w *Workspace) oversized(req snapshot.SealRequest, changed []string) map[string]string {
	limit := int64(w.set.MaxFileSize)
	if limit <= 0 || len(changed) == 0 {
		return nil
	}
	pats := req.Patterns
	if pats == nil {
		pats = w.Patterns(w.set.Patterns)
	}
	sel, err := snapshot.NewSelector(pats)
	if err != nil {
		return nil
	}
	var out map[string]string
	for _, p := range changed {
		if snapshot.Excluded(p) || !sel.Match(p) {
			continue
		}
		fi, err := os.Lstat(filepath.Join(w.store.WorkTree(), filepath.FromSlash(p)))
		if err != nil || !fi.Mode().IsRegular() || fi.Size() <= limit {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[p] = ckpt.TooLarge(limit, fi.Size())
	}
	return out
}

// noteSkipped keeps the files left out for their size as last seen, and
// names each one in the log the first time it is seen. changed are the paths
// whose size was checked; whole says rec came from a full reconcile, whose
// record names every file left out.
func (w *Workspace) noteSkipped(changed []string, whole bool, rec ckpt.Record, big map[string]string) {
	now := map[string]string{}
	maps.Copy(now, big)
	for _, is := range rec.Skipped {
		now[is.Path] = is.Reason
	}
	if whole {
		for p := range w.tooBig {
			if _, ok := now[p]; !ok {
				delete(w.tooBig, p)
			}
		}
	}
	for _, p := range changed {
		if _, ok := now[p]; !ok {
			delete(w.tooBig, p)
		}
	}
	for p, why := range now {
		if _, known := w.tooBig[p]; !known {
			w.log.Warn().Str("path", p).Str("reason", why).Msg("file not checkpointed: larger than max_file_size")
		}
		w.tooBig[p] = why
	}
	shown := make([]api.PathIssue, 0, min(len(w.tooBig), maxSkippedShown))
	for _, p := range slices.Sorted(maps.Keys(w.tooBig)) {
		if len(shown) == maxSkippedShown {
			break
		}
		shown = append(shown, api.PathIssue{Path: p, Reason: w.tooBig[p]})
	}
	w.setStatus(func(s *api.WorkspaceStatus) { s.Skipped = shown })
}
