// Package workerproto is the contract between a root supervisor and the
// worker it starts for each workspace owner (docs/worker-protocol.md): how a
// worker is started and takes its owner's ids, every request that passes
// between the two, its bound, and the check the supervisor makes of the
// answer. The rule behind it: the supervisor trusts nothing a worker says.
//
// This file lists every message. The checks are in check.go, the
// supervisor's end of a worker's socket in client.go, the start in
// start_*.go.
//
//	message                       bound                                  check (refused: dropped and counted)
//	----------------------------  -------------------------------------  ---------------------------------------------
//	start (argv, ids)             StartArgs, IDArgs                       BecomeWorker: every id the owner's, no
//	                                                                      capability, not dumpable (checkIDs)
//	POST PathAssign (sent)        answer: MaxAssignReply                  only the status code counts; the worker
//	                                                                      takes it from root only, checks each path
//	GET  PathStatus (reply)       MaxStatusReply(n)                       ReadStatus, then CheckStatusRows: an
//	                                                                      assigned workspace, once, a known state
//	                                                                      (States), no negative count
//	GET  PathEvents (stream)      MaxEvent a line; EventRate, EventBurst  CheckEvent: valid JSON, an assigned
//	                                                                      workspace, a type in EventTypes
//	GET  PathMetrics (reply)      MaxMetricsReply(n): bytes and series    ReadMetrics, then SeriesRules.Check: not
//	                                                                      SupervisorOnly, of the supervisor's type
//	                                                                      and label sets, an assigned workspace, a
//	                                                                      known state, once, finite, not negative
//	Forwarded (one workspace)     none: streamed back to whoever asked    the supervisor checks the path and the
//	                                                                      asking peer before forwarding
//	log lines (stdout, stderr)    MaxLogLine; LogRate, LogBurst,          nested under "worker" (ReadLine, Bucket)
//	                              LogBytesRate, LogBytesBurst
//
// What is refused is counted by kind (DropKinds) in the worker's status and
// in cairn_worker_replies_dropped_total.
package workerproto

import (
	"strconv"

	"github.com/cairn-dev/cairn/agent/api"
)

// Endpoints of a worker's socket that the supervisor calls itself.
const (
	PathAssign  = "/v1/worker/assign" // POST {"workspaces": {"<dir>": <settings>}}: the whole list
	PathStatus  = "/v1/status"        // liveness, and the rows of the worker's workspaces
	PathEvents  = "/v1/events"        // a stream, one JSON event a line
	PathMetrics = "/metrics"          // protobuf-delimited; ?per_workspace=1 when configured
)

// Forwarded are the requests about one workspace that the supervisor
// forwards to the workspace's worker, after checking the path (lexically)
// and that the asking peer may act on it; the answer is streamed back
// unchanged.
var Forwarded = []string{"/v1/checkpoint", "/v1/command", "/v1/restore", "/v1/undo", "/v1/list", "/v1/diff",
	"/v1/show", "/v1/verify", "/v1/gc", "/v1/pin", "/v1/unpin", "/v1/prune"}

// Bounds on what one worker may send its supervisor.
const (
	MaxAssignReply  = 64 << 10  // the answer to PathAssign
	MaxStatus       = 4 << 20   // a status reply...
	MaxStatusPerWS  = 256 << 10 // ...or this much a workspace assigned, if more
	MaxEvent        = 64 << 10  // one event (a line of the event stream)
	EventRate       = 200       // events a second, per worker...
	EventBurst      = 1000      // ...with bursts up to this many
	MaxMetrics      = 4 << 20   // a metrics reply...
	MaxMetricsPerWS = 4 << 10   // ...plus this much a workspace assigned
	MaxSeries       = 1000      // series in a metrics reply...
	SeriesPerWS     = 16        // ...plus this many a workspace assigned
	MaxLogLine      = 16 << 10  // one log line; the rest of a longer one is cut
	LogRate         = 200       // log lines a second, per worker...
	LogBurst        = 2000      // ...with bursts up to this many
	LogBytesRate    = 256 << 10 // log bytes a second, per worker...
	LogBytesBurst   = 2 << 20   // ...with bursts up to this many
)

// Kinds of what is dropped from a worker (api.WorkerStatus.Dropped, and
// the label of cairn_worker_replies_dropped_total).
const (
	DropStatus = "status" // a status row, or a whole status reply
	DropEvent  = "event"
	DropMetric = "metric" // a metric series
	DropLog    = "log"    // a log line
)

// DropKinds are all the kinds, in order.
var DropKinds = []string{DropStatus, DropEvent, DropMetric, DropLog}

// States are the states a workspace has in a status row or a metric series.
var States = []string{"starting", "watching", "degraded", "failed", "gone"}

// EventTypes are the events a worker publishes.
var EventTypes = []string{api.EvCheckpointSealed, api.EvRollbackStarted, api.EvRollbackProgress,
	api.EvRollbackCompleted, api.EvRollbackArchiveRestore, api.EvError, api.EvProgress}

// SupervisorOnly are the families only the supervisor reports, never summed
// from a worker.
var SupervisorOnly = map[string]bool{"cairn_build_info": true, "cairn_inotify_max_user_watches": true,
	"cairn_workers": true, "cairn_worker_scrape_errors_total": true, "cairn_worker_replies_dropped_total": true}

// StartArgs are a worker's arguments (after its name): its state folder, its
// socket (inherited as fd 3), the cap on a runtime file, and the ids it
// takes (IDArgs). docs/worker-protocol.md, "Starting a worker".
func StartArgs(stateDir, socket string, maxRuntimeFile int64, uid, gid uint32, groups []uint32) []string {
	args := []string{"daemon", "--worker", "--state-dir", stateDir, "--socket", socket,
		"--max-runtime-file", strconv.FormatInt(maxRuntimeFile, 10)}
	return append(args, IDArgs(uid, gid, groups)...)
}
