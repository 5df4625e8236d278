package agent

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"

	"github.com/cairn-dev/cairn/agent/api"
)

// The supervisor trusts nothing a worker says (docs/worker-protocol.md): its
// log lines, status rows, events and metric series are bounded per worker,
// and what names a workspace not assigned to it, or a negative count, is
// dropped and counted (status shows the counts to root; the metric
// cairn_worker_replies_dropped_total counts them by kind).

// Bounds on what one worker may send its supervisor.
const (
	maxWorkerStatus      = 4 << 20   // a status reply...
	maxWorkerStatusPerWS = 256 << 10 // ...or this much a workspace assigned, if more
	maxWorkerEvent       = 64 << 10  // one event (a line of the event stream)
	workerEventRate      = 200       // events a second, per worker...
	workerEventBurst     = 1000      // ...with bursts up to this many
	maxWorkerMetrics     = 4 << 20   // a metrics reply...
	maxWorkerMetricsPerW = 4 << 10   // ...plus this much a workspace assigned
	maxWorkerSeries      = 1000      // series in a metrics reply...
	workerSeriesPerWS    = 16        // ...plus this many a workspace assigned
	maxWorkerLogLine     = 16 << 10  // one log line; the rest of a longer one is cut
	workerLogRate        = 200       // log lines a second, per worker...
	workerLogBurst       = 2000      // ...with bursts up to this many
	workerLogBytesRate   = 256 << 10 // log bytes a second, per worker...
	workerLogBytesBurst  = 2 << 20   // ...with bursts up to this many
)

// Kinds of what is dropped from a worker (api.WorkerStatus.Dropped, and
// the label of cairn_worker_replies_dropped_total).
const (
	dropStatus = "status" // a status row, or a whole status reply
	dropEvent  = "event"
	dropMetric = "metric" // a metric series
	dropLog    = "log"    // a log line
)

var dropKinds = []string{dropStatus, dropEvent, dropMetric, dropLog}

// dropLogEvery is how often a worker's drops are logged at most.
const dropLogEvery = 10 * time.Second

// drop counts n things of kind refused from the worker, why, in its status
// and the supervisor's metrics, and logs it (at most every dropLogEvery).
func (wk *worker) drop(kind string, n int, why string) {
	if n <= 0 {
		return
	}
	wk.mu.Lock()
	if wk.dropped == nil {
		wk.dropped = map[string]int64{}
	}
	wk.dropped[kind] += int64(n)
	wk.dropWhy = why
	logNow := time.Since(wk.dropLogged) >= dropLogEvery
	if logNow {
		wk.dropLogged = time.Now()
	}
	counts := fmt.Sprint(wk.dropped)
	wk.mu.Unlock()
	if m := wk.d.met; m != nil && m.workerDrops != nil {
		m.workerDrops.WithLabelValues(kind).Add(float64(n))
	}
	if logNow {
		wk.log.Warn().Str("kind", kind).Str("why", why).Str("dropped_so_far", counts).Msg("refused what a worker sent")
	}
}

// assigned answers whether dir is one of the worker's workspaces.
func (wk *worker) assigned(dir string) bool {
	wk.mu.Lock()
	defer wk.mu.Unlock()
	_, ok := wk.want[dir]
	return ok
}

// nAssigned is how many workspaces the worker serves.
func (wk *worker) nAssigned() int {
	wk.mu.Lock()
	defer wk.mu.Unlock()
	return len(wk.want)
}

// bucket is a token bucket: rate a second, up to burst at once. Not safe
// for concurrent use: each reader of a worker's stream has its own.
type bucket struct {
	rate, burst float64
	tokens      float64
	last        time.Time
}

// allow takes n tokens if there are that many.
func (b *bucket) allow(now time.Time, n float64) bool {
	if b.last.IsZero() {
		b.tokens = b.burst
	} else {
		b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	}
	b.last = now
	if b.tokens < n {
		return false
	}
	b.tokens -= n
	return true
}

// readLine reads one line (its newline left off) and keeps at most max
// bytes of it: the rest of a longer line is read and thrown away, and
// counted in cut. Memory stays bounded whatever the worker writes.
func readLine(br *bufio.Reader, max int) (line []byte, cut int, err error) {
	for {
		frag, err := br.ReadSlice('\n')
		if err == nil {
			frag = frag[:len(frag)-1]
		}
		take := min(max-len(line), len(frag))
		line = append(line, frag[:take]...)
		cut += len(frag) - take
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, cut, err
		}
	}
}

// pumpLog reads the worker's stdout and stderr (one pipe) until it closes,
// and logs each line as the supervisor's, tagged with the worker's uid and
// nested in a field: nothing a worker writes passes as a line of root's.
func (wk *worker) pumpLog(r io.Reader) {
	br := bufio.NewReaderSize(r, 64<<10)
	lines := bucket{rate: workerLogRate, burst: workerLogBurst}
	size := bucket{rate: workerLogBytesRate, burst: workerLogBytesBurst}
	for {
		line, cut, err := readLine(br, maxWorkerLogLine)
		if len(line)+cut > 0 {
			now := time.Now()
			if lines.allow(now, 1) && size.allow(now, float64(len(line))) {
				wk.relayLog(line, cut)
			} else {
				wk.drop(dropLog, 1, "log lines over 200 a second (or 256 KiB a second)")
			}
		}
		if err != nil {
			return
		}
	}
}

// relayLog logs one line of the worker's. A JSON object (a worker logs
// those) is nested whole under "worker", at its level if it is a plain one;
// anything else is a string field.
func (wk *worker) relayLog(line []byte, cut int) {
	lvl := zerolog.InfoLevel
	if cut == 0 && len(line) > 0 && line[0] == '{' && json.Valid(line) {
		var head struct {
			Level string `json:"level"`
		}
		_ = json.Unmarshal(line, &head)
		switch l, err := zerolog.ParseLevel(head.Level); {
		case err != nil:
		case l == zerolog.TraceLevel, l == zerolog.DebugLevel, l == zerolog.WarnLevel, l == zerolog.ErrorLevel:
			lvl = l
		}
		wk.log.WithLevel(lvl).RawJSON("worker", line).Msg("worker log")
		return
	}
	ev := wk.log.WithLevel(lvl).Str("worker_text", string(line))
	if cut > 0 {
		ev = ev.Int("cut_bytes", cut)
	}
	ev.Msg("worker log")
}

// maxStatusReply is the largest status reply taken from a worker serving n workspaces.
func maxStatusReply(n int) int64 {
	return max(maxWorkerStatus, int64(n)*maxWorkerStatusPerWS)
}

// readWorkerStatus reads a worker's status reply, at most limit bytes: a
// larger one is refused whole.
func readWorkerStatus(body io.Reader, limit int64) ([]api.WorkspaceStatus, error) {
	b, err := io.ReadAll(io.LimitReader(body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("worker status: %w", err)
	}
	if int64(len(b)) > limit {
		return nil, &replyTooBig{what: "status reply", limit: limit}
	}
	var st struct {
		Workspaces []api.WorkspaceStatus `json:"workspaces"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("worker status: %w", err)
	}
	return st.Workspaces, nil
}

// replyTooBig is a worker's reply over its bound, refused whole.
type replyTooBig struct {
	what  string
	limit int64
}

func (e *replyTooBig) Error() string {
	return fmt.Sprintf("worker's %s is over %d bytes; refused", e.what, e.limit)
}

// checkStatusRows keeps the rows of a worker's status that name a
// workspace assigned to it, once each, in a known state with no negative
// count. It says why it dropped each other row; refused names the assigned
// workspaces whose row was refused (status shows them failed).
func checkStatusRows(rows []api.WorkspaceStatus, assigned func(string) bool) (kept []api.WorkspaceStatus, refused map[string]string, dropped []string) {
	seen := map[string]bool{}
	for _, r := range rows {
		why := ""
		switch {
		case !assigned(r.Dir):
			why = fmt.Sprintf("status row for %q, not a workspace of this worker", r.Dir)
		case seen[r.Dir]:
			why = fmt.Sprintf("a second status row for %q", r.Dir)
		case !slices.Contains(workspaceStates, r.State):
			why = fmt.Sprintf("status row for %q in an unknown state %q", r.Dir, r.State)
		case negativeCount(r):
			why = fmt.Sprintf("status row for %q with a negative count", r.Dir)
		}
		if why == "" {
			seen[r.Dir] = true
			kept = append(kept, r)
			continue
		}
		dropped = append(dropped, why)
		if assigned(r.Dir) && !seen[r.Dir] {
			if refused == nil {
				refused = map[string]string{}
			}
			refused[r.Dir] = why
		}
	}
	for dir := range refused {
		if seen[dir] {
			delete(refused, dir) // a good row came after the bad one
		}
	}
	return kept, refused, dropped
}

// negativeCount answers whether a status row has a count below zero.
func negativeCount(r api.WorkspaceStatus) bool {
	if min(r.Watches, r.Pending, r.Seals, r.Failures, r.Unwatched, r.Kept) < 0 || min(r.StoreBytes, r.LooseObjects) < 0 {
		return true
	}
	return r.Replication != nil && r.Replication.LagCheckpoints < 0
}

// workerEventTypes are the events a worker publishes.
var workerEventTypes = []string{api.EvCheckpointSealed, api.EvRollbackStarted, api.EvRollbackProgress,
	api.EvRollbackCompleted, api.EvRollbackArchiveRestore, api.EvError}

// checkWorkerEvent decodes one line of a worker's event stream (cut: bytes
// past maxWorkerEvent) and says why it is refused, "" if it is not. An
// event naming no workspace (the worker's own note to the supervisor) is
// neither: it comes back with an empty Workspace and is not relayed.
func checkWorkerEvent(line []byte, cut int, assigned func(string) bool) (api.Event, string) {
	var ev api.Event
	switch {
	case cut > 0:
		return ev, fmt.Sprintf("an event over %d bytes", maxWorkerEvent)
	case json.Unmarshal(line, &ev) != nil:
		return api.Event{}, "an event that is not valid JSON"
	case ev.Workspace == "":
		return ev, ""
	case !assigned(ev.Workspace):
		return ev, fmt.Sprintf("event for %q, not a workspace of this worker", ev.Workspace)
	case !slices.Contains(workerEventTypes, ev.Type):
		return ev, fmt.Sprintf("event of unknown type %q", ev.Type)
	}
	return ev, ""
}

// Families only the supervisor reports, never summed from a worker.
var supervisorOnly = map[string]bool{"cairn_build_info": true, "cairn_inotify_max_user_watches": true,
	"cairn_workers": true, "cairn_worker_scrape_errors_total": true, "cairn_worker_replies_dropped_total": true}

// perWorkspaceFamilies are the families of per-workspace series, as this
// build makes them (name, help, type, label names), read from the collector
// itself.
var perWorkspaceFamilies = sync.OnceValue(func() map[string]*dto.MetricFamily {
	reg := prometheus.NewRegistry()
	reg.MustRegister(sampleWorkspace{})
	fams, _ := reg.Gather()
	out := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
})

// sampleWorkspace emits one series of every per-workspace family.
type sampleWorkspace struct{}

func (sampleWorkspace) Describe(chan<- *prometheus.Desc) {}

func (sampleWorkspace) Collect(ch chan<- prometheus.Metric) {
	collectWorkspace(ch, api.WorkspaceStatus{Dir: "/sample", State: stateWatching, Replication: &api.ReplicationStatus{}})
}

// seriesRules check a worker's metric series against the supervisor's own
// families: a series of a family the supervisor has must have a label set
// it has (every label value is counted from zero, so a worker has no other);
// a per-workspace series must name a workspace of the worker's.
type seriesRules map[string]familyRule

type familyRule struct {
	typ  dto.MetricType
	keys map[string]bool // label sets, by labelKey
}

// newSeriesRules reads the rules from the supervisor's own families.
func newSeriesRules(base []*dto.MetricFamily) seriesRules {
	r := seriesRules{}
	for _, f := range base {
		if supervisorOnly[f.GetName()] || perWorkspaceFamilies()[f.GetName()] != nil {
			continue
		}
		fr := familyRule{typ: f.GetType(), keys: map[string]bool{}}
		for _, m := range f.Metric {
			fr.keys[labelKey(m)] = true
		}
		r[f.GetName()] = fr
	}
	return r
}

// check keeps the worker's series that pass the rules, once each, with no
// negative or non-finite value, exemplars and timestamps left off; it
// counts the others and says why it dropped the last.
func (r seriesRules) check(fams []*dto.MetricFamily, assigned func(string) bool) (kept []*dto.MetricFamily, dropped int, why string) {
	for _, f := range fams {
		name := f.GetName()
		ws := perWorkspaceFamilies()[name]
		rule, known := r[name]
		if ws == nil && !known {
			dropped += len(f.Metric)
			why = fmt.Sprintf("series of family %q, which a worker does not report", name)
			continue
		}
		typ := rule.typ
		if ws != nil {
			typ = ws.GetType()
		}
		if f.GetType() != typ {
			dropped += len(f.Metric)
			why = fmt.Sprintf("family %q of the wrong type", name)
			continue
		}
		seen := map[string]bool{}
		var ok []*dto.Metric
		for _, m := range f.Metric {
			key := labelKey(m)
			bad := ""
			switch {
			case seen[key]:
				bad = fmt.Sprintf("a second series of %s with the same labels", name)
			case ws != nil:
				bad = workspaceSeries(ws, m, assigned)
			case !rule.keys[key]:
				bad = fmt.Sprintf("series of %s with labels the supervisor does not have", name)
			}
			if bad == "" && !soundValue(m, typ) {
				bad = fmt.Sprintf("series of %s with a negative, non-finite or malformed value", name)
			}
			if bad != "" {
				dropped++
				why = bad
				continue
			}
			seen[key] = true
			m.TimestampMs = nil
			dropExemplars(m)
			ok = append(ok, m)
		}
		if len(ok) == 0 {
			continue
		}
		out := &dto.MetricFamily{Name: f.Name, Type: f.Type, Help: f.Help, Metric: ok}
		if ws != nil {
			out.Help = ws.Help // the help text is the supervisor's, never the worker's
		}
		kept = append(kept, out)
	}
	return kept, dropped, why
}

// workspaceSeries says why a per-workspace series is refused, "" if it is
// not: its label names must be the family's, its workspace the worker's,
// its state a known one.
func workspaceSeries(fam *dto.MetricFamily, m *dto.Metric, assigned func(string) bool) string {
	want := fam.Metric[0].Label
	if len(m.Label) != len(want) {
		return fmt.Sprintf("series of %s with other labels", fam.GetName())
	}
	for i, lp := range m.Label {
		if lp.GetName() != want[i].GetName() {
			return fmt.Sprintf("series of %s with other labels", fam.GetName())
		}
		switch lp.GetName() {
		case "workspace":
			if !assigned(lp.GetValue()) {
				return fmt.Sprintf("series for %q, not a workspace of this worker", lp.GetValue())
			}
		case "state":
			if !slices.Contains(workspaceStates, lp.GetValue()) {
				return fmt.Sprintf("series of %s in an unknown state %q", fam.GetName(), lp.GetValue())
			}
		}
	}
	return ""
}

// soundValue answers whether m holds one finite, non-negative value of the
// family's type (every cairn series counts something: none is negative).
func soundValue(m *dto.Metric, typ dto.MetricType) bool {
	good := func(v float64) bool { return v >= 0 && !math.IsInf(v, 0) } // NaN fails v >= 0
	switch {
	case typ == dto.MetricType_COUNTER && m.Counter != nil && m.Gauge == nil && m.Histogram == nil:
		return good(m.Counter.GetValue())
	case typ == dto.MetricType_GAUGE && m.Gauge != nil && m.Counter == nil && m.Histogram == nil:
		return good(m.Gauge.GetValue())
	case typ == dto.MetricType_HISTOGRAM && m.Histogram != nil && m.Counter == nil && m.Gauge == nil:
		h := m.Histogram
		if !good(h.GetSampleSum()) || len(h.PositiveSpan)+len(h.NegativeSpan) > 0 {
			return false
		}
		prev := uint64(0)
		for _, b := range h.Bucket {
			if b.GetCumulativeCount() < prev || b.GetCumulativeCount() > h.GetSampleCount() {
				return false
			}
			prev = b.GetCumulativeCount()
		}
		return true
	}
	return false
}

func dropExemplars(m *dto.Metric) {
	if m.Counter != nil {
		m.Counter.Exemplar = nil
	}
	if m.Histogram != nil {
		m.Histogram.Exemplars = nil
		for _, b := range m.Histogram.Bucket {
			b.Exemplar = nil
		}
	}
}
