//go:build unix

package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/config"
	"github.com/cairn-dev/cairn/agent/workerproto"
	"github.com/cairn-dev/cairn/agent/workspace"
	"github.com/cairn-dev/cairn/platform/testsupport"
)

// Tests of what the supervisor takes from a worker, with the replies a
// worker would send were its user to answer in its place: a fake worker on
// the worker's socket, the supervisor's real client code against it.

const (
	ownWS     = "/srv/alice/ws"
	ownWS2    = "/srv/alice/ws2"
	foreignWS = "/srv/bob/ws" // another user's workspace, not this worker's
)

// fakeWorker is a supervisor with one worker (uid 4242, serving ownWS and
// ownWS2) whose socket h answers.
func fakeWorker(t *testing.T, h http.Handler) (*Daemon, *worker) {
	t.Helper()
	state := t.TempDir()
	d := New(nil, Options{StateDir: state}, zerolog.Nop())
	wk := d.newWorker(4242, 4242, state)
	wk.want = map[string]config.Settings{ownWS: {}, ownWS2: {}}
	d.mu.Lock()
	d.workers[wk.uid] = wk
	d.mu.Unlock()
	if err := os.MkdirAll(filepath.Dir(wk.sock), 0o700); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", wk.sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return d, wk
}

func row(dir, state string) api.WorkspaceStatus { return api.WorkspaceStatus{Dir: dir, State: state} }

// TestWorkerStatusRowsChecked: a status row naming another user's
// workspace, a second row for the same workspace, one in a made-up state
// and one with negative counts are dropped and counted; the worker's own
// good row passes, and its refused one shows failed, saying why.
func TestWorkerStatusRowsChecked(t *testing.T) {
	neg := row(ownWS2, workspace.StateWatching)
	neg.Seals, neg.StoreBytes = -3, -1
	forged := row(foreignWS, workspace.StateWatching)
	forged.Error, forged.LastState = "", "sealed"
	reply := api.Status{Workspaces: []api.WorkspaceStatus{row(ownWS, workspace.StateWatching), forged, row(ownWS, workspace.StateFailed),
		row(foreignWS+"2", "corrupt"), neg}}
	_, wk := fakeWorker(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(reply)
	}))
	rows, err := wk.workspaces(context.Background(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]api.WorkspaceStatus{}
	for _, r := range rows {
		if _, dup := got[r.Dir]; dup {
			t.Errorf("two rows for %s: %+v", r.Dir, rows)
		}
		got[r.Dir] = r
	}
	if len(got) != 2 || got[ownWS].State != workspace.StateWatching {
		t.Errorf("rows kept: %+v, want %s watching and %s failed only", rows, ownWS, ownWS2)
	}
	if r := got[ownWS2]; r.State != workspace.StateFailed || !strings.Contains(r.Error, "negative") || r.Seals != 0 {
		t.Errorf("the row with negative counts: %+v, want failed, saying why", r)
	}
	if n := dropsOf(wk)["status"]; n != 4 {
		t.Errorf("status rows dropped: %d, want 4 (two foreign, a second row, a negative one)", n)
	}
}

// TestWorkerStatusBounded: a 15 MB status reply is refused whole after at
// most its bound is read, and however many ask for status at once, the
// worker is asked once: the supervisor holds one reply per worker.
func TestWorkerStatusBounded(t *testing.T) {
	var hits atomic.Int32
	var written atomic.Int64
	release := make(chan struct{})
	_, wk := fakeWorker(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) > 1 {
			<-release // after the first: every caller is waiting before the worker answers
		}
		big := row(ownWS, workspace.StateWatching)
		big.Error = strings.Repeat("x", 15_000_000)
		b, _ := json.Marshal(api.Status{Workspaces: []api.WorkspaceStatus{big}})
		for len(b) > 0 {
			n, err := w.Write(b[:min(len(b), 64<<10)])
			written.Add(int64(n))
			if err != nil {
				return
			}
			b = b[n:]
		}
	}))
	// One caller: the reply is refused, not taken.
	got, err := wk.workspaces(context.Background(), 20*time.Second)
	if err == nil || len(got) != 0 {
		t.Fatalf("a 15 MB status reply was taken: %d rows, %v", len(got), err)
	}
	if w := written.Load(); w > 8<<20 {
		t.Errorf("the supervisor read %d bytes of a refused reply, want at most its bound (and the socket's buffer)", w)
	}
	// Many at once: the worker is asked once.
	hits.Store(1)
	const callers = 40
	var wg sync.WaitGroup
	errs := make([]error, callers)
	rows := make([][]api.WorkspaceStatus, callers)
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rows[i], errs[i] = wk.workspaces(context.Background(), 20*time.Second)
		}()
	}
	testsupport.WaitFor(t, 10*time.Second, "the worker asked", func() bool { return hits.Load() != 1 })
	// Every caller waits on the one call before the worker answers (they must
	// join, not ask again): each shows in the stacks inside workspaces.
	testsupport.WaitFor(t, 10*time.Second, "every caller waiting", func() bool {
		buf := make([]byte, 1<<20)
		return strings.Count(string(buf[:runtime.Stack(buf, true)]), "(*worker).workspaces(") >= callers
	})
	close(release)
	wg.Wait()
	for i := range callers {
		if errs[i] == nil || len(rows[i]) != 0 {
			t.Fatalf("caller %d: a 15 MB status reply was taken: %d rows, %v", i, len(rows[i]), errs[i])
		}
	}
	if n := hits.Load() - 1; n != 1 {
		t.Errorf("%d callers asked the worker %d times, want once", callers, n)
	}
	if n := dropsOf(wk)["status"]; n < 1 {
		t.Errorf("the refused reply was not counted: %v", dropsOf(wk))
	}
}

// TestWorkerEventsChecked: events naming another user's workspace, over
// 64 KiB, of a made-up type or not JSON are dropped; a flood of 5,000 is
// cut to the rate; every drop is counted.
func TestWorkerEventsChecked(t *testing.T) {
	const flood = 5000
	var served atomic.Bool
	_, wk := fakeWorker(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if served.Swap(true) {
			<-r.Context().Done() // one stream only: the supervisor's retry gets nothing more
			return
		}
		enc := json.NewEncoder(w)
		now := time.Now()
		_ = enc.Encode(api.Event{Type: api.EvRollbackCompleted, Workspace: foreignWS, Time: now})
		_ = enc.Encode(api.Event{Type: api.EvCheckpointSealed, Workspace: ownWS, Time: now, Data: strings.Repeat("y", 100<<10)})
		_ = enc.Encode(api.Event{Type: "store.corrupt", Workspace: ownWS, Time: now})
		_, _ = io.WriteString(w, "{not json\n")
		for i := range flood {
			_ = enc.Encode(api.Event{Type: api.EvCheckpointSealed, Workspace: ownWS, Time: now, Data: i})
		}
	}))
	// A subscriber with room for every event: none is lost to the bus.
	sub := &subscriber{ch: make(chan api.Event, flood+10), allow: func(string) bool { return true }}
	wk.d.bus.mu.Lock()
	wk.d.bus.subs[sub] = struct{}{}
	wk.d.bus.mu.Unlock()
	began := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	relayed := make(chan struct{})
	go func() { defer close(relayed); wk.relayEvents(ctx) }()
	testsupport.Poll(30*time.Second, func() bool { return int64(len(sub.ch))+dropsOf(wk)["event"] >= flood+4 })
	took := time.Since(began)
	cancel()
	<-relayed
	wk.d.bus.unsubscribe(sub)
	var got []api.Event
	for ev := range sub.ch {
		got = append(got, ev)
	}
	for _, ev := range got {
		if ev.Workspace != ownWS || ev.Type != api.EvCheckpointSealed {
			t.Fatalf("relayed: %+v", ev)
		}
		if s, ok := ev.Data.(string); ok && len(s) > 1000 {
			t.Fatal("an event over 64 KiB was relayed")
		}
	}
	if limit := workerproto.EventBurst + int(took.Seconds()*workerproto.EventRate) + 1; len(got) > limit {
		t.Errorf("%d of %d events relayed in %s, want at most %d", len(got), flood, took, limit)
	}
	if len(got) == 0 {
		t.Error("no event relayed at all")
	}
	if n, want := dropsOf(wk)["event"], int64(4+flood-len(got)); n != want {
		t.Errorf("events dropped: %d, want %d", n, want)
	}
}

// workerMetricsHandler answers a scrape with body (text format).
func workerMetricsHandler(body func(io.Writer)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		body(w)
	})
}

// series finds the value of a series in fams, by family and label values.
func series(fams []*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.Metric {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.Label {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue(), true
			case m.Gauge != nil:
				return m.Gauge.GetValue(), true
			case m.Untyped != nil:
				return m.Untyped.GetValue(), true
			}
		}
	}
	return 0, false
}

// TestWorkerMetricsChecked: a worker's series with label values the
// supervisor has not, of a family workers do not report, negative, for
// another user's workspace or twice over are dropped and counted; its good
// series are added.
func TestWorkerMetricsChecked(t *testing.T) {
	d, wk := fakeWorker(t, workerMetricsHandler(func(w io.Writer) {
		fmt.Fprint(w, `# TYPE cairn_checkpoints_total counter
cairn_checkpoints_total{kind="manual",state="ok"} 3
cairn_checkpoints_total{kind="manual",state="pwned"} 1
# TYPE cairn_store_bytes gauge
cairn_store_bytes -5000
# TYPE cairn_watch_overflows_total counter
cairn_watch_overflows_total -7
# TYPE cairn_worker_scrape_errors_total counter
cairn_worker_scrape_errors_total 99
# TYPE cairn_junk gauge
cairn_junk 1
# TYPE cairn_workspace_seals_total counter
cairn_workspace_seals_total{workspace="`+ownWS+`"} 2
cairn_workspace_seals_total{workspace="`+foreignWS+`"} 7
# TYPE cairn_workspace_state gauge
cairn_workspace_state{state="watching",workspace="`+ownWS+`"} 1
cairn_workspace_state{state="sealed",workspace="`+ownWS2+`"} 1
`)
	}))
	fams, err := d.gatherMetrics(context.Background(), true, func(string) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := series(fams, "cairn_checkpoints_total", "kind", "manual", "state", "ok"); v != 3 {
		t.Errorf("the worker's good counter: %v, want 3", v)
	}
	if v, _ := series(fams, "cairn_workspace_seals_total", "workspace", ownWS); v != 2 {
		t.Errorf("the worker's own workspace's series: %v, want 2", v)
	}
	for _, bad := range []struct {
		name   string
		labels []string
	}{
		{"cairn_checkpoints_total", []string{"state", "pwned"}},
		{"cairn_junk", nil},
		{"cairn_workspace_seals_total", []string{"workspace", foreignWS}},
		{"cairn_workspace_state", []string{"state", "sealed"}},
	} {
		if v, ok := series(fams, bad.name, bad.labels...); ok {
			t.Errorf("%s %v reached /metrics: %v", bad.name, bad.labels, v)
		}
	}
	for _, name := range []string{"cairn_store_bytes", "cairn_watch_overflows_total", "cairn_worker_scrape_errors_total"} {
		if v, _ := series(fams, name); v != 0 {
			t.Errorf("%s = %v: the worker's value was added", name, v)
		}
	}
	if n := dropsOf(wk)["metric"]; n != 7 {
		t.Errorf("series dropped: %d, want 7", n)
	}
}

// TestWorkerMetricsBounded: a scrape of 20,000 series is refused whole
// (none reaches /metrics; the worker's workspaces count as failed, as for a
// worker that does not answer), and counted.
func TestWorkerMetricsBounded(t *testing.T) {
	d, wk := fakeWorker(t, workerMetricsHandler(func(w io.Writer) {
		fmt.Fprintln(w, "# TYPE cairn_workspace_seals_total counter")
		for i := range 20_000 {
			fmt.Fprintf(w, "cairn_workspace_seals_total{workspace=\"%s/junk%d\"} 1\n", ownWS, i)
		}
	}))
	fams, err := d.gatherMetrics(context.Background(), true, func(string) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range fams {
		n += len(f.Metric)
	}
	if n > 1000 {
		t.Errorf("%d series on /metrics after a worker sent 20,000", n)
	}
	if v, _ := series(fams, "cairn_workspaces", "state", workspace.StateFailed); v != 2 {
		t.Errorf("cairn_workspaces{state=failed} = %v, want the worker's 2", v)
	}
	if dropsOf(wk)["metric"] < 1000 {
		t.Errorf("series dropped: %v", dropsOf(wk))
	}
}
