// Package hwsim plays a Hankweave runtime's behaviour into an execution
// directory, for tests, cmd/cairn-demo and the daemon benchmark: state.json rewritten through .bak/.tmp/rename after
// every transition, one journal line per transition, runtime.lock with
// heartbeats, codons that write, edit and delete files under agentRoot/,
// retries, loops, failures, skips, clean and interrupted shutdowns, crashes
// and journal compaction. What it writes follows docs/runtime-formats.md and
// the shapes the runtime's own state manager builds (member order included).
//
// Every call returns its error rather than failing a test: the shipped binary
// links this package and must not link package testing. Tests use package
// hwsimtest, which fails the test instead.
//
// It uses the standard library only and does not share code with package
// hankweave, so tests of the reader check it against an independent writer.
package hwsim

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Names of the files the simulator writes, relative to the execution directory.
const (
	StateRel       = ".hankweave/state.json"
	StateBackupRel = ".hankweave/state.json.bak"
	StateTempRel   = ".hankweave/state.json.tmp"
	LockRel        = ".hankweave/runtime.lock"
	LockTempRel    = ".hankweave/runtime.lock.tmp"
	JournalRel     = ".hankweave/events/events.jsonl"
	JournalZstRel  = ".hankweave/events/events.jsonl.zst"
	JournalMetaRel = ".hankweave/events/journal.meta.json"
	JournalCASRel  = ".hankweave/events/cas"
)

// StaleHeartbeatAge is how old Crash and Hang make the lock's heartbeat:
// well past the 120 s after which a runtime counts as gone.
const StaleHeartbeatAge = 10 * time.Minute

// Sim is a simulated runtime bound to one execution directory. Its methods
// are safe for concurrent use. The first error a call meets is kept (Err):
// every later call does nothing and returns it again, since the state held in
// memory may no longer match the files.
type Sim struct {
	mu   sync.Mutex
	err  error
	dir  string
	plan []Entry

	now       func() time.Time
	pid       int
	port      int
	runIDs    []string
	sealer    func(kind, runID, codonID string) string
	epochLock bool
	// beforeRename, when set, is called just before each state.json rename.
	beforeRename func()
	rng          *rand.Rand
	state        *obj
	runID        string
	lockID       string
	lockStart    time.Time
	claudePids   int
}

// Option adjusts a Sim.
type Option func(*Sim)

// WithClock sets the clock that stamps every timestamp (default time.Now).
func WithClock(now func() time.Time) Option { return func(s *Sim) { s.now = now } }

// WithPID sets the runtime's pid written to the lock and to serverPid
// (default: this process, which is alive).
func WithPID(pid int) Option { return func(s *Sim) { s.pid = pid } }

// WithPort sets the lock's port (default 7777).
func WithPort(port int) Option { return func(s *Sim) { s.port = port } }

// WithRunIDs gives the ids of the runs StartRun begins, in order; when they
// run out, ids are generated (<milliseconds>-<5 base-36 characters>).
func WithRunIDs(ids ...string) Option {
	return func(s *Sim) { s.runIDs = append(s.runIDs, ids...) }
}

// WithRuntimeCheckpoints makes the simulated runtime record checkpoints of
// its own, as a runtime with checkpointing enabled does: seal is called with
// kind "rig-setup", "completed", "error" or "skipped" at that moment and
// returns the SHA to record (rigSetupCheckpoint, completionCheckpoint, …) or
// "" for none. In the runtime's order: a rig-setup checkpoint is made after
// the preparing→starting write is on disk and recorded by a later write
// (CheckpointCreated) while the codon is still starting; a terminal one is
// made and journaled first, then the terminal transition records it. A
// shutdown with a codon unfinished calls seal with kind "exit" before
// RunFailed; that SHA is recorded nowhere. It runs with the Sim locked: it
// must not call the Sim.
func WithRuntimeCheckpoints(seal func(kind, runID, codonID string) string) Option {
	return func(s *Sim) { s.sealer = seal }
}

// WithEpochMillisLock writes the lock's startTime and lastHeartbeat as epoch
// milliseconds instead of ISO strings (which the runtime uses is not
// documented; readers must accept both).
func WithEpochMillisLock() Option { return func(s *Sim) { s.epochLock = true } }

// WithBeforeStateRename calls f just before each rename of state.json.tmp
// over state.json, the moment a transition (a lifecycle marker) lands: a
// benchmark times from there, not from before the simulator builds the JSON.
func WithBeforeStateRename(f func()) Option { return func(s *Sim) { s.beforeRename = f } }

// New prepares execDir (agentRoot/, .hankweave/, .hankweave/events/) for a
// simulated runtime that will run plan. Nothing else is written until StartRun.
func New(execDir string, plan []Entry, opts ...Option) (*Sim, error) {
	s := &Sim{
		dir:  execDir,
		plan: append([]Entry(nil), plan...),
		now:  time.Now,
		pid:  os.Getpid(),
		port: 7777,
		rng:  rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
	}
	for _, o := range opts {
		o(s)
	}
	err := s.do(func() error {
		for _, d := range []string{"agentRoot", ".hankweave/events", ".hankweave/runs"} {
			if err := os.MkdirAll(s.path(d), 0o755); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Err is the first error a call met, or nil.
func (s *Sim) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// ExecDir is the execution directory.
func (s *Sim) ExecDir() string { return s.dir }

// AgentRoot is <exec>/agentRoot.
func (s *Sim) AgentRoot() string { return s.path("agentRoot") }

// Path joins a slash path relative to the execution directory (StateRel, …).
func (s *Sim) Path(rel string) string { return s.path(rel) }

// RunID is the id of the run started last ("" before StartRun).
func (s *Sim) RunID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runID
}

// PID is the pid the runtime writes to its lock and to serverPid.
func (s *Sim) PID() int { return s.pid }

// Plan is the execution plan the runtime writes.
func (s *Sim) Plan() []Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Entry(nil), s.plan...)
}

func (s *Sim) path(rel string) string { return filepath.Join(s.dir, filepath.FromSlash(rel)) }

// do runs f with the Sim locked, unless an earlier call failed.
func (s *Sim) do(f func() error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	if err := f(); err != nil {
		s.err = fmt.Errorf("hwsim: %w", err)
	}
	return s.err
}

// iso is JavaScript's Date.prototype.toISOString.
func iso(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

func (s *Sim) stamp() string { return iso(s.now()) }

// ---- runs ----

// StartRun starts the runtime, as the real one does at its start: an
// events.jsonl compacted at the last run's end comes back; state.json is
// (re)loaded from disk, falling back to state.json.bak, so what another
// writer put there (cairn's rollback) is honoured; runtime.lock is written.
// If the current run is a continuation nobody has run yet (a rollback wrote
// it), the runtime resumes it. Otherwise runs left running by an earlier
// runtime are marked crashed (RunCrashed: their open codon failed), and
// RunStarted adds a fresh run first in "runs", makes it current and writes
// the plan. It returns the id of the run now current.
func (s *Sim) StartRun() (string, error) {
	var id string
	err := s.do(func() error {
		if err := s.restoreJournal(); err != nil {
			return err
		}
		if err := s.load(); err != nil {
			return err
		}
		s.lockID = s.uuid()
		s.lockStart = s.now()
		if r := s.resumable(); r != nil {
			id = r.str("runId")
			s.runID = id
			r.set("serverPid", s.pid)
			if err := s.writeLock(s.pid, s.now()); err != nil {
				return err
			}
			return s.save()
		}
		id = s.nextRunID()
		s.runID = id
		if err := s.writeLock(s.pid, s.now()); err != nil {
			return err
		}
		for _, r := range s.runs() {
			if r.str("status") == "running" {
				if err := s.crashRun(r); err != nil {
					return err
				}
			}
		}
		folder := s.path(".hankweave/runs/" + id)
		if err := os.MkdirAll(folder, 0o755); err != nil {
			return err
		}
		cond := newObj("type", "fresh")
		run := newObj(
			"runId", id,
			"runFolder", folder,
			"gitBranch", "run-"+id,
			"startingConditions", cond,
			"codons", []any{},
			"status", "running",
			"startTime", s.stamp(),
			"serverPid", s.pid,
		)
		s.state.set("runs", append([]any{run}, s.state.get("runs").([]any)...))
		s.state.set("currentRunId", id)
		s.state.set("executionPlan", s.planJSON())
		return s.commit("RunStarted", newObj(
			"runId", id, "runFolder", folder, "gitBranch", "run-"+id,
			"startingConditions", cond, "serverPid", s.pid))
	})
	if err != nil {
		return "", err
	}
	return id, nil
}

// load reads state.json (or state.json.bak) the way the runtime's state
// manager does at start; nothing usable means a fresh state.
func (s *Sim) load() error {
	s.state = nil
	for _, rel := range []string{StateRel, StateBackupRel} {
		b, err := os.ReadFile(s.path(rel))
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				if rel == StateRel {
					break // the runtime does not look at the backup when there is no state file
				}
				continue
			}
			return err
		}
		v, err := parse(b)
		if err != nil {
			continue
		}
		o, ok := v.(*obj)
		if !ok {
			continue
		}
		if _, ok := o.get("runs").([]any); !ok {
			continue
		}
		if _, ok := o.get("executionPlan").([]any); !ok {
			continue
		}
		switch o.get("currentRunId").(type) {
		case string, null:
		default:
			continue
		}
		s.state = o
		break
	}
	if s.state == nil {
		s.state = newObj("runs", []any{}, "currentRunId", null{}, "executionPlan", []any{})
	}
	return nil
}

// resumable is the current run when it is a continuation no runtime has run yet.
func (s *Sim) resumable() *obj {
	cur, _ := s.state.get("currentRunId").(string)
	if cur == "" {
		return nil
	}
	for _, r := range s.runs() {
		if r.str("runId") != cur {
			continue
		}
		cond, _ := r.get("startingConditions").(*obj)
		codons, _ := r.get("codons").([]any)
		if r.str("status") == "running" && cond != nil && cond.str("type") == "continuation" && len(codons) == 0 {
			return r
		}
	}
	return nil
}

func (s *Sim) crashRun(r *obj) error {
	at := s.stamp()
	codons := r.get("codons").([]any)
	last := "unknown"
	if n := len(codons); n > 0 {
		last = codons[n-1].(*obj).str("status")
	}
	r.set("status", "crashed")
	r.set("endTime", at)
	for i, c := range codons {
		rec := c.(*obj)
		if isTerminal(rec.str("status")) {
			continue
		}
		f := newObj(
			"codonId", rec.get("codonId"),
			"startTime", rec.get("startTime"),
			"status", "failed",
			"endTime", at,
			"failedDuring", rec.str("status"),
			"exitCode", -1,
			"failureReason", newObj("type", "unknown", "retriable", false, "message", "Server crashed"),
			"partialCost", orDefault(rec.get("currentCost"), 0),
			"partialTokens", orDefault(rec.get("currentTokens"), zeroTokens()),
		)
		for _, k := range []string{"rigSetupCheckpoint", "claudePid", "claudeSessionId", "claudeLogPath", "previousSessionId", "loopContext"} {
			if rec.has(k) {
				f.set(k, rec.get(k))
			}
		}
		codons[i] = f
		break
	}
	return s.commit("RunCrashed", newObj("runId", r.str("runId"), "detectedAt", at, "lastCodonStatus", last))
}

// Shutdown is the runtime's own stop. With every codon of the run finished,
// the run is marked completed (RunCompleted: status, endTime, currentRunId
// null). With a codon unfinished, as the runtime does: an exit commit (the
// WithRuntimeCheckpoints callback, kind "exit"; its SHA is recorded nowhere),
// then RunFailed (status failed, endTime, currentRunId null), the codon's
// record left as it is. Then runtime.lock is removed.
func (s *Sim) Shutdown() error {
	return s.do(func() error {
		run, err := s.currentRun()
		if err != nil {
			return err
		}
		tt, status := "RunCompleted", "completed"
		if rec := lastOpen(run); rec != nil && run.str("status") == "running" {
			s.seal("exit", rec.str("codonId"))
			tt, status = "RunFailed", "failed"
		}
		if err := s.endRun(tt, status); err != nil {
			return err
		}
		return s.removeLock()
	})
}

// lastOpen is the run's newest record that is not terminal, or nil.
func lastOpen(run *obj) *obj {
	codons, _ := run.get("codons").([]any)
	for i := len(codons) - 1; i >= 0; i-- {
		if rec := codons[i].(*obj); !isTerminal(rec.str("status")) {
			return rec
		}
	}
	return nil
}

// FailRun stops after a failure: RunFailed (status failed, endTime,
// currentRunId null), then runtime.lock is removed.
func (s *Sim) FailRun() error {
	return s.do(func() error {
		if err := s.endRun("RunFailed", "failed"); err != nil {
			return err
		}
		return s.removeLock()
	})
}

// Stop is a forced shutdown: runtime.lock is removed and state.json is left
// as it is, the run still running and an open codon still open (no exit
// commit, no state transition).
func (s *Sim) Stop() error {
	return s.do(s.removeLock)
}

// Crash leaves everything as a killed runtime does: runtime.lock stays, now
// naming a pid that does not exist and a heartbeat StaleHeartbeatAge old; the
// run and its open codon stay running.
func (s *Sim) Crash() error {
	return s.do(func() error { return s.writeLock(DeadPID(), s.now().Add(-StaleHeartbeatAge)) })
}

// Hang leaves a runtime whose process lives on but stopped heartbeating: the
// lock's pid is alive and its heartbeat StaleHeartbeatAge old.
func (s *Sim) Hang() error {
	return s.do(func() error { return s.writeLock(s.pid, s.now().Add(-StaleHeartbeatAge)) })
}

// Heartbeat rewrites runtime.lock with lastHeartbeat = now (temp file, rename).
func (s *Sim) Heartbeat() error {
	return s.do(func() error {
		if s.lockID == "" {
			return errors.New("heartbeat before StartRun")
		}
		return s.writeLock(s.pid, s.now())
	})
}

func (s *Sim) endRun(tt, status string) error {
	run, err := s.currentRun()
	if err != nil {
		return err
	}
	if run.str("status") != "running" {
		return nil
	}
	run.set("status", status)
	run.set("endTime", s.stamp())
	s.state.set("currentRunId", null{})
	return s.commit(tt, newObj("runId", run.str("runId")))
}

// SetPlan replaces the execution plan and saves state.json, as the runtime
// does when it expands the next iteration of a loop (no journal line).
func (s *Sim) SetPlan(plan []Entry) error {
	return s.do(func() error {
		s.plan = append([]Entry(nil), plan...)
		if s.state == nil {
			return nil
		}
		s.state.set("executionPlan", s.planJSON())
		return s.save()
	})
}

// ---- codons ----

// BeginCodon appends a record in status preparing (CodonStarted); a codon
// whose last record failed gets a new record with the same codonId (a retry).
func (s *Sim) BeginCodon(codonID string) error {
	return s.do(func() error { return s.begin(codonID) })
}

// StartCodon begins the codon and moves it preparing → starting →
// initializing → running, one state.json rewrite and one journal line per
// step. The rig setup's files are written while it is preparing.
func (s *Sim) StartCodon(codonID string) error {
	return s.do(func() error {
		if err := s.begin(codonID); err != nil {
			return err
		}
		for _, to := range []string{"starting", "initializing", "running"} {
			if err := s.advance(codonID, to, nil); err != nil {
				return err
			}
		}
		return nil
	})
}

// Advance moves the codon's open record one transition, to status to
// ("starting", "initializing", "running", "completing-sentinels",
// "completed", "failed" or "skipped"), building the record the way the
// runtime does. Failing this way records failureReason {unknown, not
// retriable}; FailCodon chooses.
func (s *Sim) Advance(codonID, to string) error {
	return s.do(func() error { return s.advance(codonID, to, nil) })
}

// CompleteCodon moves the codon's open record running → completing-sentinels → completed.
func (s *Sim) CompleteCodon(codonID string) error {
	return s.do(func() error {
		rec, _, err := s.open(codonID)
		if err != nil {
			return err
		}
		if rec.str("status") == "running" {
			if err := s.advance(codonID, "completing-sentinels", nil); err != nil {
				return err
			}
		}
		return s.advance(codonID, "completed", nil)
	})
}

// FailCodon fails the codon's open record from whatever status it is in
// (failedDuring), with exit code 1 and the given reason. A retriable failure
// is followed by a retry when StartCodon is called again.
func (s *Sim) FailCodon(codonID, message string, retriable bool) error {
	return s.do(func() error {
		return s.advance(codonID, "failed", newObj("type", "process_error", "retriable", retriable, "message", message))
	})
}

// SkipCodon skips the codon: its open record, or a new one begun for the
// purpose (skipped during preparing).
func (s *Sim) SkipCodon(codonID string) error {
	return s.do(func() error {
		if _, _, err := s.open(codonID); err != nil {
			if err := s.begin(codonID); err != nil {
				return err
			}
		}
		return s.advance(codonID, "skipped", nil)
	})
}

func (s *Sim) begin(codonID string) error {
	run, err := s.currentRun()
	if err != nil {
		return err
	}
	if rec, _, err := s.open(codonID); err == nil {
		return fmt.Errorf("codon %s already has an open record (%s)", codonID, rec.str("status"))
	}
	var loop *obj
	if e := s.entry(codonID); e != nil && e.Loop != nil {
		loop = e.Loop.json()
	}
	rec := newObj("codonId", codonID, "startTime", s.stamp(), "status", "preparing")
	if loop != nil {
		rec.set("loopContext", loop)
	}
	run.set("codons", append(run.get("codons").([]any), rec))
	data := newObj("runId", s.runID, "codonId", codonID)
	if loop != nil {
		data.set("loopContext", loop)
	}
	return s.commit("CodonStarted", data)
}

// next lists the transitions the runtime allows.
var next = map[string][]string{
	"preparing":            {"starting", "failed", "skipped"},
	"starting":             {"initializing", "failed", "skipped"},
	"initializing":         {"running", "completed", "failed", "skipped"},
	"running":              {"completing-sentinels", "completed", "failed", "skipped"},
	"completing-sentinels": {"completed", "failed", "skipped"},
}

func (s *Sim) advance(codonID, to string, reason *obj) error {
	rec, idx, err := s.open(codonID)
	if err != nil {
		return err
	}
	from := rec.str("status")
	allowed := false
	for _, x := range next[from] {
		allowed = allowed || x == to
	}
	if !allowed {
		return fmt.Errorf("codon %s: invalid transition from %s to %s", codonID, from, to)
	}
	run, _ := s.currentRun()
	meta := newObj()
	var nrec *obj
	var cpKind, sha string
	rig := false
	switch to {
	case "completed", "failed", "skipped":
		// The runtime commits and journals its checkpoint first; the
		// terminal transition then records it.
		cpKind = map[string]string{"completed": "completed", "failed": "error", "skipped": "skipped"}[to]
		if sha = s.seal(cpKind, codonID); sha != "" {
			if err := s.appendEvent("state.transition", newObj("transitionType", "CheckpointCreated",
				"runId", s.runID, "codonId", codonID, "checkpointType", cpKind,
				"sha", sha, "branch", "run-"+s.runID)); err != nil {
				return err
			}
		}
	}
	switch to {
	case "starting":
		e := s.entry(codonID)
		if e != nil {
			for _, step := range e.Codon.RigSetup {
				for _, rel := range sortedKeys(step.Writes) {
					if err := s.writeFile(rel, step.Writes[rel]); err != nil {
						return err
					}
				}
			}
			// The rig checkpoint is made once starting is on disk (below).
			rig = len(e.Codon.RigSetup) > 0
		}
		nrec = newObj("codonId", rec.get("codonId"), "startTime", rec.get("startTime"), "status", "starting")
		if rec.has("loopContext") {
			nrec.set("loopContext", rec.get("loopContext"))
		}
	case "initializing":
		s.claudePids++
		logRel := "runs/" + s.runID + "/" + strings.ReplaceAll(codonID, "#", "-") + "-claude.log"
		if err := os.MkdirAll(s.path(".hankweave/runs/"+s.runID), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(s.path(".hankweave/"+logRel), nil, 0o644); err != nil {
			return err
		}
		pid := 40000 + s.claudePids
		nrec = rec.spread().set("status", "initializing").set("claudePid", pid).set("claudeLogPath", logRel)
		meta.set("claudePid", pid).set("claudeLogPath", logRel)
	case "running":
		sid := s.uuid()
		nrec = rec.spread().set("status", "running").set("claudeSessionId", sid).
			set("currentCost", 0).set("currentTokens", zeroTokens()).
			set("assistantMessageCount", 0).set("extensionCount", 0)
		meta.set("claudeSessionId", sid)
	case "completing-sentinels":
		nrec = rec.spread().set("status", "completing-sentinels")
	case "completed":
		nrec = rec.spread().set("status", "completed").set("endTime", s.stamp()).set("exitCode", 0).
			set("finalCost", orDefault(rec.get("currentCost"), 0)).
			set("finalTokens", orDefault(rec.get("currentTokens"), zeroTokens())).
			set("resultMessageReceived", true).
			set("completionCheckpoint", sha)
		meta.set("resultMessageReceived", true)
		if sha != "" {
			meta.set("checkpointSha", sha)
		}
	case "failed":
		if reason == nil {
			reason = newObj("type", "unknown", "retriable", false, "message", "simulated failure")
		}
		nrec = newObj(
			"codonId", rec.get("codonId"),
			"startTime", rec.get("startTime"),
			"status", "failed",
			"endTime", s.stamp(),
			"failedDuring", from,
			"exitCode", 1,
			"failureReason", reason,
			"partialCost", orDefault(rec.get("currentCost"), 0),
			"partialTokens", orDefault(rec.get("currentTokens"), zeroTokens()),
		)
		for _, k := range []string{"rigSetupCheckpoint", "claudePid", "claudeSessionId", "claudeLogPath", "previousSessionId", "loopContext", "extensionCount"} {
			if rec.has(k) {
				nrec.set(k, rec.get(k))
			}
		}
		if sha != "" {
			nrec.set("errorCheckpoint", sha)
			meta.set("checkpointSha", sha)
		}
		meta.set("exitCode", 1).set("failureReason", reason).set("failedDuring", from)
	case "skipped":
		nrec = newObj(
			"codonId", rec.get("codonId"),
			"startTime", rec.get("startTime"),
			"status", "skipped",
			"endTime", s.stamp(),
			"skippedDuring", from,
			"partialCost", orDefault(rec.get("currentCost"), 0),
			"partialTokens", orDefault(rec.get("currentTokens"), zeroTokens()),
		)
		for _, k := range []string{"rigSetupCheckpoint", "claudePid", "claudeSessionId", "claudeLogPath", "previousSessionId", "loopContext", "assistantMessageCount"} {
			if rec.has(k) {
				nrec.set(k, rec.get(k))
			}
		}
		if sha != "" {
			nrec.set("skipCheckpoint", sha)
			meta.set("checkpointSha", sha)
		}
		meta.set("skippedDuring", from)
	}
	run.get("codons").([]any)[idx] = nrec
	data := newObj("runId", s.runID, "codonId", codonID, "from", from, "to", to)
	if len(meta.keys) > 0 {
		data.set("metadata", meta)
	}
	if err := s.commit("CodonTransitioned", data); err != nil {
		return err
	}
	if !rig {
		return nil
	}
	// The rig-setup checkpoint: made after starting is on disk, recorded by
	// a later write while the codon is still starting.
	if sha := s.seal("rig-setup", codonID); sha != "" {
		nrec.set("rigSetupCheckpoint", sha)
		return s.commit("CheckpointCreated", newObj(
			"runId", s.runID, "codonId", codonID, "checkpointType", "rig-setup",
			"sha", sha, "branch", "run-"+s.runID))
	}
	return nil
}

func (s *Sim) seal(kind, codonID string) string {
	if s.sealer == nil {
		return ""
	}
	return s.sealer(kind, s.runID, codonID)
}

// open returns the codon's last non-terminal record in the current run.
func (s *Sim) open(codonID string) (*obj, int, error) {
	run, err := s.currentRun()
	if err != nil {
		return nil, 0, err
	}
	codons := run.get("codons").([]any)
	for i := len(codons) - 1; i >= 0; i-- {
		rec := codons[i].(*obj)
		if rec.str("codonId") == codonID && !isTerminal(rec.str("status")) {
			return rec, i, nil
		}
	}
	return nil, 0, fmt.Errorf("codon %s has no open record in run %s", codonID, s.runID)
}

func (s *Sim) entry(codonID string) *Entry {
	for i := range s.plan {
		if s.plan[i].CodonID == codonID {
			return &s.plan[i]
		}
	}
	return nil
}

func (s *Sim) currentRun() (*obj, error) {
	if s.state == nil || s.runID == "" {
		return nil, errors.New("no run: call StartRun first")
	}
	for _, r := range s.runs() {
		if r.str("runId") == s.runID {
			return r, nil
		}
	}
	return nil, fmt.Errorf("run %s is not in the state", s.runID)
}

func (s *Sim) runs() []*obj {
	if s.state == nil {
		return nil
	}
	var out []*obj
	for _, r := range s.state.get("runs").([]any) {
		out = append(out, r.(*obj))
	}
	return out
}

func (s *Sim) planJSON() []any {
	out := []any{}
	for _, e := range s.plan {
		out = append(out, e.json())
	}
	return out
}

func isTerminal(status string) bool {
	return status == "completed" || status == "failed" || status == "skipped"
}

func zeroTokens() *obj {
	return newObj("inputTokens", 0, "outputTokens", 0, "cacheCreationTokens", 0, "cacheReadTokens", 0)
}

func orDefault(v, def any) any {
	if v == nil {
		return def
	}
	return v
}

// ---- the work tree ----

// WriteFile writes agentRoot/<rel> (slash path), creating folders.
func (s *Sim) WriteFile(rel, content string) error {
	return s.do(func() error { return s.writeFile(rel, content) })
}

// EditFile replaces the first occurrence of old by new in agentRoot/<rel>,
// rewriting the file in place (as an agent's edit tool does).
func (s *Sim) EditFile(rel, old, new string) error {
	return s.do(func() error {
		p := s.path("agentRoot/" + rel)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if !bytes.Contains(b, []byte(old)) {
			return fmt.Errorf("edit %s: %q not found", rel, old)
		}
		return os.WriteFile(p, bytes.Replace(b, []byte(old), []byte(new), 1), 0o644)
	})
}

// DeleteFile removes agentRoot/<rel>.
func (s *Sim) DeleteFile(rel string) error {
	return s.do(func() error { return os.Remove(s.path("agentRoot/" + rel)) })
}

func (s *Sim) writeFile(rel, content string) error {
	p := s.path("agentRoot/" + rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, []byte(content), 0o644)
}

// ---- persistence ----

// commit saves state.json, then appends the state.transition line, in the
// runtime's order (the journal hears of a transition after it is persisted).
func (s *Sim) commit(transitionType string, data *obj) error {
	if err := s.save(); err != nil {
		return err
	}
	d := newObj("transitionType", transitionType)
	for _, k := range data.keys {
		d.set(k, data.vals[k])
	}
	return s.appendEvent("state.transition", d)
}

// save is the runtime's StateManager.save: copy state.json to state.json.bak,
// write state.json.tmp (JSON.stringify(state, null, 2)), rename it over state.json.
func (s *Sim) save() error {
	body, err := stringify(s.state, 2)
	if err != nil {
		return err
	}
	primary := s.path(StateRel)
	if old, err := os.ReadFile(primary); err == nil {
		if err := os.WriteFile(s.path(StateBackupRel), old, 0o644); err != nil {
			return err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	tmp := s.path(StateTempRel)
	if err := os.WriteFile(tmp, body, 0o644); err != nil {
		return err
	}
	if s.beforeRename != nil {
		s.beforeRename()
	}
	return os.Rename(tmp, primary)
}

func (s *Sim) appendEvent(typ string, data *obj) error {
	ev := newObj("id", s.uuid(), "timestamp", s.stamp(), "type", typ, "data", data)
	line, err := stringify(ev, 0)
	if err != nil {
		return err
	}
	return s.appendJournal(append(line, '\n'))
}

func (s *Sim) appendJournal(b []byte) error {
	f, err := os.OpenFile(s.path(JournalRel), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func (s *Sim) writeLock(pid int, heartbeat time.Time) error {
	var start, hb any = iso(s.lockStart), iso(heartbeat)
	if s.epochLock {
		start, hb = s.lockStart.UnixMilli(), heartbeat.UnixMilli()
	}
	body, err := stringify(newObj(
		"pid", pid,
		"lockId", s.lockID,
		"runId", s.runID,
		"startTime", start,
		"lastHeartbeat", hb,
		"port", s.port,
	), 2)
	if err != nil {
		return err
	}
	tmp := s.path(LockTempRel)
	if err := os.WriteFile(tmp, body, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, s.path(LockRel))
}

func (s *Sim) removeLock() error {
	err := os.Remove(s.path(LockRel))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// ---- the journal ----

// CompactJournal does what the runtime may do at the clean end of a finished
// run: events.jsonl is replaced by events.jsonl.zst, journal.meta.json and a
// cas/ folder. (The .zst is a valid zstd frame of stored blocks; the meta
// file's members are the simulator's own: docs/runtime-formats.md does not
// describe it.)
func (s *Sim) CompactJournal() error {
	return s.do(func() error {
		b, err := os.ReadFile(s.path(JournalRel))
		if err != nil {
			return err
		}
		if err := os.WriteFile(s.path(JournalZstRel), zstdRaw(b), 0o644); err != nil {
			return err
		}
		if err := os.MkdirAll(s.path(JournalCASRel), 0o755); err != nil {
			return err
		}
		lines := bytes.Count(b, []byte{'\n'})
		meta, err := stringify(newObj(
			"version", 1,
			"format", "zstd",
			"eventCount", lines,
			"uncompressedBytes", len(b),
			"compactedAt", s.stamp(),
		), 2)
		if err != nil {
			return err
		}
		if err := os.WriteFile(s.path(JournalMetaRel), meta, 0o644); err != nil {
			return err
		}
		return os.Remove(s.path(JournalRel))
	})
}

// restoreJournal brings a compacted journal back as events.jsonl (a new file).
func (s *Sim) restoreJournal() error {
	z, err := os.ReadFile(s.path(JournalZstRel))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := os.Stat(s.path(JournalRel)); err == nil {
		return nil
	}
	b, err := unzstdRaw(z)
	if err != nil {
		return err
	}
	tmp := s.path(JournalRel + ".restore")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, s.path(JournalRel)); err != nil {
		return err
	}
	for _, rel := range []string{JournalZstRel, JournalMetaRel, JournalCASRel} {
		if err := os.RemoveAll(s.path(rel)); err != nil {
			return err
		}
	}
	return nil
}

// AppendJournalRaw appends bytes to events.jsonl as they are: a torn line, garbage.
func (s *Sim) AppendJournalRaw(b []byte) error {
	return s.do(func() error { return s.appendJournal(b) })
}

// TearState leaves state.json as a non-atomic writer killed mid-write
// would: the first half of its current bytes (state.json.bak keeps the
// previous state).
func (s *Sim) TearState() error {
	return s.do(func() error {
		b, err := os.ReadFile(s.path(StateRel))
		if err != nil {
			return err
		}
		return os.WriteFile(s.path(StateRel), b[:len(b)/2], 0o644)
	})
}

// ---- ids ----

func (s *Sim) nextRunID() string {
	if len(s.runIDs) > 0 {
		id := s.runIDs[0]
		s.runIDs = s.runIDs[1:]
		return id
	}
	const b36 = "0123456789abcdefghijklmnopqrstuvwxyz"
	var suf [5]byte
	for i := range suf {
		suf[i] = b36[s.rng.IntN(36)]
	}
	return strconv.FormatInt(s.now().UnixMilli(), 10) + "-" + string(suf[:])
}

func (s *Sim) uuid() string {
	a, b := s.rng.Uint64(), s.rng.Uint64()
	return fmt.Sprintf("%08x-%04x-4%03x-%04x-%012x", a>>32, (a>>16)&0xffff, a&0xfff, 0x8000|(b>>48)&0x3fff, b&0xffffffffffff)
}
