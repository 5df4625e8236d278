package agent

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/workerproto"
	"github.com/cairn-dev/cairn/agent/workspace"
)

// The supervisor trusts nothing a worker says (docs/worker-protocol.md): its
// log lines, status rows, events and metric series are bounded per worker
// and checked (package workerproto lists the bounds and the checks), and
// what names a workspace not assigned to it, or a negative count, is
// dropped and counted here (status shows the counts to root; the metric
// cairn_worker_replies_dropped_total counts them by kind).

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

// pumpLog reads the worker's stdout and stderr (one pipe) until it closes,
// and logs each line as the supervisor's, tagged with the worker's uid and
// nested in a field: nothing a worker writes passes as a line of root's.
func (wk *worker) pumpLog(r io.Reader) {
	br := bufio.NewReaderSize(r, 64<<10)
	lines := workerproto.NewBucket(workerproto.LogRate, workerproto.LogBurst)
	size := workerproto.NewBucket(workerproto.LogBytesRate, workerproto.LogBytesBurst)
	for {
		line, cut, err := workerproto.ReadLine(br, workerproto.MaxLogLine)
		if len(line)+cut > 0 {
			now := time.Now()
			if lines.Allow(now, 1) && size.Allow(now, float64(len(line))) {
				wk.relayLog(line, cut)
			} else {
				wk.drop(workerproto.DropLog, 1, "log lines over 200 a second (or 256 KiB a second)")
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

// perWorkspaceFamilies are the families of per-workspace series, as this
// build makes them (name, help, type, label names), read from the collector
// itself: what a worker's per-workspace series are checked against.
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
	collectWorkspace(ch, api.WorkspaceStatus{Dir: "/sample", State: workspace.StateWatching, Replication: &api.ReplicationStatus{}})
}
