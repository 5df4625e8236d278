package agent

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/workspace"
	"github.com/cairn-dev/cairn/restore/ckpt"
)

// process is one process's registry as a scrape finds it.
func process(t *testing.T, manual, watching float64, seals []float64, extra ...prometheus.Collector) []*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewRegistry()
	ck := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cairn_checkpoints_total", Help: "h"}, []string{"kind", "state"})
	ck.WithLabelValues("manual", "ok").Add(manual)
	ws := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "cairn_workspaces", Help: "h"}, []string{"state"})
	ws.WithLabelValues("watching").Set(watching)
	ws.WithLabelValues("failed").Set(0)
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "cairn_seal_duration_seconds", Help: "h", Buckets: sealBuckets})
	for _, s := range seals {
		h.Observe(s)
	}
	reg.MustRegister(append([]prometheus.Collector{ck, ws, h}, extra...)...)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// sample finds the metric of family name with the given label pairs.
func sample(fams []*dto.MetricFamily, name string, labels ...string) *dto.Metric {
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.Metric {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.Label {
					found = found || (lp.GetName() == labels[i] && lp.GetValue() == labels[i+1])
				}
				if !found {
					continue next
				}
			}
			return m
		}
	}
	return nil
}

func TestMetricsMergeAddsWorkers(t *testing.T) {
	only := prometheus.NewGauge(prometheus.GaugeOpts{Name: "cairn_worker_only", Help: "h"})
	only.Set(7)
	clash := prometheus.NewCounter(prometheus.CounterOpts{Name: "cairn_workspaces_autosave_paused", Help: "h"})
	clash.Add(5)
	paused := prometheus.NewGauge(prometheus.GaugeOpts{Name: "cairn_workspaces_autosave_paused", Help: "h"})
	paused.Set(1)
	sup := process(t, 2, 1, []float64{0.003, 0.2}, paused)
	w1 := process(t, 3, 2, []float64{0.004, 4}, only)
	w2 := process(t, 0, 0, nil, clash)
	w3 := process(t, 5, 1, []float64{20})
	got := mergeFamilies(sup, w1, w2, w3)

	if v := sample(got, "cairn_checkpoints_total", "kind", "manual", "state", "ok").GetCounter().GetValue(); v != 10 {
		t.Errorf("checkpoints: %v, want 2+3+0+5", v)
	}
	if v := sample(got, "cairn_workspaces", "state", "watching").GetGauge().GetValue(); v != 4 {
		t.Errorf("watching: %v, want 1+2+0+1", v)
	}
	if m := sample(got, "cairn_workspaces", "state", "failed"); m == nil || m.GetGauge().GetValue() != 0 {
		t.Errorf("failed: %v, want a zero series", m)
	}
	h := sample(got, "cairn_seal_duration_seconds").GetHistogram()
	if h.GetSampleCount() != 5 || h.GetSampleSum() != 0.003+0.2+0.004+4+20 {
		t.Errorf("histogram count %d sum %v", h.GetSampleCount(), h.GetSampleSum())
	}
	// Cumulative: 5 ms holds 0.003 and 0.004; 10 s all but the 20 s seal.
	for _, c := range []struct {
		le   float64
		want uint64
	}{{0.005, 2}, {0.25, 3}, {5, 4}, {10, 4}} {
		for _, b := range h.Bucket {
			if b.GetUpperBound() == c.le && b.GetCumulativeCount() != c.want {
				t.Errorf("bucket le=%v: %d, want %d", c.le, b.GetCumulativeCount(), c.want)
			}
		}
	}
	if v := sample(got, "cairn_worker_only").GetGauge().GetValue(); v != 7 {
		t.Errorf("a family only a worker has: %v, want it whole", v)
	}
	if v := sample(got, "cairn_workspaces_autosave_paused").GetGauge().GetValue(); v != 1 {
		t.Errorf("a family of another type was added in: %v", v)
	}
	for i := 1; i < len(got); i++ {
		if got[i-1].GetName() >= got[i].GetName() {
			t.Errorf("families not sorted: %s before %s", got[i-1].GetName(), got[i].GetName())
		}
	}

	// A worker that did not answer counts its workspaces as failed.
	addGauge(got, "cairn_workspaces", "state", workspace.StateFailed, 3)
	if v := sample(got, "cairn_workspaces", "state", "failed").GetGauge().GetValue(); v != 3 {
		t.Errorf("failed after a silent worker: %v, want 3", v)
	}
}

func TestMetricsMergeHistogramBucketsDiffer(t *testing.T) {
	a := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "cairn_x_seconds", Help: "h", Buckets: []float64{1, 2}})
	b := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "cairn_x_seconds", Help: "h", Buckets: []float64{1, 3}})
	a.Observe(0.5)
	b.Observe(0.5)
	ra, rb := prometheus.NewRegistry(), prometheus.NewRegistry()
	ra.MustRegister(a)
	rb.MustRegister(b)
	fa, _ := ra.Gather()
	fb, _ := rb.Gather()
	got := mergeFamilies(fa, fb)
	if n := sample(got, "cairn_x_seconds").GetHistogram().GetSampleCount(); n != 1 {
		t.Errorf("histograms of other buckets were added: count %d", n)
	}
}

func TestMetricsOnlyVisible(t *testing.T) {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "cairn_workspace_store_bytes", Help: "h"}, []string{"workspace"})
	g.WithLabelValues("/a").Set(1)
	g.WithLabelValues("/b").Set(2)
	hidden := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "cairn_workspace_checkpoints_kept", Help: "h"}, []string{"workspace"})
	hidden.WithLabelValues("/b").Set(2)
	total := prometheus.NewGauge(prometheus.GaugeOpts{Name: "cairn_store_bytes", Help: "h"})
	reg := prometheus.NewRegistry()
	reg.MustRegister(g, hidden, total)
	fams, _ := reg.Gather()
	got := onlyVisible(fams, func(dir string) bool { return dir == "/a" })
	if len(got) != 2 || sample(got, "cairn_store_bytes") == nil || sample(got, "cairn_workspace_store_bytes", "workspace", "/a") == nil ||
		sample(got, "cairn_workspace_store_bytes", "workspace", "/b") != nil {
		t.Errorf("visible: %v", got)
	}
}

// The hooks must be safe on a workspace made outside a daemon.
func TestMetricsNilHooks(t *testing.T) {
	var m *metrics
	m.Overflow()
	m.Maintained(errors.New("x"), "")
	m.MarkerSealed(time.Time{})
	m.Sealed(ckpt.KindManual, ckpt.Record{ID: "1"}, nil, time.Second)
	m.Restored("undo", time.Second, api.RestoreResult{}, nil)
	m.Replicated(1, true)
}
