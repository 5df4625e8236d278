package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/replicate"
	"github.com/cairn-dev/cairn/restore/ckpt"
	"github.com/cairn-dev/cairn/snapshot"
)

// Fleet replication (docs/operating.md, "Fleet replication"): a workspace whose
// settings name a remote runs one goroutine that pushes its store's refs
// there (agent/replicate). A seal wakes it (replicateSoon): a lifecycle
// checkpoint is pushed at once, other kinds at most once per interval, and
// every interval it also looks for what no seal announced (a restore's
// pre-restore checkpoint, retention's drops). While the remote fails,
// attempts back off from 1s, doubling to 5 min; the backlog then goes in one
// push. Stopping the workspace cancels it and waits for it.

// Backoff of a failing remote.
var (
	replBackoffFirst = time.Second
	replBackoffMax   = 5 * time.Minute
)

// Replication states in status.
const (
	ReplIdle    = "idle"
	ReplPushing = "pushing"
	ReplFailing = "failing"
	ReplOff     = "off"
)

// replState is the workspace's replication: the workspace's goroutine
// starts it and wakes it, its own goroutine pushes.
type replState struct {
	wake   chan struct{} // buffered; nil while replication is off
	urgent atomic.Bool   // a lifecycle checkpoint waits: push without waiting for the interval

	mu         sync.Mutex
	st         *api.ReplicationStatus // nil: not configured
	pushedUpTo int                    // the ledger id number the last push covered
}

// replicateSoon wakes the replication after a checkpoint of kind k (or a
// drop, k ""); it never blocks.
func (w *Workspace) replicateSoon(k ckpt.Kind) {
	if w.repl.wake == nil {
		return
	}
	if k.IsLifecycle() {
		w.repl.urgent.Store(true)
	}
	select {
	case w.repl.wake <- struct{}{}:
	default:
	}
}

// replicationStatus is the status to show, nil when not configured.
func (w *Workspace) replicationStatus() *api.ReplicationStatus {
	w.repl.mu.Lock()
	defer w.repl.mu.Unlock()
	if w.repl.st == nil {
		return nil
	}
	s := *w.repl.st
	s.Conflicts = slices.Clone(s.Conflicts)
	if !s.OldestUnpushed.IsZero() {
		s.LagSeconds = int64(time.Since(s.OldestUnpushed).Seconds())
	}
	return &s
}

func (w *Workspace) setRepl(fn func(s *api.ReplicationStatus)) {
	w.repl.mu.Lock()
	if w.repl.st != nil {
		fn(w.repl.st)
	}
	w.repl.mu.Unlock()
}

// startReplication starts the workspace's replication if its settings name
// a remote; the function it returns stops it and waits. It runs on the
// workspace's goroutine once the store is open.
func (w *Workspace) startReplication(ctx context.Context) (stop func()) {
	cfg := w.set.Replicate
	st := w.Store()
	if !cfg.On() || st == nil {
		w.repl.mu.Lock()
		w.repl.st = nil
		w.repl.mu.Unlock()
		w.repl.wake = nil
		return func() {}
	}
	real, err := filepath.EvalSymlinks(w.dir)
	if err != nil {
		real = w.dir
	}
	host, key := cfg.HostName(), replicate.Key(real)
	status := &api.ReplicationStatus{Remote: replicate.Redact(cfg.Remote), Host: host, Key: key, State: ReplIdle}
	w.repl.mu.Lock()
	w.repl.st = status
	w.repl.mu.Unlock()
	log := w.log.With().Str("remote", status.Remote).Str("host", host).Str("key", key).Logger()
	home, err := pushHome(cfg.PushUser)
	if err == nil {
		_, _, err = snapshot.FindGit(ctx)
	}
	if err != nil {
		log.Error().Err(err).Msg("replication off")
		w.setRepl(func(s *api.ReplicationStatus) {
			s.State, s.LastError, s.LastErrorTime = ReplOff, err.Error(), time.Now()
		})
		w.repl.wake = nil
		return func() {}
	}
	p := &replicate.Pusher{
		Store:  st.ObjectsGit(),
		Remote: cfg.Remote, Host: host, Key: key, Home: home, SSHCommand: cfg.SSHCommand,
	}
	if last := p.LastState(); last != nil {
		w.setRepl(func(s *api.ReplicationStatus) {
			s.LastPushedTime, s.Refs = last.Pushed, len(last.Refs)
			if last.Newest != nil {
				s.LastPushed = last.Newest.ID
			}
		})
		if last.Newest != nil {
			w.repl.mu.Lock()
			w.repl.pushedUpTo = idNumber(last.Newest.ID)
			w.repl.mu.Unlock()
		}
	}
	wake := make(chan struct{}, 1)
	w.repl.wake = wake
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.replicate(rctx, p, cfg.Every(), wake, log)
	}()
	log.Info().Dur("interval", cfg.Every()).Msg("replication on")
	return func() {
		cancel()
		<-done
	}
}

// fingerprint changes when the ledger or the position does: something to push.
type fingerprint struct {
	records, pruned int
	last, position  string
}

func fingerprintOf(recs []ckpt.Record, position string) fingerprint {
	f := fingerprint{records: len(recs), position: position}
	for _, r := range recs {
		if r.Pruned() {
			f.pruned++
		}
	}
	if len(recs) > 0 {
		f.last = recs[len(recs)-1].ID
	}
	return f
}

// replicate is the replication's goroutine: it pushes when something
// changed, a lifecycle checkpoint at once, the rest at most once per
// interval, and backs off while the remote fails.
func (w *Workspace) replicate(ctx context.Context, p *replicate.Pusher, every time.Duration, wake <-chan struct{}, log zerolog.Logger) {
	timer := time.NewTimer(0) // a first sync at start: what was sealed while no daemon pushed
	defer timer.Stop()
	var (
		dirty       = true
		fp          fingerprint
		lastAttempt time.Time
		backoff     time.Duration
		retryAt     time.Time
	)
	for {
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-timer.C:
		}
		st := w.Store()
		if st == nil {
			timer.Reset(every)
			continue
		}
		recs := st.Records()
		f := fingerprintOf(recs, st.Position())
		if f != fp {
			dirty = true
		}
		w.noteLag(recs)
		urgent := w.repl.urgent.Load()
		now := time.Now()
		var wait time.Duration
		switch {
		case !dirty && !urgent:
			wait = every
		case !retryAt.IsZero() && now.Before(retryAt):
			wait = retryAt.Sub(now) // backing off: lifecycle checkpoints too
		case retryAt.IsZero() && !urgent && now.Sub(lastAttempt) < every:
			wait = every - now.Sub(lastAttempt)
		}
		if wait > 0 {
			timer.Reset(wait)
			continue
		}
		w.repl.urgent.Store(false)
		lastAttempt = now
		next := min(max(backoff*2, replBackoffFirst), replBackoffMax)
		failedAt, err := w.pushReplica(ctx, p, st, recs, log, next)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			backoff, retryAt = next, failedAt.Add(next)
			timer.Reset(backoff)
			continue
		}
		backoff, retryAt = 0, time.Time{}
		fp, dirty = f, false
		w.noteLag(st.Records())
		timer.Reset(every)
	}
}

// pushReplica pushes what changed once and shows the outcome. A failure is
// shown with its next retry, retryIn from when it failed (returned), in
// the same status update: a reader never sees "failing" without it, nor
// before the log says why.
func (w *Workspace) pushReplica(ctx context.Context, p *replicate.Pusher, st *snapshot.Store, recs []ckpt.Record, log zerolog.Logger, retryIn time.Duration) (failedAt time.Time, err error) {
	m := manifestOf(st, recs, w.dir)
	w.setRepl(func(s *api.ReplicationStatus) { s.State = ReplPushing })
	began := time.Now()
	res, err := p.Sync(ctx, m)
	failedAt = time.Now()
	w.met.Replicated(res.Pushes, err != nil && ctx.Err() == nil)
	conflicts := make([]string, 0, len(res.Conflicts))
	for _, c := range res.Conflicts {
		conflicts = append(conflicts, c.String())
	}
	if err != nil {
		if ctx.Err() != nil {
			w.setRepl(func(s *api.ReplicationStatus) { s.State = ReplIdle })
			return failedAt, err
		}
		log.Warn().Err(err).Dur("retry_in", retryIn).Msg("replication push failed; local checkpoints are unaffected")
		w.setRepl(func(s *api.ReplicationStatus) {
			s.State, s.Failures, s.LastError, s.LastErrorTime = ReplFailing, s.Failures+1, err.Error(), failedAt
			s.NextRetry = failedAt.Add(retryIn)
			s.Pushes += res.Pushes
			s.Conflicts = conflicts
		})
		return failedAt, err
	}
	upTo := 0
	if m.Newest != nil {
		upTo = idNumber(m.Newest.ID)
	}
	w.repl.mu.Lock()
	w.repl.pushedUpTo = max(w.repl.pushedUpTo, upTo)
	w.repl.mu.Unlock()
	now := time.Now()
	w.setRepl(func(s *api.ReplicationStatus) {
		s.State, s.NextRetry, s.Refs, s.Conflicts = ReplIdle, time.Time{}, res.Refs, conflicts
		s.Pushes += res.Pushes
		if !res.Nothing || s.LastPushedTime.IsZero() {
			s.LastPushedTime = now
		}
		if m.Newest != nil {
			s.LastPushed = m.Newest.ID
		}
		s.LastError, s.LastErrorTime = "", time.Time{}
		if len(conflicts) > 0 {
			s.LastError, s.LastErrorTime = "refs another writer moved on the remote are left alone: "+strings.Join(conflicts, "; "), now
		}
	})
	for _, c := range res.Conflicts {
		log.Warn().Str("ref", c.Ref).Str("remote_sha", c.Remote).Str("local_sha", c.Local).Str("reason", c.Reason).
			Msg("replication: ref not pushed; it is never overwritten")
	}
	if !res.Nothing {
		ev := log.Info().Int("updated", res.Updated).Int("deleted", res.Deleted).Int("refs", res.Refs).
			Int("pushes", res.Pushes).Bool("retried", res.Retried).Int64("duration_ms", time.Since(began).Milliseconds())
		if m.Newest != nil {
			ev = ev.Str("id", m.Newest.ID)
		}
		ev.Msg("replicated")
	}
	return time.Time{}, nil
}

// noteLag counts the checkpoints the last push did not carry.
func (w *Workspace) noteLag(recs []ckpt.Record) {
	w.repl.mu.Lock()
	defer w.repl.mu.Unlock()
	if w.repl.st == nil {
		return
	}
	n, oldest := 0, time.Time{}
	for _, r := range recs {
		if r.Usable() && idNumber(r.ID) > w.repl.pushedUpTo {
			if n == 0 {
				oldest = r.Time
			}
			n++
		}
	}
	w.repl.st.LagCheckpoints, w.repl.st.OldestUnpushed = n, oldest
	if n == 0 {
		w.repl.st.LagSeconds = 0
	}
}

// manifestOf describes the workspace for the remote.
func manifestOf(st *snapshot.Store, recs []ckpt.Record, dir string) replicate.Manifest {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		real = dir
	}
	m := replicate.Manifest{Workspace: real, Layout: string(st.Layout()), UID: os.Geteuid(), Position: st.Position()}
	if u, err := user.Current(); err == nil {
		m.Owner = u.Username
	}
	for _, r := range recs {
		if !r.Usable() {
			continue
		}
		m.Checkpoints++
		m.Newest = &replicate.Newest{ID: r.ID, SHA: r.SHA, Kind: string(r.Kind), Label: r.Label, Time: r.Time}
	}
	return m
}

// pushHome is HOME for the push: the account the workspace's work runs as.
// Another account (push_user) would need root in the worker; it is refused.
func pushHome(name string) (string, error) {
	cur, err := user.Current()
	if name != "" && (err != nil || (name != cur.Username && name != cur.Uid)) {
		who := fmt.Sprintf("uid %d", os.Geteuid())
		if err == nil {
			who = fmt.Sprintf("%s (uid %s)", cur.Username, cur.Uid)
		}
		return "", fmt.Errorf("push_user %q: this workspace's work runs as %s, and its push runs as that account only "+
			"(another account's keys would need root in the worker); leave push_user unset, or set user = %q for the workspace", name, who, name)
	}
	if h := os.Getenv("HOME"); h != "" && filepath.IsAbs(h) {
		return h, nil
	}
	if err == nil && cur.HomeDir != "" {
		return cur.HomeDir, nil
	}
	return "", errors.New("replication: the push user has no home directory")
}

// idNumber is the number of a ledger id (c12 → 12), 0 if none.
func idNumber(id string) int {
	n, err := strconv.Atoi(strings.TrimPrefix(id, "c"))
	if err != nil {
		return 0
	}
	return n
}
