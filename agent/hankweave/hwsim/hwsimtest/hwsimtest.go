// Package hwsimtest adapts the runtime simulator of package hwsim to tests:
// every call that fails fails the test. It imports package testing, so only
// test files may import it (deps_test.go checks that cmd/cairn does not link it).
package hwsimtest

import (
	"testing"

	"github.com/cairn-dev/cairn/agent/hankweave/hwsim"
)

// Sim is an hwsim.Sim whose errors fail the test (t.Fatal: call it from the
// test goroutine; other goroutines should use an hwsim.Sim and its errors).
type Sim struct {
	t   testing.TB
	sim *hwsim.Sim
}

// New prepares execDir for a simulated runtime that will run plan (hwsim.New).
func New(t testing.TB, execDir string, plan []hwsim.Entry, opts ...hwsim.Option) *Sim {
	t.Helper()
	sim, err := hwsim.New(execDir, plan, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return &Sim{t: t, sim: sim}
}

func (s *Sim) check(err error) {
	if err != nil {
		s.t.Helper()
		s.t.Fatal(err)
	}
}

// ExecDir is the execution directory.
func (s *Sim) ExecDir() string { return s.sim.ExecDir() }

// AgentRoot is <exec>/agentRoot.
func (s *Sim) AgentRoot() string { return s.sim.AgentRoot() }

// Path joins a slash path relative to the execution directory (hwsim.StateRel, …).
func (s *Sim) Path(rel string) string { return s.sim.Path(rel) }

// RunID is the id of the run started last ("" before StartRun).
func (s *Sim) RunID() string { return s.sim.RunID() }

// PID is the pid the runtime writes to its lock and to serverPid.
func (s *Sim) PID() int { return s.sim.PID() }

// Plan is the execution plan the runtime writes.
func (s *Sim) Plan() []hwsim.Entry { return s.sim.Plan() }

// StartRun starts the runtime and returns the id of the run now current (hwsim.Sim.StartRun).
func (s *Sim) StartRun() string {
	s.t.Helper()
	id, err := s.sim.StartRun()
	s.check(err)
	return id
}

// Shutdown is the runtime's own stop (hwsim.Sim.Shutdown).
func (s *Sim) Shutdown() { s.t.Helper(); s.check(s.sim.Shutdown()) }

// FailRun stops after a failure (hwsim.Sim.FailRun).
func (s *Sim) FailRun() { s.t.Helper(); s.check(s.sim.FailRun()) }

// Stop is a forced shutdown (hwsim.Sim.Stop).
func (s *Sim) Stop() { s.t.Helper(); s.check(s.sim.Stop()) }

// Crash leaves everything as a killed runtime does (hwsim.Sim.Crash).
func (s *Sim) Crash() { s.t.Helper(); s.check(s.sim.Crash()) }

// Hang leaves a live runtime that stopped heartbeating (hwsim.Sim.Hang).
func (s *Sim) Hang() { s.t.Helper(); s.check(s.sim.Hang()) }

// Heartbeat rewrites runtime.lock with lastHeartbeat = now (hwsim.Sim.Heartbeat).
func (s *Sim) Heartbeat() { s.t.Helper(); s.check(s.sim.Heartbeat()) }

// SetPlan replaces the execution plan (hwsim.Sim.SetPlan).
func (s *Sim) SetPlan(plan []hwsim.Entry) { s.t.Helper(); s.check(s.sim.SetPlan(plan)) }

// BeginCodon appends a record in status preparing (hwsim.Sim.BeginCodon).
func (s *Sim) BeginCodon(codonID string) { s.t.Helper(); s.check(s.sim.BeginCodon(codonID)) }

// StartCodon begins the codon and moves it to running (hwsim.Sim.StartCodon).
func (s *Sim) StartCodon(codonID string) { s.t.Helper(); s.check(s.sim.StartCodon(codonID)) }

// Advance moves the codon's open record one transition (hwsim.Sim.Advance).
func (s *Sim) Advance(codonID, to string) { s.t.Helper(); s.check(s.sim.Advance(codonID, to)) }

// CompleteCodon moves the codon's open record to completed (hwsim.Sim.CompleteCodon).
func (s *Sim) CompleteCodon(codonID string) { s.t.Helper(); s.check(s.sim.CompleteCodon(codonID)) }

// FailCodon fails the codon's open record (hwsim.Sim.FailCodon).
func (s *Sim) FailCodon(codonID, message string, retriable bool) {
	s.t.Helper()
	s.check(s.sim.FailCodon(codonID, message, retriable))
}

// SkipCodon skips the codon (hwsim.Sim.SkipCodon).
func (s *Sim) SkipCodon(codonID string) { s.t.Helper(); s.check(s.sim.SkipCodon(codonID)) }

// WriteFile writes agentRoot/<rel> (hwsim.Sim.WriteFile).
func (s *Sim) WriteFile(rel, content string) { s.t.Helper(); s.check(s.sim.WriteFile(rel, content)) }

// EditFile replaces the first occurrence of old by new in agentRoot/<rel> (hwsim.Sim.EditFile).
func (s *Sim) EditFile(rel, old, new string) { s.t.Helper(); s.check(s.sim.EditFile(rel, old, new)) }

// DeleteFile removes agentRoot/<rel> (hwsim.Sim.DeleteFile).
func (s *Sim) DeleteFile(rel string) { s.t.Helper(); s.check(s.sim.DeleteFile(rel)) }

// CompactJournal compacts the journal as the runtime may at a run's end (hwsim.Sim.CompactJournal).
func (s *Sim) CompactJournal() { s.t.Helper(); s.check(s.sim.CompactJournal()) }

// AppendJournalRaw appends bytes to events.jsonl as they are (hwsim.Sim.AppendJournalRaw).
func (s *Sim) AppendJournalRaw(b []byte) { s.t.Helper(); s.check(s.sim.AppendJournalRaw(b)) }

// TearState leaves state.json torn in half (hwsim.Sim.TearState).
func (s *Sim) TearState() { s.t.Helper(); s.check(s.sim.TearState()) }
