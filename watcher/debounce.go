package watcher

import (
	"sync"
	"time"
)

// Autosave timing defaults: flush after this long without a change, or this
// long after the first unflushed change while changes keep coming.
const (
	DefaultQuiet   = 2 * time.Second
	DefaultMaxWait = 60 * time.Second
)

// Debouncer is a pure timer that says when to flush changes: once no change
// came for the quiet period, or once the maximum wait has passed since the
// first unflushed change, whichever is sooner. What changed is the caller's
// to keep; the Debouncer only knows that something did.
//
// It owns no goroutine: one timer, armed only while changes are pending, so
// an idle Debouncer costs nothing.
type Debouncer struct {
	quiet, maxWait time.Duration
	c              chan struct{}

	mu          sync.Mutex
	first, last time.Time // first and latest Add since the last Take; first is zero when none came
	timer       *time.Timer
	armed       bool // timer set and not yet fired
	due         bool // a flush was signalled and not yet taken
	stopped     bool
}

// NewDebouncer returns a Debouncer; a zero quiet or maxWait means the default.
func NewDebouncer(quiet, maxWait time.Duration) *Debouncer {
	if quiet <= 0 {
		quiet = DefaultQuiet
	}
	if maxWait <= 0 {
		maxWait = DefaultMaxWait
	}
	return &Debouncer{
		quiet:   quiet,
		maxWait: maxWait,
		c:       make(chan struct{}, 1),
	}
}

// Add notes a change. The quiet and maximum waits run on the clock of Add's
// calls.
func (d *Debouncer) Add() {
	now := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.first.IsZero() {
		d.first = now
	}
	d.last = now
	if !d.armed && !d.due && !d.stopped {
		d.arm(min(d.quiet, d.maxWait))
	}
}

// C receives a value when a flush is due. Call Take then.
func (d *Debouncer) C() <-chan struct{} { return d.c }

// Take says the pending changes were flushed: the waits start over at the
// next Add. It may be called at any time (a lifecycle checkpoint flushes
// early); it withdraws a pending value on C.
func (d *Debouncer) Take() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.first, d.due = time.Time{}, false
	select {
	case <-d.c:
	default:
	}
}

// Stop disarms the timer: C fires no more. Take still works.
func (d *Debouncer) Stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stopped = true
	d.armed = false
	if d.timer != nil {
		d.timer.Stop()
	}
}

// arm sets the timer; d.mu is held.
func (d *Debouncer) arm(wait time.Duration) {
	d.armed = true
	if d.timer == nil {
		d.timer = time.AfterFunc(wait, d.fire)
		return
	}
	d.timer.Reset(wait)
}

// fire runs when the timer expires. The timer is not moved on every Add;
// instead fire re-arms itself until the flush is really due.
func (d *Debouncer) fire() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.armed || d.stopped {
		return // stopped, or a stale expiry racing a Reset
	}
	d.armed = false
	if d.due || d.first.IsZero() {
		return // taken early
	}
	due := d.last.Add(d.quiet)
	if latest := d.first.Add(d.maxWait); latest.Before(due) {
		due = latest
	}
	if wait := time.Until(due); wait > 0 {
		d.arm(wait)
		return
	}
	d.due = true
	select {
	case d.c <- struct{}{}:
	default:
	}
}
