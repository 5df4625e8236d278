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

// Debouncer collects changed paths into a dirty set and says when to flush
// it: once no change came for the quiet period, or once the maximum wait has
// passed since the first unflushed change, whichever is sooner.
//
// It owns no goroutine: one timer, armed only while changes are pending, so
// an idle Debouncer costs nothing.
type Debouncer struct {
	quiet, maxWait time.Duration
	c              chan struct{}

	mu          sync.Mutex
	dirty       map[string]time.Time
	first, last time.Time // first and latest Add since the last Take
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
		dirty:   make(map[string]time.Time),
	}
}

// Add marks path dirty; t is when its change was seen, and the latest t per
// path is kept. The quiet and maximum waits run on the clock of Add's calls.
func (d *Debouncer) Add(path string, t time.Time) {
	now := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.dirty) == 0 {
		d.first = now
	}
	d.last = now
	if old, ok := d.dirty[path]; !ok || t.After(old) {
		d.dirty[path] = t
	}
	if !d.armed && !d.due && !d.stopped {
		d.arm(min(d.quiet, d.maxWait))
	}
}

// C receives a value when a flush is due. Call Take then.
func (d *Debouncer) C() <-chan struct{} { return d.c }

// Take returns the dirty paths with their latest change times and clears the
// set. It may be called at any time (a lifecycle checkpoint flushes early);
// it withdraws a pending value on C, and may return an empty map.
func (d *Debouncer) Take() map[string]time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	m := d.dirty
	d.dirty = make(map[string]time.Time, len(m)/2)
	d.due = false
	select {
	case <-d.c:
	default:
	}
	return m
}

// Len is the number of dirty paths.
func (d *Debouncer) Len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.dirty)
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
	if d.due || len(d.dirty) == 0 {
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
