package watcher

import (
	"testing"
	"time"
)

const (
	testQuiet   = 50 * time.Millisecond
	testMaxWait = 300 * time.Millisecond
)

// waitFlush waits for C and returns when it fired.
func waitFlush(t *testing.T, d *Debouncer) time.Time {
	t.Helper()
	select {
	case <-d.C():
		return time.Now()
	case <-time.After(waitTimeout):
		t.Fatal("no flush")
		return time.Time{}
	}
}

func TestDebouncerQuietPeriod(t *testing.T) {
	checkNoLeaks(t)
	d := NewDebouncer(testQuiet, time.Minute)
	defer d.Stop()

	t0 := time.Now()
	d.Add()
	fired := waitFlush(t, d)
	if got := fired.Sub(t0); got < testQuiet {
		t.Errorf("flushed %v after the only change, before the quiet period %v", got, testQuiet)
	}
	d.Take()
	noFlush(t, d, "after Take with no change since")
}

// noFlush checks that C stays quiet. A negative check needs a bounded look:
// several quiet periods.
func noFlush(t *testing.T, d *Debouncer, when string) {
	t.Helper()
	select {
	case <-d.C():
		t.Errorf("flush %s", when)
	case <-time.After(4 * testQuiet):
	}
}

// Each change restarts the quiet period: the flush comes a quiet period after
// the last change, not the first.
func TestDebouncerQuietRestarts(t *testing.T) {
	checkNoLeaks(t)
	d := NewDebouncer(testQuiet, time.Minute)
	defer d.Stop()

	d.Add()
	time.Sleep(testQuiet / 2) // paces the input; nothing is waited for
	select {
	case <-d.C():
		// The machine stalled past the quiet period: a flush was due.
	default:
		last := time.Now()
		d.Add()
		fired := waitFlush(t, d)
		if got := fired.Sub(last); got < testQuiet {
			t.Errorf("flushed %v after the last change, before the quiet period %v", got, testQuiet)
		}
	}
	d.Take()
}

// During continuous change the flush comes at the maximum wait.
func TestDebouncerMaxWait(t *testing.T) {
	checkNoLeaks(t)
	d := NewDebouncer(testQuiet, testMaxWait)
	defer d.Stop()

	tick := time.NewTicker(testQuiet / 10)
	defer tick.Stop()
	start := time.Now()
	prev, maxGap := start, time.Duration(0)
	d.Add()
	deadline := time.After(waitTimeout)
	var fired time.Time
	for fired.IsZero() {
		select {
		case <-d.C():
			fired = time.Now()
			maxGap = max(maxGap, fired.Sub(prev)) // the test may have stalled since its last Add
		case <-tick.C:
			now := time.Now() // not the tick's time: a stalled test adds late
			d.Add()
			maxGap = max(maxGap, now.Sub(prev))
			prev = now
		case <-deadline:
			t.Fatal("no flush during continuous change")
		}
	}
	elapsed := fired.Sub(start)
	if maxGap < testQuiet && elapsed < testMaxWait {
		// Only a gap of a quiet period between changes may flush early.
		t.Errorf("flushed after %v with no gap over %v: before the maximum wait %v", elapsed, maxGap, testMaxWait)
	}
	if elapsed > testMaxWait+2*time.Second {
		t.Errorf("flushed after %v, long past the maximum wait %v", elapsed, testMaxWait)
	}
	d.Take()
}

func TestDebouncerTakeResets(t *testing.T) {
	checkNoLeaks(t)
	d := NewDebouncer(testQuiet, testMaxWait)
	defer d.Stop()

	d.Add()
	waitFlush(t, d)
	d.Add() // after the flush signal, before Take: flushed with it
	d.Take()
	noFlush(t, d, "for a change flushed by the Take after it")

	// An early Take (a lifecycle seal) withdraws the pending flush.
	d.Add()
	waitFlush(t, d)
	d.Add()
	d.Take()
	select {
	case <-d.C():
		t.Error("C still holds a flush after Take")
	default:
	}

	d.Add()
	waitFlush(t, d)
	d.Take()
}

// A Take before the flush is due leaves the armed timer nothing to flush.
func TestDebouncerTakeBeforeDue(t *testing.T) {
	checkNoLeaks(t)
	d := NewDebouncer(testQuiet, testMaxWait)
	defer d.Stop()
	d.Add()
	d.Take()
	noFlush(t, d, "after an early Take")

	// The waits start over at the next Add.
	t0 := time.Now()
	d.Add()
	if got := waitFlush(t, d).Sub(t0); got < testQuiet {
		t.Errorf("flushed %v after the change, before the quiet period %v", got, testQuiet)
	}
	d.Take()
}

func TestDebouncerStop(t *testing.T) {
	checkNoLeaks(t)
	d := NewDebouncer(testQuiet, testMaxWait)
	d.Add()
	d.Stop()
	d.Add()
	noFlush(t, d, "after Stop")
	d.Take() // still works
}

func TestDebouncerDefaults(t *testing.T) {
	d := NewDebouncer(0, 0)
	defer d.Stop()
	if d.quiet != DefaultQuiet || d.maxWait != DefaultMaxWait {
		t.Errorf("defaults = %v, %v", d.quiet, d.maxWait)
	}
}
