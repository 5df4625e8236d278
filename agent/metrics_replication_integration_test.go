//go:build linux

package agent_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/cairn-dev/cairn/agent/api"
)

// Replication in /metrics, scraped from real daemons: the lag a waiting
// checkpoint makes and the push that clears it, a remote that refuses, and a
// root daemon's workers merged by its supervisor.

func replMetricsConfig(t *testing.T, remote, interval string) string {
	t.Helper()
	return configFile(t, fmt.Sprintf("per_workspace_metrics = true\n\n[defaults]\nautosave = false\n\n"+
		"[defaults.replicate]\nremote = %q\nhost = \"h1\"\ninterval = %q\n", remote, interval))
}

// TestMetricsReplication: to a file:// remote the lag rises with a checkpoint
// that waits for its interval and falls to 0 when a lifecycle checkpoint
// pushes it; pushes are counted ok. A wrong remote shows failing.
func TestMetricsReplication(t *testing.T) {
	remote := "file://" + bareRepo(t, t.TempDir(), "fleet.git")
	ws := replWorkspace(t, "metrics", 3)
	d := startDaemon(t, "", "--config", replMetricsConfig(t, remote, "1h"), "--watch", ws)
	waitWatching(t, d, ws)
	lag := func(f map[string]*dto.MetricFamily) float64 {
		return metricValue(f, "cairn_replication_lag_checkpoints")
	}
	wsLag := func(f map[string]*dto.MetricFamily) float64 {
		return metricValue(f, "cairn_workspace_replication_lag_checkpoints", "workspace", ws)
	}
	lagSeconds := func(f map[string]*dto.MetricFamily) float64 { return metricValue(f, "cairn_replication_lag_seconds") }
	pushed := func(f map[string]*dto.MetricFamily) float64 {
		return metricValue(f, "cairn_replication_pushes_total", "result", "ok")
	}
	state := func(f map[string]*dto.MetricFamily, s string) float64 {
		return metricValue(f, "cairn_replication_workspaces", "state", s)
	}

	// The first sync at start pushes the baseline.
	var f map[string]*dto.MetricFamily
	waitFor(t, 30*time.Second, "the baseline pushed", func() bool {
		f = scrape(t, d.socket)
		return pushed(f) >= 1 && lag(f) == 0 && wsLag(f) == 0 && state(f, "idle") == 1
	})
	if lagSeconds(f) != 0 || metricValue(f, "cairn_replication_pushes_total", "result", "failed") != 0 ||
		state(f, "failing") != 0 || state(f, "off") != 0 || state(f, "pushing") != 0 {
		t.Errorf("after the first push: lag %vs, failed %v, failing %v, off %v, pushing %v", lagSeconds(f),
			metricValue(f, "cairn_replication_pushes_total", "result", "failed"), state(f, "failing"), state(f, "off"), state(f, "pushing"))
	}
	before := pushed(f)

	// A manual checkpoint waits for the interval (an hour): lag.
	write(t, filepath.Join(ws, "src/f000.txt"), "manual")
	if code, body := call(t, d.socket, "POST", "/v1/checkpoint", api.CheckpointRequest{Workspace: ws, Label: "waits"}); code != 200 {
		t.Fatalf("checkpoint: %d %v", code, body)
	}
	waitFor(t, 20*time.Second, "the manual checkpoint as lag", func() bool {
		f = scrape(t, d.socket)
		return lag(f) == 1 && wsLag(f) == 1 && lagSeconds(f) > 0
	})
	if pushed(f) != before {
		t.Errorf("pushes ok %v, want %v: nothing was to be pushed", pushed(f), before)
	}

	// A lifecycle checkpoint is pushed at once, with it: no lag left.
	write(t, filepath.Join(ws, "src/f001.txt"), "lifecycle")
	if code, body := call(t, d.socket, "POST", "/v1/checkpoint", api.CheckpointRequest{Workspace: ws, Status: "completed", CodonID: "c1", RunID: "r1"}); code != 200 {
		t.Fatalf("lifecycle checkpoint: %d %v", code, body)
	}
	waitFor(t, 30*time.Second, "the lag back to 0", func() bool {
		f = scrape(t, d.socket)
		return lag(f) == 0 && wsLag(f) == 0 && lagSeconds(f) == 0 && pushed(f) >= before+1 && state(f, "idle") == 1
	})

	// A wrong remote: failing, failed attempts counted, the baseline waits.
	bad := startDaemon(t, "", "--config", replMetricsConfig(t, "file://"+filepath.Join(t.TempDir(), "nowhere.git"), "100ms"),
		"--watch", replWorkspace(t, "wrong", 2))
	waitFor(t, 30*time.Second, "a failing replication in /metrics", func() bool {
		f = scrape(t, bad.socket)
		return state(f, "failing") == 1 && state(f, "idle") == 0 &&
			metricValue(f, "cairn_replication_pushes_total", "result", "failed") >= 1 && lag(f) == 1 && lagSeconds(f) > 0
	})
	if pushed(f) != 0 {
		t.Errorf("a remote that refuses counted %v pushes ok", pushed(f))
	}
}

// TestMetricsReplicationWorkers: a root daemon serves two users' workspaces
// in two workers, each failing to push its baseline. The supervisor sums the
// counts and states, and takes the largest lag in seconds, never the sum.
func TestMetricsReplicationWorkers(t *testing.T) {
	alice, bob := newUser(t), newUser(t)
	base := openBase(t)
	wa, wb := filepath.Join(base, "alice-ws"), filepath.Join(base, "bob-ws")
	ownedDir(t, alice, wa, map[string]string{"a.txt": "alice's\n"})
	ownedDir(t, bob, wb, map[string]string{"b.txt": "bob's\n"})
	state := filepath.Join(base, "state")
	cfg := replMetricsConfig(t, "file://"+filepath.Join(t.TempDir(), "nowhere.git"), "100ms")
	d := startDaemon(t, state, "--config", cfg, "--watch", wa, "--watch", wb)
	waitWatching(t, d, wa)
	waitWatching(t, d, wb)

	var f map[string]*dto.MetricFamily
	var oldest time.Time
	waitFor(t, 60*time.Second, "both workers failing, a second behind", func() bool {
		f = scrape(t, d.socket)
		return metricValue(f, "cairn_replication_workspaces", "state", "failing") == 2 &&
			metricValue(f, "cairn_replication_lag_checkpoints") == 2 &&
			metricValue(f, "cairn_replication_pushes_total", "result", "failed") >= 2 &&
			metricValue(f, "cairn_replication_lag_seconds") >= 1
	})
	scraped := time.Now()
	for _, dir := range []string{wa, wb} {
		w, _ := d.workspace(dir)
		if w.Replication == nil || w.Replication.OldestUnpushed.IsZero() {
			t.Fatalf("%s: replication status %+v", dir, w.Replication)
		}
		if oldest.IsZero() || w.Replication.OldestUnpushed.Before(oldest) {
			oldest = w.Replication.OldestUnpushed
		}
		if got := metricValue(f, "cairn_workspace_replication_lag_checkpoints", "workspace", dir); got != 1 {
			t.Errorf("%s: per-workspace lag %v, want 1", dir, got)
		}
	}
	// The oldest baseline's age bounds it: a sum of two ages (each ≥ 1 s)
	// would exceed it.
	if got, bound := metricValue(f, "cairn_replication_lag_seconds"), scraped.Sub(oldest).Seconds(); got > bound {
		t.Errorf("cairn_replication_lag_seconds %v is more than the oldest unpushed checkpoint's age %v: summed over workers?", got, bound)
	}
}
