package workerproto

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/cairn-dev/cairn/agent/api"
)

// NewBucket is a full bucket of burst tokens, refilled at rate a second.
func NewBucket(rate, burst float64) Bucket { return Bucket{rate: rate, burst: burst} }

// Bucket is a token bucket: rate a second, up to burst at once. Not safe
// for concurrent use: each reader of a worker's stream has its own.
type Bucket struct {
	rate, burst float64
	tokens      float64
	last        time.Time
}

// Allow takes n tokens if there are that many.
func (b *Bucket) Allow(now time.Time, n float64) bool {
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

// ReadLine reads one line (its newline left off) and keeps at most max
// bytes of it: the rest of a longer line is read and thrown away, and
// counted in cut. Memory stays bounded whatever the worker writes.
func ReadLine(br *bufio.Reader, max int) (line []byte, cut int, err error) {
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

// MaxStatusReply is the largest status reply taken from a worker serving n workspaces.
func MaxStatusReply(n int) int64 {
	return max(MaxStatus, int64(n)*MaxStatusPerWS)
}

// ReadStatus reads a worker's status reply, at most limit bytes: a
// larger one is refused whole.
func ReadStatus(body io.Reader, limit int64) ([]api.WorkspaceStatus, error) {
	b, err := io.ReadAll(io.LimitReader(body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("worker status: %w", err)
	}
	if int64(len(b)) > limit {
		return nil, &ReplyTooBig{What: "status reply", Limit: limit}
	}
	var st struct {
		Workspaces []api.WorkspaceStatus `json:"workspaces"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("worker status: %w", err)
	}
	return st.Workspaces, nil
}

// ReplyTooBig is a worker's reply over its bound, refused whole.
type ReplyTooBig struct {
	What  string // "status reply", "metrics reply"
	Limit int64  // its bound, in bytes
}

func (e *ReplyTooBig) Error() string {
	return fmt.Sprintf("worker's %s is over %d bytes; refused", e.What, e.Limit)
}

// CheckStatusRows keeps the rows of a worker's status that name a
// workspace assigned to it, once each, in a known state with no negative
// count. It says why it dropped each other row; refused names the assigned
// workspaces whose row was refused (status shows them failed).
func CheckStatusRows(rows []api.WorkspaceStatus, assigned func(string) bool) (kept []api.WorkspaceStatus, refused map[string]string, dropped []string) {
	seen := map[string]bool{}
	for _, r := range rows {
		why := ""
		switch {
		case !assigned(r.Dir):
			why = fmt.Sprintf("status row for %q, not a workspace of this worker", r.Dir)
		case seen[r.Dir]:
			why = fmt.Sprintf("a second status row for %q", r.Dir)
		case !slices.Contains(States, r.State):
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
	if r.Progress != nil && (min(r.Progress.Done, r.Progress.Total) < 0 || r.Progress.Bytes < 0) {
		return true
	}
	return r.Replication != nil && r.Replication.LagCheckpoints < 0
}

// CheckEvent decodes one line of a worker's event stream (cut: bytes
// past MaxEvent) and says why it is refused, "" if it is not. An
// event naming no workspace (the worker's own note to the supervisor) is
// neither: it comes back with an empty Workspace and is not relayed.
func CheckEvent(line []byte, cut int, assigned func(string) bool) (api.Event, string) {
	var ev api.Event
	switch {
	case cut > 0:
		return ev, fmt.Sprintf("an event over %d bytes", MaxEvent)
	case json.Unmarshal(line, &ev) != nil:
		return api.Event{}, "an event that is not valid JSON"
	case ev.Workspace == "":
		return ev, ""
	case !assigned(ev.Workspace):
		return ev, fmt.Sprintf("event for %q, not a workspace of this worker", ev.Workspace)
	case !slices.Contains(EventTypes, ev.Type):
		return ev, fmt.Sprintf("event of unknown type %q", ev.Type)
	}
	return ev, ""
}

// SeriesRules check a worker's metric series against the supervisor's own
// families: a series of a family the supervisor has must have a label set
// it has (every label value is counted from zero, so a worker has no other);
// a per-workspace series must name a workspace of the worker's.
type SeriesRules struct {
	fams  map[string]familyRule
	perWS map[string]*dto.MetricFamily // the per-workspace families, by name
}

type familyRule struct {
	typ  dto.MetricType
	keys map[string]bool // label sets, by LabelKey
}

// NewSeriesRules reads the rules from the supervisor's own families (base)
// and the per-workspace families as this build makes them (perWS, by name:
// name, help, type, label names).
func NewSeriesRules(base []*dto.MetricFamily, perWS map[string]*dto.MetricFamily) SeriesRules {
	r := SeriesRules{fams: map[string]familyRule{}, perWS: perWS}
	for _, f := range base {
		if SupervisorOnly[f.GetName()] || perWS[f.GetName()] != nil {
			continue
		}
		fr := familyRule{typ: f.GetType(), keys: map[string]bool{}}
		for _, m := range f.Metric {
			fr.keys[LabelKey(m)] = true
		}
		r.fams[f.GetName()] = fr
	}
	return r
}

// Check keeps the worker's series that pass the rules, once each, with no
// negative or non-finite value, exemplars and timestamps left off; it
// counts the others and says why it dropped the last.
func (r SeriesRules) Check(fams []*dto.MetricFamily, assigned func(string) bool) (kept []*dto.MetricFamily, dropped int, why string) {
	for _, f := range fams {
		name := f.GetName()
		ws := r.perWS[name]
		rule, known := r.fams[name]
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
			key := LabelKey(m)
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
			if !slices.Contains(States, lp.GetValue()) {
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

// MaxMetricsReply is the largest metrics reply taken from a worker serving
// n workspaces, in bytes and in series.
func MaxMetricsReply(n int) (bytes int64, series int) {
	return int64(MaxMetrics + n*MaxMetricsPerWS), MaxSeries + n*SeriesPerWS
}

// ReadMetrics decodes a worker's metrics reply (format: its content type's),
// bounded for a worker serving n workspaces, keeping the cairn_ families. A
// reply over its bound is refused whole: dropped series are counted in
// dropped, why says why.
func ReadMetrics(body io.Reader, format expfmt.Format, n int) (fams []*dto.MetricFamily, dropped int, why string, err error) {
	limit, maxSeries := MaxMetricsReply(n)
	lr := &io.LimitedReader{R: body, N: limit + 1}
	dec := expfmt.NewDecoder(lr, format)
	series := 0
	for {
		mf := &dto.MetricFamily{}
		err := dec.Decode(mf)
		if lr.N <= 0 {
			return nil, max(series, 1), fmt.Sprintf("a metrics reply over %d bytes; refused", limit),
				&ReplyTooBig{What: "metrics reply", Limit: limit}
		}
		if errors.Is(err, io.EOF) {
			return fams, 0, "", nil
		} else if err != nil {
			return nil, 0, "", fmt.Errorf("worker metrics: %w", err)
		}
		if series += len(mf.Metric); series > maxSeries {
			return nil, series, fmt.Sprintf("a metrics reply of over %d series; refused", maxSeries),
				fmt.Errorf("worker metrics: over %d series; refused", maxSeries)
		}
		if strings.HasPrefix(mf.GetName(), "cairn_") {
			fams = append(fams, mf)
		}
	}
}

// LabelKey is a series' label set as one string, to compare and sort by.
func LabelKey(m *dto.Metric) string {
	var b strings.Builder
	for _, lp := range m.Label {
		b.WriteString(lp.GetName())
		b.WriteByte(0xff)
		b.WriteString(lp.GetValue())
		b.WriteByte(0xff)
	}
	return b.String()
}
