package watcher

import (
	"fmt"
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
	d.Add("a", t0)
	fired := waitFlush(t, d)
	if got := fired.Sub(t0); got < testQuiet {
		t.Errorf("flushed %v after the only change, before the quiet period %v", got, testQuiet)
	}
	got := d.Take()
	if len(got) != 1 || !got["a"].Equal(t0) {
		t.Errorf("Take = %v", got)
	}
	if got := d.Take(); len(got) != 0 {
		t.Errorf("second Take = %v, want empty", got)
	}
}

// Each change restarts the quiet period: the flush comes a quiet period after
// the last change, not the first.
func TestDebouncerQuietRestarts(t *testing.T) {
	checkNoLeaks(t)
	d := NewDebouncer(testQuiet, time.Minute)
	defer d.Stop()

	d.Add("a", time.Now())
	time.Sleep(testQuiet / 2) // paces the input; nothing is waited for
	var last time.Time
	select {
	case <-d.C():
		// The machine stalled past the quiet period: a flush was due.
	default:
		last = time.Now()
		d.Add("b", last)
		fired := waitFlush(t, d)
		if got := fired.Sub(last); got < testQuiet {
			t.Errorf("flushed %v after the last change, before the quiet period %v", got, testQuiet)
		}
	}
	got := d.Take()
	if _, ok := got["a"]; !ok {
		t.Errorf("Take = %v, lacks a", got)
	}
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
	added := map[string]bool{"p0": true}
	d.Add("p0", start)
	deadline := time.After(waitTimeout)
	var fired time.Time
	for i := 1; fired.IsZero(); i++ {
		select {
		case <-d.C():
			fired = time.Now()
			maxGap = max(maxGap, fired.Sub(prev)) // the test may have stalled since its last Add
		case <-tick.C:
			p := fmt.Sprintf("p%d", i%7)
			added[p] = true
			now := time.Now() // not the tick's time: a stalled test adds late
			d.Add(p, now)
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
	if got := d.Take(); len(got) != len(added) {
		t.Errorf("Take has %d paths, want %d: %v", len(got), len(added), got)
	}
}

func TestDebouncerTakeResets(t *testing.T) {
	checkNoLeaks(t)
	d := NewDebouncer(testQuiet, testMaxWait)
	defer d.Stop()

	d.Add("a", time.Now())
	waitFlush(t, d)
	d.Add("b", time.Now()) // after the flush signal, before Take: taken with it
	if got := d.Take(); len(got) != 2 {
		t.Errorf("Take = %v, want a and b", got)
	}

	// An early Take (a lifecycle seal) withdraws the pending flush.
	d.Add("c", time.Now())
	waitFlush(t, d)
	d.Add("d", time.Now())
	d.Take()
	select {
	case <-d.C():
		t.Error("C still holds a flush after Take")
	default:
	}

	d.Add("e", time.Now())
	waitFlush(t, d)
	if got := d.Take(); len(got) != 1 {
		t.Errorf("Take = %v, want only e", got)
	}
}

func TestDebouncerKeepsLatestTime(t *testing.T) {
	d := NewDebouncer(time.Hour, time.Hour)
	defer d.Stop()
	t0 := time.Now()
	d.Add("a", t0)
	d.Add("a", t0.Add(-time.Second)) // an older event seen late
	d.Add("a", t0.Add(time.Second))
	d.Add("b", t0)
	if d.Len() != 2 {
		t.Errorf("Len = %d", d.Len())
	}
	got := d.Take()
	if !got["a"].Equal(t0.Add(time.Second)) || !got["b"].Equal(t0) {
		t.Errorf("Take = %v", got)
	}
}

func TestDebouncerStop(t *testing.T) {
	checkNoLeaks(t)
	d := NewDebouncer(testQuiet, testMaxWait)
	d.Add("a", time.Now())
	d.Stop()
	d.Add("b", time.Now())
	// A negative check needs a bounded look: several quiet periods.
	select {
	case <-d.C():
		t.Error("flush after Stop")
	case <-time.After(4 * testQuiet):
	}
	if got := d.Take(); len(got) != 2 {
		t.Errorf("Take after Stop = %v", got)
	}
}

func TestDebouncerDefaults(t *testing.T) {
	d := NewDebouncer(0, 0)
	defer d.Stop()
	if d.quiet != DefaultQuiet || d.maxWait != DefaultMaxWait {
		t.Errorf("defaults = %v, %v", d.quiet, d.maxWait)
	}
}
