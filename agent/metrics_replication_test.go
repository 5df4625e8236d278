package agent

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// replProcess is one process's replication families as a scrape finds them.
func replProcess(t *testing.T, lag, lagSeconds, ok, failing float64) []*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewRegistry()
	l := prometheus.NewGauge(prometheus.GaugeOpts{Name: "cairn_replication_lag_checkpoints", Help: "h"})
	l.Set(lag)
	s := prometheus.NewGauge(prometheus.GaugeOpts{Name: "cairn_replication_lag_seconds", Help: "h"})
	s.Set(lagSeconds)
	p := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cairn_replication_pushes_total", Help: "h"}, []string{"result"})
	p.WithLabelValues("ok").Add(ok)
	w := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "cairn_replication_workspaces", Help: "h"}, []string{"state"})
	w.WithLabelValues("failing").Set(failing)
	reg.MustRegister(l, s, p, w)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// Under a root daemon the lag in checkpoints, the pushes and the states add
// up over workers; the lag in seconds (the oldest unpushed checkpoint's
// age) is the largest of theirs.
func TestMetricsMergeReplication(t *testing.T) {
	got := mergeFamilies(replProcess(t, 0, 0, 0, 0), replProcess(t, 2, 60, 3, 1), replProcess(t, 5, 30, 4, 1), replProcess(t, 0, 0, 1, 0))
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"cairn_replication_lag_checkpoints", nil, 7},
		{"cairn_replication_lag_seconds", nil, 60},
		{"cairn_replication_pushes_total", []string{"result", "ok"}, 8},
		{"cairn_replication_workspaces", []string{"state", "failing"}, 2},
	} {
		m := sample(got, c.name, c.labels...)
		if v := m.GetGauge().GetValue() + m.GetCounter().GetValue(); m == nil || v != c.want {
			t.Errorf("%s%v: %v, want %v", c.name, c.labels, v, c.want)
		}
	}
}
