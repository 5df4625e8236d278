package agent

import (
	"context"
	"errors"
	"maps"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/workerproto"
	"github.com/cairn-dev/cairn/agent/workspace"
	"github.com/cairn-dev/cairn/platform"
	"github.com/cairn-dev/cairn/restore/ckpt"
)

// Prometheus metrics (docs/operating.md, "Metrics"): GET /metrics on the daemon's socket
// and, opt-in, on a loopback TCP address (metrics_listen). Counters and
// histograms are counted where seals, restores and maintenance runs end;
// the rest is read from the workspaces' state at scrape time. A root
// daemon adds what its workers count to its own (mergeFamilies).

// sealBuckets fit seals and marker latencies: 5 ms to 10 s.
var sealBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// restoreBuckets add the minutes a large restore may take.
var restoreBuckets = append(slices.Clone(sealBuckets), 30, 60, 300)

// workerMetricsTimeout bounds how long a scrape waits on one worker.
const workerMetricsTimeout = time.Second

// metrics is one daemon's registry (never the global one) and what it counts.
type metrics struct {
	reg   *prometheus.Registry // totals: no paths in it
	perWS *prometheus.Registry // per-workspace series, gathered when per_workspace_metrics asks

	checkpoints    *prometheus.CounterVec
	sealSeconds    prometheus.Histogram
	markerSeconds  prometheus.Histogram
	restores       *prometheus.CounterVec
	restoreSeconds *prometheus.HistogramVec
	overflows      prometheus.Counter
	maintenance    *prometheus.CounterVec
	replPushes     *prometheus.CounterVec
	scrapeErrors   prometheus.Counter     // supervisor: workers that did not answer a scrape
	workerDrops    *prometheus.CounterVec // supervisor: what it refused from workers, by kind (package workerproto)
}

// Label values counted from the start, so every series exists at zero.
var (
	sealStates     = []ckpt.State{ckpt.StateOK, ckpt.StatePartial, ckpt.StateRacy, ckpt.StateFailed}
	restoreKinds   = []string{"restore", "undo", "rollback"}
	restoreResults = []string{"ok", "refused", "failed"}
	maintResults   = []string{"ok", "skipped", "failed", "cancelled"}
	replResults    = []string{"ok", "failed"}
	// replStates are the states cairn_replication_workspaces always has a series for.
	replStates = []string{workspace.ReplIdle, workspace.ReplPushing, workspace.ReplFailing, workspace.ReplOff}
	// workspaceStates are the states cairn_workspaces always has a series for.
	workspaceStates = workerproto.States
	workerStates    = []string{workerStarting, workerRunning, workerRestarting}
)

func newMetrics(d *Daemon) *metrics {
	m := &metrics{reg: prometheus.NewRegistry(), perWS: prometheus.NewRegistry()}
	m.checkpoints = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cairn_checkpoints_total",
		Help: "Checkpoints sealed (and seals failed), adopted from the runtime or taken before a restore, by kind and state."},
		[]string{"kind", "state"})
	m.sealSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "cairn_seal_duration_seconds",
		Help: "How long a seal took, from staging to the ledger record (seals that found nothing to save are not counted).", Buckets: sealBuckets})
	m.markerSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "cairn_marker_to_sealed_seconds",
		Help: "From the runtime writing a lifecycle marker (state.json's mtime) to its checkpoint sealed.", Buckets: sealBuckets})
	m.restores = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cairn_restores_total",
		Help: "Restores, undos and rollbacks (not dry runs), by kind and result (refused: the target or the workspace's state refused it, nothing changed)."},
		[]string{"kind", "result"})
	m.restoreSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "cairn_restore_duration_seconds",
		Help: "How long a restore, undo or rollback that ran took (refusals are not counted).", Buckets: restoreBuckets}, []string{"kind"})
	m.overflows = prometheus.NewCounter(prometheus.CounterOpts{Name: "cairn_watch_overflows_total",
		Help: "Times a watch lost events (inotify's queue or cairn's overflowed), each answered by a full reconcile."})
	m.maintenance = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cairn_maintenance_runs_total",
		Help: "Store maintenance runs, by result."}, []string{"result"})
	m.replPushes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cairn_replication_pushes_total",
		Help: "Pushes to the fleet remote, as status counts them: ok, git pushes that succeeded; failed, attempts that failed (each retried with backoff)."},
		[]string{"result"})
	for _, k := range ckpt.Kinds {
		for _, s := range sealStates {
			m.checkpoints.WithLabelValues(string(k), string(s))
		}
	}
	for _, k := range restoreKinds {
		m.restoreSeconds.WithLabelValues(k)
		for _, r := range restoreResults {
			m.restores.WithLabelValues(k, r)
		}
	}
	for _, r := range maintResults {
		m.maintenance.WithLabelValues(r)
	}
	for _, r := range replResults {
		m.replPushes.WithLabelValues(r)
	}
	m.reg.MustRegister(m.checkpoints, m.sealSeconds, m.markerSeconds, m.restores, m.restoreSeconds, m.overflows,
		m.maintenance, m.replPushes, totalsCollector{d})
	m.perWS.MustRegister(workspaceCollector{d})
	if !d.opts.Worker {
		// A worker's own process is no one's concern but its supervisor's.
		m.scrapeErrors = prometheus.NewCounter(prometheus.CounterOpts{Name: "cairn_worker_scrape_errors_total",
			Help: "Scrapes in which a worker did not answer; its counts are missing from that scrape."})
		m.workerDrops = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cairn_worker_replies_dropped_total",
			Help: "What the supervisor refused from its workers, by kind: status (rows, or whole replies), event, metric (series), log (lines). See docs/worker-protocol.md."},
			[]string{"kind"})
		for _, k := range workerproto.DropKinds {
			m.workerDrops.WithLabelValues(k)
		}
		m.reg.MustRegister(m.scrapeErrors, m.workerDrops, collectors.NewGoCollector(),
			collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	return m
}

// The hooks below are where seals, restores and maintenance runs end. A nil
// *metrics (a workspace made outside a daemon) counts nothing.

// Sealed counts a seal that made a record or failed.
func (m *metrics) Sealed(kind ckpt.Kind, rec ckpt.Record, err error, took time.Duration) {
	if m == nil || (err == nil && rec.ID == "") {
		return // nothing changed: no checkpoint
	}
	state := rec.State
	if err != nil {
		state = ckpt.StateFailed
	}
	m.checkpoints.WithLabelValues(string(kind), string(state)).Inc()
	m.sealSeconds.Observe(took.Seconds())
}

// Checkpoint counts a record not sealed by the workspace's seal: adopted
// from the runtime, or made before a restore.
func (m *metrics) Checkpoint(rec ckpt.Record) {
	if m != nil {
		m.checkpoints.WithLabelValues(string(rec.Kind), string(rec.State)).Inc()
	}
}

// MarkerSealed observes the latency of a lifecycle checkpoint written at marked.
func (m *metrics) MarkerSealed(marked time.Time) {
	if m != nil {
		m.markerSeconds.Observe(max(time.Since(marked), 0).Seconds())
	}
}

// Restored counts one restore, undo or rollback (cmdType as restoreOn has it).
func (m *metrics) Restored(cmdType string, took time.Duration, res api.RestoreResult, err error) {
	if m == nil {
		return
	}
	kind := cmdType
	if strings.HasPrefix(cmdType, "rollback.") {
		kind = "rollback"
	}
	result := "ok"
	if err != nil {
		result = "failed"
		if class, _ := workspace.Classify(err, ""); class.Refusal() {
			result = "refused"
		}
	}
	m.restores.WithLabelValues(kind, result).Inc()
	if result != "refused" {
		m.restoreSeconds.WithLabelValues(kind).Observe(took.Seconds())
	}
	if res.PreRestore != nil {
		m.Checkpoint(*res.PreRestore)
	}
}

// Maintained counts one maintenance run.
func (m *metrics) Maintained(err error, skipped string) {
	if m == nil {
		return
	}
	result := "ok"
	switch {
	case errors.Is(err, context.Canceled):
		result = "cancelled"
	case err != nil:
		result = "failed"
	case skipped != "":
		result = "skipped"
	}
	m.maintenance.WithLabelValues(result).Inc()
}

// Overflow counts a watch that lost events.
func (m *metrics) Overflow() {
	if m != nil {
		m.overflows.Inc()
	}
}

// Replicated counts the end of one replication attempt: the git pushes that
// succeeded in it, and whether it failed.
func (m *metrics) Replicated(pushes int, failed bool) {
	if m == nil {
		return
	}
	m.replPushes.WithLabelValues("ok").Add(float64(pushes))
	if failed {
		m.replPushes.WithLabelValues("failed").Inc()
	}
}

// Gauges read at scrape time.
var (
	descWorkspaces     = prometheus.NewDesc("cairn_workspaces", "Workspaces served, by state.", []string{"state"}, nil)
	descPending        = prometheus.NewDesc("cairn_dirty_paths_pending", "Changed paths seen by the watch and not sealed yet.", nil, nil)
	descWatches        = prometheus.NewDesc("cairn_inotify_watches", "Folders watched, one inotify watch each.", nil, nil)
	descWatchLimit     = prometheus.NewDesc("cairn_inotify_max_user_watches", "The inotify watch limit of each user (fs.inotify.max_user_watches).", nil, nil)
	descStoreBytes     = prometheus.NewDesc("cairn_store_bytes", "Bytes the stores take on disk, as last measured (at open and after maintenance).", nil, nil)
	descLoose          = prometheus.NewDesc("cairn_store_loose_objects", "Loose objects in the stores, as last measured.", nil, nil)
	descKept           = prometheus.NewDesc("cairn_checkpoints_kept", "Checkpoints the stores keep (usable ledger records).", nil, nil)
	descProtectedOver  = prometheus.NewDesc("cairn_workspaces_protected_over_budget", "Workspaces whose protected checkpoints alone are over their size budget.", nil, nil)
	descAutosavePaused = prometheus.NewDesc("cairn_workspaces_autosave_paused", "Workspaces whose autosaves are paused: the disk is under disk_floor.", nil, nil)
	descEventsDropped  = prometheus.NewDesc("cairn_event_clients_dropped_total", "Clients of /v1/events dropped for reading too slowly.", nil, nil)
	descWorkers        = prometheus.NewDesc("cairn_workers", "Worker processes (a root daemon's, one per workspace owner), by state.", []string{"state"}, nil)
	descBuildInfo      = prometheus.NewDesc("cairn_build_info", "The daemon's version and the Go it was built with; always 1.", []string{"version", "goversion"}, nil)
	descReplWorkspaces = prometheus.NewDesc("cairn_replication_workspaces",
		"Workspaces that replicate to a fleet remote, by replication state (off: refused by its configuration, nothing is pushed).", []string{"state"}, nil)
	descReplLag = prometheus.NewDesc("cairn_replication_lag_checkpoints",
		"Checkpoints sealed and not yet pushed to the fleet remote, over all workspaces.", nil, nil)
	// A largest value, not a total: the root supervisor takes the largest
	// of its workers' (maxFamilies), never their sum.
	descReplLagSeconds = prometheus.NewDesc("cairn_replication_lag_seconds",
		"Age of the oldest checkpoint not yet pushed to the fleet remote, over all workspaces (0: none waits).", nil, nil)

	descWSState   = prometheus.NewDesc("cairn_workspace_state", "The workspace's state; always 1.", []string{"workspace", "state"}, nil)
	descWSPending = prometheus.NewDesc("cairn_workspace_dirty_paths_pending", "The workspace's changed paths not sealed yet.", []string{"workspace"}, nil)
	descWSWatches = prometheus.NewDesc("cairn_workspace_inotify_watches", "The workspace's folders watched.", []string{"workspace"}, nil)
	descWSBytes   = prometheus.NewDesc("cairn_workspace_store_bytes", "Bytes the workspace's store takes on disk, as last measured.", []string{"workspace"}, nil)
	descWSLoose   = prometheus.NewDesc("cairn_workspace_store_loose_objects", "Loose objects in the workspace's store, as last measured.", []string{"workspace"}, nil)
	descWSKept    = prometheus.NewDesc("cairn_workspace_checkpoints_kept", "Checkpoints the workspace's store keeps.", []string{"workspace"}, nil)
	descWSSeals   = prometheus.NewDesc("cairn_workspace_seals_total", "Checkpoints sealed since the workspace was last (re)started.", []string{"workspace"}, nil)
	descWSFails   = prometheus.NewDesc("cairn_workspace_seal_failures_total", "Seals failed since the workspace was last (re)started.", []string{"workspace"}, nil)
	descWSReplLag = prometheus.NewDesc("cairn_workspace_replication_lag_checkpoints", "The workspace's checkpoints not yet pushed to its fleet remote.", []string{"workspace"}, nil)
)

// servedStatus is the status of every workspace this process serves.
func (d *Daemon) servedStatus() []api.WorkspaceStatus {
	d.mu.Lock()
	wss := slices.Collect(maps.Values(d.workspaces))
	d.mu.Unlock()
	out := make([]api.WorkspaceStatus, 0, len(wss))
	for _, ws := range wss {
		out = append(out, ws.Status())
	}
	return out
}

// totalsCollector reads the daemon's state at scrape time: totals only.
type totalsCollector struct{ d *Daemon }

// Describe sends nothing: the collector is unchecked (its series vary).
func (totalsCollector) Describe(chan<- *prometheus.Desc) {}

func (c totalsCollector) Collect(ch chan<- prometheus.Metric) {
	d := c.d
	states := map[string]int{}
	for _, s := range workspaceStates {
		states[s] = 0
	}
	var pending, watches, bytes, loose, kept, over, paused, replLag int64
	byRepl := map[string]int{}
	for _, s := range replStates {
		byRepl[s] = 0
	}
	var replLagSeconds float64
	now := time.Now()
	for _, s := range d.servedStatus() {
		states[s.State]++
		pending += int64(s.Pending)
		watches += int64(s.Watches)
		bytes += s.StoreBytes
		loose += s.LooseObjects
		kept += int64(s.Kept)
		if s.Budget != nil && s.Budget.ProtectedOver != "" {
			over++
		}
		if s.AutosavePaused != "" {
			paused++
		}
		if r := s.Replication; r != nil {
			byRepl[r.State]++
			replLag += int64(r.LagCheckpoints)
			if r.LagCheckpoints > 0 && !r.OldestUnpushed.IsZero() {
				replLagSeconds = max(replLagSeconds, now.Sub(r.OldestUnpushed).Seconds())
			}
		}
	}
	for s, n := range byRepl {
		ch <- prometheus.MustNewConstMetric(descReplWorkspaces, prometheus.GaugeValue, float64(n), s)
	}
	ch <- prometheus.MustNewConstMetric(descReplLagSeconds, prometheus.GaugeValue, replLagSeconds)
	for s, n := range states {
		ch <- prometheus.MustNewConstMetric(descWorkspaces, prometheus.GaugeValue, float64(n), s)
	}
	gauge := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v))
	}
	gauge(descPending, pending)
	gauge(descWatches, watches)
	gauge(descStoreBytes, bytes)
	gauge(descLoose, loose)
	gauge(descKept, kept)
	gauge(descProtectedOver, over)
	gauge(descAutosavePaused, paused)
	gauge(descReplLag, replLag)
	ch <- prometheus.MustNewConstMetric(descEventsDropped, prometheus.CounterValue, float64(d.bus.dropped.Load()))
	if d.opts.Worker {
		return // the rest is the supervisor's to say, once
	}
	if n, ok := maxUserWatches(); ok {
		gauge(descWatchLimit, n)
	}
	ch <- prometheus.MustNewConstMetric(descBuildInfo, prometheus.GaugeValue, 1, d.opts.Version, runtime.Version())
	d.mu.Lock()
	workers := slices.Collect(maps.Values(d.workers))
	d.mu.Unlock()
	if platform.SelfUID() != 0 {
		return // only a root daemon has workers
	}
	byState := map[string]int{}
	for _, s := range workerStates {
		byState[s] = 0
	}
	for _, wk := range workers {
		byState[wk.snapshot().State]++
	}
	for s, n := range byState {
		ch <- prometheus.MustNewConstMetric(descWorkers, prometheus.GaugeValue, float64(n), s)
	}
}

// maxUserWatches reads the inotify watch limit (Linux only).
func maxUserWatches() (int64, bool) {
	b, err := os.ReadFile("/proc/sys/fs/inotify/max_user_watches")
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n, err == nil
}

// workspaceCollector is the per-workspace series (per_workspace_metrics).
type workspaceCollector struct{ d *Daemon }

func (workspaceCollector) Describe(chan<- *prometheus.Desc) {}

func (c workspaceCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.d.servedStatus() {
		collectWorkspace(ch, s)
	}
}

// collectWorkspace sends the series of one workspace.
func collectWorkspace(ch chan<- prometheus.Metric, s api.WorkspaceStatus) {
	g := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), s.Dir)
	}
	ch <- prometheus.MustNewConstMetric(descWSState, prometheus.GaugeValue, 1, s.Dir, s.State)
	g(descWSPending, int64(s.Pending))
	g(descWSWatches, int64(s.Watches))
	g(descWSBytes, s.StoreBytes)
	g(descWSLoose, s.LooseObjects)
	g(descWSKept, int64(s.Kept))
	ch <- prometheus.MustNewConstMetric(descWSSeals, prometheus.CounterValue, float64(s.Seals), s.Dir)
	ch <- prometheus.MustNewConstMetric(descWSFails, prometheus.CounterValue, float64(s.Failures), s.Dir)
	if s.Replication != nil {
		g(descWSReplLag, int64(s.Replication.LagCheckpoints))
	}
}

// gatherMetrics is this process's metrics plus, in a root daemon, what its
// workers count; a worker that does not answer in time is left out and
// its workspaces counted as failed, as status shows them.
func (d *Daemon) gatherMetrics(ctx context.Context, perWS bool, visible func(string) bool) ([]*dto.MetricFamily, error) {
	d.mu.Lock()
	workers := slices.Collect(maps.Values(d.workers))
	d.mu.Unlock()
	got := make([][]*dto.MetricFamily, len(workers))
	missing := make([]int, len(workers))
	var wg sync.WaitGroup
	for i, wk := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fams, err := wk.metrics(ctx, perWS)
			if err != nil {
				wk.log.Debug().Err(err).Msg("worker did not answer a metrics scrape")
				missing[i] = len(wk.dirs())
				d.met.scrapeErrors.Inc()
				return
			}
			got[i] = fams
		}()
	}
	wg.Wait()
	gs := prometheus.Gatherers{d.met.reg}
	if perWS {
		gs = append(gs, d.met.perWS)
	}
	fams, err := gs.Gather()
	// Each worker's series are checked against the supervisor's own
	// families before any is added to them (package workerproto).
	rules := workerproto.NewSeriesRules(fams, perWorkspaceFamilies())
	for i, wk := range workers {
		if got[i] == nil {
			continue
		}
		var n int
		var why string
		got[i], n, why = rules.Check(got[i], wk.assigned)
		wk.drop(workerproto.DropMetric, n, why)
	}
	fams = mergeFamilies(fams, got...)
	for _, n := range missing {
		addGauge(fams, "cairn_workspaces", "state", workspace.StateFailed, float64(n))
	}
	if perWS {
		fams = onlyVisible(fams, visible)
	}
	return fams, err
}

// metrics scrapes the worker's own registry (cairn_ families only).
func (wk *worker) metrics(ctx context.Context, perWS bool) ([]*dto.MetricFamily, error) {
	rctx, cancel := context.WithTimeout(ctx, workerMetricsTimeout)
	defer cancel()
	fams, n, why, err := wk.client.Metrics(rctx, perWS, wk.nAssigned())
	wk.drop(workerproto.DropMetric, n, why)
	return fams, err
}

// maxFamilies are the gauges that hold a largest value, not a total: merged,
// the largest value of any process is kept. Summed, two workers each 60 s
// behind would read as one 120 s behind.
var maxFamilies = map[string]bool{"cairn_replication_lag_seconds": true}

// mergeFamilies adds the families of more into base: a family new by name
// is taken whole; a sample whose labels match one already there adds its
// value to it (counters, gauges and histogram buckets, sums and counts are
// all totals over processes here), or in maxFamilies keeps the larger. A
// family whose type differs is dropped.
func mergeFamilies(base []*dto.MetricFamily, more ...[]*dto.MetricFamily) []*dto.MetricFamily {
	byName := map[string]*dto.MetricFamily{}
	for _, f := range base {
		byName[f.GetName()] = f
	}
	for _, fams := range more {
		for _, f := range fams {
			have, ok := byName[f.GetName()]
			if !ok {
				byName[f.GetName()] = f
				continue
			}
			if have.GetType() != f.GetType() {
				continue
			}
			idx := map[string]*dto.Metric{}
			for _, m := range have.Metric {
				idx[workerproto.LabelKey(m)] = m
			}
			for _, m := range f.Metric {
				if into, ok := idx[workerproto.LabelKey(m)]; ok {
					if maxFamilies[f.GetName()] && into.Gauge != nil && m.Gauge != nil {
						into.Gauge.Value = dtoPtr(max(into.Gauge.GetValue(), m.Gauge.GetValue()))
						continue
					}
					addMetric(into, m)
					continue
				}
				have.Metric = append(have.Metric, m)
				idx[workerproto.LabelKey(m)] = m
			}
		}
	}
	out := slices.SortedFunc(maps.Values(byName), func(a, b *dto.MetricFamily) int {
		return strings.Compare(a.GetName(), b.GetName())
	})
	for _, f := range out {
		slices.SortFunc(f.Metric, func(a, b *dto.Metric) int { return strings.Compare(workerproto.LabelKey(a), workerproto.LabelKey(b)) })
	}
	return out
}

// addMetric adds m's value to into's. A sum over processes has no single
// creation time: it is dropped.
func addMetric(into, m *dto.Metric) {
	switch {
	case into.Counter != nil && m.Counter != nil:
		into.Counter.Value = dtoPtr(into.Counter.GetValue() + m.Counter.GetValue())
		into.Counter.CreatedTimestamp = nil
	case into.Gauge != nil && m.Gauge != nil:
		into.Gauge.Value = dtoPtr(into.Gauge.GetValue() + m.Gauge.GetValue())
	case into.Untyped != nil && m.Untyped != nil:
		into.Untyped.Value = dtoPtr(into.Untyped.GetValue() + m.Untyped.GetValue())
	case into.Histogram != nil && m.Histogram != nil:
		h, o := into.Histogram, m.Histogram
		if len(h.Bucket) != len(o.Bucket) {
			return // other buckets (another build): not addable
		}
		for i, b := range h.Bucket {
			if b.GetUpperBound() != o.Bucket[i].GetUpperBound() {
				return
			}
		}
		for i, b := range h.Bucket {
			b.CumulativeCount = dtoPtr(b.GetCumulativeCount() + o.Bucket[i].GetCumulativeCount())
		}
		h.SampleCount = dtoPtr(h.GetSampleCount() + o.GetSampleCount())
		h.SampleSum = dtoPtr(h.GetSampleSum() + o.GetSampleSum())
		h.CreatedTimestamp = nil
	}
}

func dtoPtr[T any](v T) *T { return &v }

// addGauge adds v to the gauge of family name whose label is value.
func addGauge(fams []*dto.MetricFamily, name, label, value string, v float64) {
	if v == 0 {
		return
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.Metric {
			for _, lp := range m.Label {
				if lp.GetName() == label && lp.GetValue() == value && m.Gauge != nil {
					m.Gauge.Value = dtoPtr(m.Gauge.GetValue() + v)
					return
				}
			}
		}
	}
}

// onlyVisible drops the series of workspaces visible says no to.
func onlyVisible(fams []*dto.MetricFamily, visible func(string) bool) []*dto.MetricFamily {
	out := fams[:0]
	for _, f := range fams {
		f.Metric = slices.DeleteFunc(f.Metric, func(m *dto.Metric) bool {
			for _, lp := range m.Label {
				if lp.GetName() == "workspace" {
					return !visible(lp.GetValue())
				}
			}
			return false
		})
		if len(f.Metric) > 0 {
			out = append(out, f)
		}
	}
	return out
}
