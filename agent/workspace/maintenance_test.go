package workspace

import (
	"testing"

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
