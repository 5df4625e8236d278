package workspace

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/hankweave"
	"github.com/cairn-dev/cairn/restore/ckpt"
	"github.com/cairn-dev/cairn/snapshot"
)

// Maintenance (docs/operating.md, "Maintenance"): after maintenance_idle without a
// seal, at most once per maintenance_interval, the workspace's goroutine
// applies retention, then starts snapshot's Maintain in a goroutine of its
// own. Maintain runs in bounded steps and lets seals run between them (the
// repacks beside them), so seals never cancel it: a workspace that seals
// all the time still gets it, once its last run is twice the interval old
// (overdue), without waiting to be idle. It never starts while a restore
// runs or a Hankweave runtime's lock is live, and a restore that arrives
// cancels it first (the next run begins with the steps it did not reach).
// Stopping the workspace cancels it and waits for it.

// Defaults of the maintenance keys.
const (
	defaultMaintenanceInterval = time.Hour
	defaultMaintenanceIdle     = 60 * time.Second
)

// maintainTimeout bounds one maintenance run.
const maintainTimeout = 30 * time.Minute

// gcJob is POST /v1/gc: maintenance now, its result in reply.
type gcJob struct {
	full  bool
	reply chan api.MaintenanceResult // buffered
}

// maintState is the workspace's maintenance; the workspace's goroutine
// starts and stops it, the run's goroutine finishes it.
type maintState struct {
	mu      sync.Mutex
	cancel  context.CancelFunc
	done    chan struct{} // closed when the run in progress ends; nil when none
	waiters []chan api.MaintenanceResult
	full    bool      // the run in progress repacks fully
	lastRun time.Time // the last start, by this daemon or (read at open) any process
}

// join adds reply to the waiters of the run in progress, if one is in
// progress and does what is asked: a full request does not take the
// answer of a run that repacks only geometrically (`cairn gc --full`
// would say it was done when it was not). It returns the run's done
// channel, nil when none runs.
func (m *maintState) join(full bool, reply chan api.MaintenanceResult) (running chan struct{}, joined bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.done == nil {
		return nil, false
	}
	if full && !m.full {
		return m.done, false
	}
	if reply != nil {
		m.waiters = append(m.waiters, reply)
	}
	return m.done, true
}

func (w *Workspace) maintenanceInterval() time.Duration {
	if d := w.set.MaintenanceInterval.Duration; d > 0 {
		return d
	}
	return defaultMaintenanceInterval
}

func (w *Workspace) maintenanceIdle() time.Duration {
	if d := w.set.MaintenanceIdle.Duration; d > 0 {
		return d
	}
	return defaultMaintenanceIdle
}

// maintenanceTick is how often the workspace's goroutine asks whether
// maintenance is due.
func (w *Workspace) maintenanceTick() time.Duration {
	return max(min(w.maintenanceIdle()/4, w.maintenanceInterval()/4, 15*time.Second), 50*time.Millisecond)
}

// maintenanceBusy says why maintenance must not run now ("" when it may).
func (w *Workspace) maintenanceBusy() string {
	if w.rolling.Load() {
		return "a restore is under way"
	}
	if st := w.Store(); st != nil && st.Layout() == snapshot.LayoutHankweave {
		lk, err := hankweave.ReadLock(w.dir)
		if err != nil {
			return "the runtime's lock cannot be read: " + err.Error()
		}
		if lk != nil && lk.Alive(time.Now()) {
			return "the runtime is running (its lock is live)"
		}
	}
	return ""
}

// maintenanceRunning reports whether a run is in progress.
func (w *Workspace) maintenanceRunning() bool {
	w.maint.mu.Lock()
	defer w.maint.mu.Unlock()
	return w.maint.done != nil
}

// maybeMaintain starts maintenance when it is due: not run within the
// interval and idle long enough with nothing pending, or overdue (twice
// the interval) however busy; nothing in the way.
func (w *Workspace) maybeMaintain(ctx context.Context) {
	if w.gone || w.failing != nil || w.maintenanceRunning() {
		return
	}
	w.mu.Lock()
	lastSeal := w.status.LastTime
	w.mu.Unlock()
	if !maintenanceDue(time.Now(), w.maint.lastRun, lastSeal, w.sealEnded, len(w.dirty) > 0, w.maintenanceIdle(), w.maintenanceInterval()) {
		return
	}
	if why := w.maintenanceBusy(); why != "" {
		w.log.Debug().Str("reason", why).Msg("maintenance postponed")
		return
	}
	w.startMaintenance(ctx, false, nil)
}

// startMaintenance applies retention (on the workspace's goroutine, like
// every change of refs) and starts a maintenance run; reply, if not nil,
// gets its result. A run in progress answers reply instead of a second one.
func (w *Workspace) startMaintenance(ctx context.Context, full bool, reply chan api.MaintenanceResult) {
	if running, joined := w.maint.join(full, reply); joined {
		return
	} else if running != nil {
		// A full run is asked while a lighter one runs: it starts once
		// that one ends, through the workspace's goroutine again.
		go func() {
			<-running
			select {
			case w.gcs <- gcJob{full: full, reply: reply}:
			case <-w.done:
				if reply != nil {
					reply <- api.MaintenanceResult{Workspace: w.dir, Start: time.Now().UTC(), Error: ErrNotServing.Error()}
				}
			}
		}()
		return
	}
	st := w.Store()
	if st == nil {
		if reply != nil {
			reply <- api.MaintenanceResult{Workspace: w.dir, Start: time.Now().UTC(), Error: ErrNotServing.Error()}
		}
		return
	}
	w.applyRetention(ctx)

	now := time.Now()
	if !full {
		if last, ok := st.LastMaintenance(); ok {
			full = now.Sub(last.LastFull) >= snapshot.FullEvery
		} else {
			full = false // a new store: nothing to drop yet
		}
	}
	mctx, cancel := context.WithTimeout(ctx, maintainTimeout)
	done := make(chan struct{})
	w.maint.mu.Lock()
	w.maint.cancel, w.maint.done, w.maint.lastRun, w.maint.full = cancel, done, now, full
	if reply != nil {
		w.maint.waiters = append(w.maint.waiters, reply)
	}
	w.maint.mu.Unlock()
	opts := snapshot.MaintainOptions{PruneGrace: w.set.GCPruneGrace.Duration, Busy: w.maintenanceBusy, Full: full,
		Step: func(i, n int, name string) {
			pr := api.Progress{Op: "maintenance: " + name, Done: i - 1, Total: n, Unit: "steps", Since: now}
			w.setStatus(func(s *api.WorkspaceStatus) { s.Progress = &pr })
			if w.emit != nil {
				w.emit(api.Event{Type: api.EvProgress, Workspace: w.dir, Time: time.Now(), Data: pr})
			}
		}}
	w.budgetMaintain(&opts) // budget.go: collect what a budget pass dropped now
	go func() {
		defer close(done)
		defer cancel()
		res, err := st.Maintain(mctx, opts)
		w.setStatus(func(s *api.WorkspaceStatus) {
			if s.Progress != nil && s.Progress.Unit == "steps" {
				s.Progress = nil
			}
		})
		ar := maintenanceResult(w.dir, res, err)
		w.met.Maintained(err, ar.Skipped)
		// A run that ended without error measured the store last (res.After);
		// only a failed or cancelled one leaves it to measure again.
		stats, serr := res.After, error(nil)
		if err != nil || stats == (snapshot.StoreStats{}) {
			stats, serr = st.Stats(context.WithoutCancel(mctx))
		}
		log := w.log.With().Strs("steps", ar.Steps).Int64("duration_ms", ar.DurationMS).
			Int64("bytes_before", ar.Before.Bytes).Int64("bytes_after", ar.After.Bytes).
			Int64("loose_before", ar.Before.LooseObjects).Int64("loose_after", ar.After.LooseObjects).Logger()
		switch {
		case err != nil && !errors.Is(err, context.Canceled):
			log.Warn().Err(err).Msg("maintenance failed")
		case ar.Skipped != "":
			log.Info().Str("skipped", ar.Skipped).Msg("maintenance skipped")
		default:
			log.Info().Msg("maintenance done")
		}
		k := kept(st)
		w.setStatus(func(s *api.WorkspaceStatus) {
			s.LastMaintenance, s.Kept = &ar, k
			if serr == nil {
				s.StoreBytes, s.LooseObjects = stats.Bytes, stats.LooseObjects
			}
		})
		w.maint.mu.Lock()
		waiters := w.maint.waiters
		w.maint.waiters, w.maint.done, w.maint.cancel = nil, nil, nil
		w.maint.mu.Unlock()
		for _, c := range waiters {
			c <- ar
		}
	}()
}

// stopMaintenance cancels a run in progress and waits for it: before a
// restore, and when the workspace stops (seals do not: they run between
// its steps).
func (w *Workspace) stopMaintenance() {
	w.maint.mu.Lock()
	cancel, done := w.maint.cancel, w.maint.done
	w.maint.mu.Unlock()
	if done == nil {
		return
	}
	cancel()
	<-done
}

// maintenanceDue says whether maintenance is due at now: not run since
// lastRun within interval, and idle for idle with nothing pending, or
// overdue (twice the interval) however busy. Idle counts from the end of
// the last seal (sealEnded), not from its record's time (sealBegan: when it
// began), so a long seal is not idle time.
func maintenanceDue(now, lastRun, sealBegan, sealEnded time.Time, pending bool, idle, interval time.Duration) bool {
	last := sealBegan
	if sealEnded.After(last) {
		last = sealEnded
	}
	since := now.Sub(lastRun)
	if since < interval {
		return false
	}
	// A busy workspace (never idle that long) is maintained all the same
	// once it is overdue: its seals run between the steps.
	return !pending && now.Sub(last) >= idle || since >= 2*interval
}

// progressEvery is how often a long seal's progress reaches status, and
// progressEventEvery how often it is published as an event.
const (
	progressEvery      = 250 * time.Millisecond
	progressEventEvery = time.Second
)

// progressOf is a full seal's Progress: status shows how far it has come
// ("sealing baseline 42 %"), and an event says so now and then. Engines
// call it from their own goroutines.
func (w *Workspace) progressOf(kind ckpt.Kind, began time.Time) func(snapshot.Progress) {
	op := "reconciling"
	if kind == ckpt.KindBaseline {
		op = "sealing baseline"
	}
	var mu sync.Mutex
	var shown, published time.Time
	return func(p snapshot.Progress) {
		now := time.Now()
		mu.Lock()
		last := p.Done >= p.Total
		if !last && now.Sub(shown) < progressEvery {
			mu.Unlock()
			return
		}
		shown = now
		publish := last || now.Sub(published) >= progressEventEvery
		if publish {
			published = now
		}
		mu.Unlock()
		pr := api.Progress{Op: op, Done: p.Done, Total: p.Total, Bytes: p.Bytes, Since: began}
		w.setStatus(func(s *api.WorkspaceStatus) { s.Progress = &pr })
		if publish && w.emit != nil {
			w.emit(api.Event{Type: api.EvProgress, Workspace: w.dir, Time: now, Data: pr})
		}
	}
}

// measureSoon measures the store's size for status off the workspace's
// goroutine, after a seal wrote objects: one measurement at a time, and one
// more after it if seals came meanwhile, so status is not stale until
// maintenance and a burst of seals costs at most two. serve waits for it.
func (w *Workspace) measureSoon(ctx context.Context, st *snapshot.Store) {
	w.measureAgain.Store(true)
	if !w.measuring.CompareAndSwap(false, true) {
		return // the running measurement measures again
	}
	w.bg.Add(1)
	go func() {
		defer w.bg.Done()
		for {
			for w.measureAgain.Swap(false) && ctx.Err() == nil {
				if stats, err := st.Stats(ctx); err == nil {
					w.setStatus(func(s *api.WorkspaceStatus) { s.StoreBytes, s.LooseObjects = stats.Bytes, stats.LooseObjects })
				}
			}
			w.measuring.Store(false)
			// A seal that asked between the last Swap and the Store above
			// found measuring set: measure for it unless another took over.
			if !w.measureAgain.Load() || !w.measuring.CompareAndSwap(false, true) {
				return
			}
		}
	}()
}

// noteStore measures the store for status (at open): size, loose objects,
// checkpoints kept, and the last maintenance any process ran on it.
func (w *Workspace) noteStore(ctx context.Context, st *snapshot.Store) {
	stats, err := st.Stats(ctx)
	last, ok := st.LastMaintenance()
	if ok {
		w.maint.mu.Lock()
		w.maint.lastRun = last.Result.Start
		w.maint.mu.Unlock()
	}
	w.setStatus(func(s *api.WorkspaceStatus) {
		if err == nil {
			s.StoreBytes, s.LooseObjects = stats.Bytes, stats.LooseObjects
		}
		if ok && s.LastMaintenance == nil {
			ar := maintenanceResult(w.dir, last.Result, nil)
			s.LastMaintenance = &ar
		}
	})
}

// kept counts the checkpoints a store keeps: ledger records with a usable commit.
func kept(st *snapshot.Store) int {
	n := 0
	for _, r := range st.Records() {
		if r.Usable() {
			n++
		}
	}
	return n
}

func maintenanceResult(dir string, res snapshot.MaintainResult, err error) api.MaintenanceResult {
	ar := api.MaintenanceResult{Workspace: dir, Start: res.Start, DurationMS: res.Duration.Milliseconds(),
		Steps: res.Steps, Skipped: res.Skipped, Before: apiStats(res.Before), After: apiStats(res.After)}
	if err != nil {
		ar.Error = err.Error()
	}
	return ar
}

func apiStats(s snapshot.StoreStats) api.StoreStats {
	return api.StoreStats{Bytes: s.Bytes, LooseObjects: s.LooseObjects, LooseBytes: s.LooseBytes,
		Packs: s.Packs, PackBytes: s.PackBytes, PackedObjs: s.PackedObjs}
}

// gc runs maintenance now on the workspace's goroutine's say (POST /v1/gc).
func (w *Workspace) GC(ctx context.Context, full bool) (api.MaintenanceResult, error) {
	job := gcJob{full: full, reply: make(chan api.MaintenanceResult, 1)}
	select {
	case w.gcs <- job:
	case <-ctx.Done():
		return api.MaintenanceResult{}, ctx.Err()
	case <-w.done:
		return api.MaintenanceResult{}, ErrNotServing
	case <-time.After(30 * time.Second):
		return api.MaintenanceResult{}, ErrNotServing
	}
	select {
	case r := <-job.reply:
		return r, nil
	case <-ctx.Done():
		return api.MaintenanceResult{}, ctx.Err()
	}
}
