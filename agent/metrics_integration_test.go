//go:build linux

package agent_test

import (
	"bytes"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/hankweave/hwsim"
	"github.com/cairn-dev/cairn/restore/ckpt"
)

// scrape reads GET /metrics on the daemon's socket, as root, and parses it.
func scrape(t testing.TB, sock string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := sockClient(sock).Get("http://cairn/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET /metrics: %s %s\n%s", resp.Status, resp.Header.Get("Content-Type"), body)
	}
	return parseMetrics(t, body)
}

// parseMetrics parses Prometheus' text format with the client library's parser.
func parseMetrics(t testing.TB, body []byte) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v\n%s", err, body)
	}
	return fams
}

// metricValue is the value of the series of family name with exactly these
// label pairs (a histogram's: its count), or -1 when there is none.
func metricValue(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	f := fams[name]
	if f == nil {
		return -1
	}
	for _, m := range f.Metric {
		if len(m.Label) != len(labels)/2 {
			continue
		}
		match := true
		for i, lp := range m.Label {
			// Labels come sorted by name; so must the pairs asked for.
			match = match && lp.GetName() == labels[2*i] && lp.GetValue() == labels[2*i+1]
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	return -1
}

// mentions reports whether any series carries label=value.
func mentions(fams map[string]*dto.MetricFamily, label, value string) bool {
	for _, f := range fams {
		for _, m := range f.Metric {
			for _, lp := range m.Label {
				if lp.GetName() == label && lp.GetValue() == value {
					return true
				}
			}
		}
	}
	return false
}

// TestMetricsSealsCounted scrapes a real daemon over its socket and its
// loopback TCP listener: a manual checkpoint moves the checkpoint counter and
// the seal-duration histogram, restores count by result.
func TestMetricsSealsCounted(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ws")
	write(t, filepath.Join(dir, "a.txt"), "a\n")
	state := t.TempDir()
	cfg := configFile(t, "metrics_listen = \"127.0.0.1:0\"\nper_workspace_metrics = true\n\n[defaults]\nautosave = false\n")
	d := startDaemon(t, state, "--config", cfg, "--watch", dir)
	waitWatching(t, d, dir)

	before := scrape(t, d.socket)
	manual := func(f map[string]*dto.MetricFamily) float64 {
		return metricValue(f, "cairn_checkpoints_total", "kind", "manual", "state", "ok")
	}
	seals := func(f map[string]*dto.MetricFamily) float64 { return metricValue(f, "cairn_seal_duration_seconds") }
	if manual(before) != 0 || seals(before) < 1 {
		t.Fatalf("before any manual checkpoint: manual %v, seals %v (the baseline is one)", manual(before), seals(before))
	}
	if f := before["cairn_build_info"]; f == nil || len(f.Metric) != 1 || metricValue(before, "cairn_inotify_max_user_watches") <= 0 ||
		metricValue(before, "cairn_workspaces", "state", "watching") != 1 || metricValue(before, "cairn_inotify_watches") < 1 {
		t.Errorf("daemon gauges: build_info %v, watch limit %v, watching %v, watches %v", f, metricValue(before, "cairn_inotify_max_user_watches"),
			metricValue(before, "cairn_workspaces", "state", "watching"), metricValue(before, "cairn_inotify_watches"))
	}
	if metricValue(before, "cairn_workspace_store_bytes", "workspace", dir) <= 0 {
		t.Errorf("per-workspace store bytes of %s missing", dir)
	}

	write(t, filepath.Join(dir, "b.txt"), "b\n")
	code, body := call(t, d.socket, "POST", "/v1/checkpoint", api.CheckpointRequest{Workspace: dir, Label: "counted"})
	if code != 200 {
		t.Fatalf("checkpoint: %d %v", code, body)
	}
	waitFor(t, 20*time.Second, "the manual checkpoint counted", func() bool {
		f := scrape(t, d.socket)
		return manual(f) == manual(before)+1 && seals(f) > seals(before)
	})

	restores := func(result string) float64 {
		return metricValue(scrape(t, d.socket), "cairn_restores_total", "kind", "restore", "result", result)
	}
	if code, body := call(t, d.socket, "POST", "/v1/restore", api.RestoreRequest{Workspace: dir, Target: body["id"].(string)}); code != 200 {
		t.Fatalf("restore: %d %v", code, body)
	}
	if code, body := call(t, d.socket, "POST", "/v1/restore", api.RestoreRequest{Workspace: dir, Target: strings.Repeat("ab", 20)}); code != 404 {
		t.Fatalf("restore to no checkpoint: %d %v", code, body)
	}
	waitFor(t, 20*time.Second, "the restores counted", func() bool { return restores("ok") == 1 && restores("refused") == 1 })

	// The TCP listener says where it listens in the log; it answers loopback names only.
	var addr string
	re := regexp.MustCompile(`"metrics_listen":"([^"]+)"[^\n]*"metrics listening"`)
	waitFor(t, 10*time.Second, "the metrics listener", func() bool {
		m := re.FindStringSubmatch(d.log.String())
		if m != nil {
			addr = m[1]
		}
		return m != nil
	})
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /metrics over TCP: %s %s", resp.Status, raw)
	}
	if f := parseMetrics(t, raw); manual(f) != manual(before)+1 || metricValue(f, "cairn_workspace_store_bytes", "workspace", dir) <= 0 {
		t.Errorf("over TCP: manual %v, store bytes of %s %v", manual(f), dir, metricValue(f, "cairn_workspace_store_bytes", "workspace", dir))
	}
	req, _ := http.NewRequest("GET", "http://"+addr+"/metrics", nil)
	req.Host = "rebound.example:9465"
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("GET /metrics with Host rebound.example: %s, want 421", resp.Status)
	}
}

// TestMetricsWorkerCountsReachSupervisor: a root daemon serves a user's
// workspace in that user's worker; the checkpoint the worker seals shows in
// the supervisor's /metrics, and per-workspace series only to root and the
// owner.
func TestMetricsWorkerCountsReachSupervisor(t *testing.T) {
	alice, bob := newUser(t), newUser(t)
	base := openBase(t)
	wa := filepath.Join(base, "alice-ws")
	ownedDir(t, alice, wa, map[string]string{"a.txt": "alice's\n"})
	state := filepath.Join(base, "state")
	d := startDaemon(t, state, "--config", configFile(t, "per_workspace_metrics = true\n"), "--watch", wa)
	waitWatching(t, d, wa)

	before := scrape(t, d.socket)
	manual := func(f map[string]*dto.MetricFamily) float64 {
		return metricValue(f, "cairn_checkpoints_total", "kind", "manual", "state", "ok")
	}
	seals := func(f map[string]*dto.MetricFamily) float64 { return metricValue(f, "cairn_seal_duration_seconds") }
	if code, body := httpAs(t, alice, d.socket, "POST", "/v1/checkpoint", api.CheckpointRequest{Workspace: wa, Label: "mine"}); code != 200 {
		t.Fatalf("alice's checkpoint: %d %s", code, body)
	}
	// The supervisor serves no workspace itself: every seal counted is the worker's.
	var after map[string]*dto.MetricFamily
	waitFor(t, 30*time.Second, "the worker's checkpoint in the supervisor's metrics", func() bool {
		after = scrape(t, d.socket)
		return manual(after) == manual(before)+1 && seals(after) > seals(before) &&
			metricValue(after, "cairn_workspaces", "state", "watching") == 1
	})
	if n := metricValue(after, "cairn_workers", "state", "running"); n != 1 {
		t.Errorf("running workers: %v, want 1", n)
	}
	if f := after["cairn_build_info"]; f == nil || len(f.Metric) != 1 {
		t.Errorf("build info, once: %v", f)
	}
	if metricValue(after, "cairn_worker_scrape_errors_total") < 0 {
		t.Error("no cairn_worker_scrape_errors_total")
	}
	if metricValue(after, "cairn_workspace_store_bytes", "workspace", wa) <= 0 {
		t.Errorf("root's scrape lacks the worker's per-workspace series of %s", wa)
	}

	// Per-workspace series name folders: a user sees only their own.
	for _, c := range []struct {
		u    testUser
		sees bool
	}{{alice, true}, {bob, false}} {
		code, body := httpAs(t, c.u, d.socket, "GET", "/metrics", nil)
		if code != 200 {
			t.Fatalf("%s's scrape: %d %s", c.u.name, code, body)
		}
		f := parseMetrics(t, body)
		if got := mentions(f, "workspace", wa); got != c.sees {
			t.Errorf("%s's scrape names %s: %v, want %v", c.u.name, wa, got, c.sees)
		}
		if manual(f) < 1 {
			t.Errorf("%s's scrape lacks the totals", c.u.name)
		}
	}
}

// TestMetricsLifecycleMarker: a codon's completion marker, sealed by cairn,
// is counted by kind and observed in the marker-to-sealed histogram.
func TestMetricsLifecycleMarker(t *testing.T) {
	exec, sim := newHankExec(t, hwsim.Plan(hwsim.Codon{ID: "a", Name: "Codon A", Files: []string{"**"}}))
	state := t.TempDir()
	d := startDaemon(t, state, "--config", configFile(t, noAutosave), "--watch", exec)
	waitBaseline(t, exec, state)
	run := sim.StartRun()
	sim.StartCodon("a")
	sim.WriteFile("a.txt", "a\n")
	sim.CompleteCodon("a")
	rec := waitMarker(t, exec, state, markerKey{ckpt.KindCompleted, run, "a", 0})
	waitFor(t, 20*time.Second, "the completed checkpoint counted", func() bool {
		f := scrape(t, d.socket)
		return metricValue(f, "cairn_checkpoints_total", "kind", "completed", "state", string(rec.State)) == 1 &&
			metricValue(f, "cairn_marker_to_sealed_seconds") >= 1
	})
}
