package workspace

import (
	"testing"
	"time"

	"github.com/cairn-dev/cairn/agent/api"
)

// `cairn gc --full` asked while an automatic, geometric run is in progress
// does not take that run's answer (CI saw "repack geometric" answered to a
// full request); a request the run in progress covers joins it.
func TestGCFullDoesNotJoinLighterRun(t *testing.T) {
	var m maintState
	if running, joined := m.join(true, nil); running != nil || joined {
		t.Fatal("joined a run when none runs")
	}
	m.done = make(chan struct{})
	reply := make(chan api.MaintenanceResult, 1)
	if running, joined := m.join(true, reply); joined || running != m.done {
		t.Fatalf("a full request joined a geometric run (joined %v)", joined)
	}
	if len(m.waiters) != 0 {
		t.Fatal("a full request waits for a geometric run's answer")
	}
	if _, joined := m.join(false, reply); !joined || len(m.waiters) != 1 {
		t.Fatal("a plain request did not join the run in progress")
	}
	m.full = true
	if _, joined := m.join(true, reply); !joined {
		t.Fatal("a full request did not join a full run")
	}
}

// TestMaintenanceIdleCountsFromSealEnd: idle time counts from when the last
// seal ended, not from its record's time (when it began): a 61 s baseline
// is not a minute of idleness. The rest of the rule is unchanged.
func TestMaintenanceIdleCountsFromSealEnd(t *testing.T) {
	now := time.Now()
	idle, interval := time.Minute, time.Hour
	lastRun := now.Add(-90 * time.Minute) // due by the interval, not overdue
	for _, tc := range []struct {
		name       string
		began, end time.Time
		pending    bool
		lastRun    time.Time
		want       bool
	}{
		{"a long seal just ended", now.Add(-2 * time.Minute), now.Add(-time.Second), false, lastRun, false},
		{"idle since the seal ended", now.Add(-3 * time.Minute), now.Add(-2 * time.Minute), false, lastRun, true},
		{"no seal since start", now.Add(-2 * time.Minute), time.Time{}, false, lastRun, true},
		{"changes pending", now.Add(-3 * time.Minute), now.Add(-2 * time.Minute), true, lastRun, false},
		{"run within the interval", now.Add(-3 * time.Minute), now.Add(-2 * time.Minute), false, now.Add(-time.Minute), false},
		{"overdue however busy", now.Add(-2 * time.Second), now.Add(-time.Second), true, now.Add(-3 * time.Hour), true},
	} {
		if got := maintenanceDue(now, tc.lastRun, tc.began, tc.end, tc.pending, idle, interval); got != tc.want {
			t.Errorf("%s: due = %v, want %v", tc.name, got, tc.want)
		}
	}
}
