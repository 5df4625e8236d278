package hankweave

import (
	"strconv"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// Kind is the codon lifecycle status a checkpoint is sealed for: the
// lifecycle kinds of restore/ckpt.
type Kind = ckpt.Kind

const (
	KindRigSetup  = ckpt.KindRigSetup
	KindCompleted = ckpt.KindCompleted
	KindError     = ckpt.KindError
	KindSkipped   = ckpt.KindSkipped
	KindExit      = ckpt.KindExit
)

// Marker is one lifecycle checkpoint that the state on disk implies.
type Marker struct {
	Kind      Kind
	RunID     string
	Branch    string // the run's store branch, run-<runId>
	CodonID   string // as in the record: "review#1" for a loop iteration
	CodonName string // from the plan entry; the codon id when the plan has none
	// Attempt is the index of this record among the run's records with the
	// same codonId (0 for the first, n for the n-th retry).
	Attempt int
	// Status is the record's status when the marker was derived.
	Status string
	// RecordedSHA is the checkpoint the runtime sealed itself for this event
	// (rigSetupCheckpoint, completionCheckpoint, errorCheckpoint or
	// skipCheckpoint) when it is a full hex SHA; empty otherwise.
	RecordedSHA string
	// Patterns is the union of checkpointedFiles of every plan entry up to and
	// including this codon's, in plan order, first occurrence kept. When the
	// codon has no plan entry (InPlan false) it is the union over the whole
	// plan, and nil when the plan is empty (the store's defaults then apply).
	Patterns []string
	InPlan   bool
	// StartTime and EndTime are the record's; EndTime is zero but for terminal records.
	StartTime time.Time
	EndTime   time.Time
	// Stopped is, for an exit marker, when the runtime ended the run (the
	// run's endTime); zero while the run is still marked running.
	Stopped time.Time
}

// TimeResolution is the precision of the runtime's timestamps: ISO strings
// with milliseconds.
const TimeResolution = time.Millisecond

// EndedBefore reports whether a file time t is provably later than the
// marker's endTime, compared at the runtime's resolution: t must fall in a
// later millisecond. A file time in the marker's own millisecond may be
// before or after it, so it is not.
func (m Marker) EndedBefore(t time.Time) bool {
	if m.EndTime.IsZero() {
		return false
	}
	return !t.Before(m.EndTime.Truncate(TimeResolution).Add(TimeResolution))
}

// Key identifies the marker across restarts and rereads of the same state:
// "<runId>/<codonId>/<attempt>/<kind>". Run ids and kinds hold no '/', so
// the key splits unambiguously from both ends even if a codon id does.
func (m Marker) Key() string {
	return m.RunID + "/" + m.CodonID + "/" + strconv.Itoa(m.Attempt) + "/" + string(m.Kind)
}

// Duration is EndTime − StartTime for a terminal marker, or 0.
func (m Marker) Duration() time.Duration {
	if m.StartTime.IsZero() || m.EndTime.IsZero() || m.EndTime.Before(m.StartTime) {
		return 0
	}
	return m.EndTime.Sub(m.StartTime)
}

// Due lists every lifecycle checkpoint the state implies, oldest run first,
// records in order, a record's rig-setup before its terminal marker. It is
// stateless: the daemon compares the keys with its ledger, so a restart seals
// exactly what is missing.
//
//   - rig-setup: the record got past preparing — the runtime runs rig setup
//     while preparing; a runtime that checkpoints by itself records
//     rigSetupCheckpoint in a later write, the record still starting — and
//     its plan entry has a non-empty rigSetup (or the runtime recorded a
//     rigSetupCheckpoint). A record that failed or was skipped during
//     preparing did not finish its rig setup and gets none; one that failed
//     during starting or later did.
//   - completed / error / skipped: the record's status is completed / failed / skipped.
//
// The exit marker depends on the lock as well: see ExitDue.
func Due(st *State) []Marker {
	if st == nil {
		return nil
	}
	pl := newPlanIndex(st)
	var out []Marker
	for i := len(st.Runs) - 1; i >= 0; i-- {
		run := &st.Runs[i]
		if run.RunID == "" {
			continue
		}
		attempts := make(map[string]int)
		for k := range run.Codons {
			rec := &run.Codons[k]
			if rec.CodonID == "" {
				continue
			}
			attempt := attempts[rec.CodonID]
			attempts[rec.CodonID]++

			if rigSetupDone(rec) && (pl.hasRigSetup(rec.CodonID) || fullSHA(rec.RigSetupSHA) != "") {
				m := pl.marker(run, rec, attempt, KindRigSetup)
				m.RecordedSHA = fullSHA(rec.RigSetupSHA)
				m.EndTime = time.Time{}
				out = append(out, m)
			}
			var kind Kind
			var sha string
			switch rec.Status {
			case StatusCompleted:
				kind, sha = KindCompleted, rec.CompletionSHA
			case StatusFailed:
				kind, sha = KindError, rec.ErrorSHA
			case StatusSkipped:
				kind, sha = KindSkipped, rec.SkipSHA
			default:
				continue
			}
			m := pl.marker(run, rec, attempt, kind)
			m.RecordedSHA = fullSHA(sha)
			out = append(out, m)
		}
	}
	return out
}

// ExitDue returns the exit checkpoint the state implies once the runtime has
// stopped (lockAlive false: runtime.lock removed, or stale by pid or
// heartbeat): a record the runtime left unfinished (see Interrupted). It
// returns nil otherwise. The runtime never records an exit SHA, so
// RecordedSHA is empty; Stopped is the run's endTime when the runtime ended
// the run (its shutdown), zero while the run is still marked running (a
// crash, a hang or a forced stop).
//
// Read the lock before the state: a runtime that is just starting writes its
// lock before its first transition, so a state with a running codon and no
// lock is a stopped runtime, not one that has yet to lock.
func ExitDue(st *State, lockAlive bool) *Marker {
	if lockAlive {
		return nil
	}
	run, rec, attempt := Interrupted(st)
	if run == nil {
		return nil
	}
	m := newPlanIndex(st).marker(run, rec, attempt, KindExit)
	m.EndTime = time.Time{}
	if run.Status != RunRunning {
		m.Stopped, _ = ParseTimeString(run.EndTime)
	}
	return &m
}

// Active returns the record of the current run that is not terminal (the
// codon the runtime is running, or was running when it died), with its
// attempt index; nils when there is none or the run completed. The current
// run is currentRunId's, or the newest run while its status is running.
func Active(st *State) (run *Run, rec *CodonExecution, attempt int) {
	if st == nil {
		return nil, nil, 0
	}
	run = st.CurrentRun()
	if run == nil && len(st.Runs) > 0 && st.Runs[0].Status == RunRunning {
		run = &st.Runs[0]
	}
	if run == nil || run.RunID == "" || run.Status == RunCompleted {
		return nil, nil, 0
	}
	return openRecord(run)
}

// Interrupted returns the record a stopped runtime left unfinished: Active's,
// or else that of the newest run when the runtime ended it without completing
// it. The runtime's own shutdown writes RunFailed (status failed, endTime,
// currentRunId null) before it removes its lock and leaves the interrupted
// record as it was, so by then that run is no longer current.
func Interrupted(st *State) (run *Run, rec *CodonExecution, attempt int) {
	if run, rec, attempt = Active(st); run != nil {
		return run, rec, attempt
	}
	if st == nil || len(st.Runs) == 0 || st.CurrentRunID != nil {
		return nil, nil, 0
	}
	run = &st.Runs[0]
	if run.RunID == "" || run.Status == RunRunning || run.Status == RunCompleted {
		return nil, nil, 0
	}
	return openRecord(run)
}

// openRecord is the run's newest record that is not terminal, with its attempt index.
func openRecord(run *Run) (*Run, *CodonExecution, int) {
	for k := len(run.Codons) - 1; k >= 0; k-- {
		r := &run.Codons[k]
		if r.CodonID == "" || IsTerminal(r.Status) {
			continue
		}
		n := 0
		for j := 0; j < k; j++ {
			if run.Codons[j].CodonID == r.CodonID {
				n++
			}
		}
		return run, r, n
	}
	return nil, nil, 0
}

// RuntimeCheckpoints says what a run's records tell of a runtime that
// checkpoints by itself: yes when any record carries a checkpoint SHA of its
// own; no (known) when a codon completed without one, which such a runtime
// never does; unknown (known false) otherwise.
func RuntimeCheckpoints(run *Run) (yes, known bool) {
	completed := false
	for k := range run.Codons {
		r := &run.Codons[k]
		for _, sha := range []string{r.RigSetupSHA, r.CompletionSHA, r.ErrorSHA, r.SkipSHA} {
			if fullSHA(sha) != "" {
				return true, true
			}
		}
		completed = completed || r.Status == StatusCompleted
	}
	return false, completed
}

// rigSetupDone reports whether the record finished its rig setup.
func rigSetupDone(rec *CodonExecution) bool {
	switch rec.Status {
	case StatusPreparing:
		return false
	case StatusStarting, StatusInitializing, StatusRunning, StatusCompletingSentinels, StatusCompleted:
		return true
	case StatusFailed:
		if rec.FailedDuring != "" {
			return rec.FailedDuring != StatusPreparing
		}
	case StatusSkipped:
		if rec.SkippedDuring != "" {
			return rec.SkippedDuring != StatusPreparing
		}
	}
	// An unknown status, or a terminal record that does not say when it
	// ended: only traces of a later stage tell.
	return rec.RigSetupSHA != "" || rec.ClaudeLogPath != "" || rec.ClaudePID != nil
}

// planIndex answers plan questions for one state.
type planIndex struct {
	st    *State
	index map[string]int
	cum   [][]string // cum[i]: union of checkpointedFiles of entries 0..i
}

func newPlanIndex(st *State) *planIndex {
	p := &planIndex{st: st, index: make(map[string]int, len(st.ExecutionPlan))}
	seen := make(map[string]bool)
	var acc []string
	for i := range st.ExecutionPlan {
		e := &st.ExecutionPlan[i]
		if _, dup := p.index[e.CodonID]; !dup {
			p.index[e.CodonID] = i
		}
		for _, pat := range e.Codon.CheckpointedFiles {
			if !seen[pat] {
				seen[pat] = true
				acc = append(acc, pat)
			}
		}
		p.cum = append(p.cum, acc[:len(acc):len(acc)])
	}
	return p
}

func (p *planIndex) entry(codonID string) *PlanEntry {
	if i, ok := p.index[codonID]; ok {
		return &p.st.ExecutionPlan[i]
	}
	return nil
}

func (p *planIndex) hasRigSetup(codonID string) bool {
	e := p.entry(codonID)
	return e != nil && len(e.Codon.RigSetup) > 0
}

func (p *planIndex) marker(run *Run, rec *CodonExecution, attempt int, kind Kind) Marker {
	m := Marker{
		Kind:      kind,
		RunID:     run.RunID,
		Branch:    run.Branch(),
		CodonID:   rec.CodonID,
		CodonName: rec.CodonID,
		Attempt:   attempt,
		Status:    rec.Status,
	}
	m.StartTime, _ = ParseTimeString(rec.StartTime)
	m.EndTime, _ = ParseTimeString(rec.EndTime)
	if i, ok := p.index[rec.CodonID]; ok {
		e := &p.st.ExecutionPlan[i]
		m.InPlan = true
		switch {
		case e.Codon.Name != "":
			m.CodonName = e.Codon.Name
		case e.Codon.ID != "":
			m.CodonName = e.Codon.ID
		}
		m.Patterns = append([]string{}, p.cum[i]...)
	} else if n := len(p.cum); n > 0 {
		m.Patterns = append([]string{}, p.cum[n-1]...)
	}
	return m
}

// fullSHA returns s lower-cased when it is a full hex object name (40 or 64
// digits) and "" otherwise: the runtime writes "" for a checkpoint it did not make.
func fullSHA(s string) string {
	s = strings.TrimSpace(s)
	if len(s) != 40 && len(s) != 64 {
		return ""
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return ""
		}
	}
	return strings.ToLower(s)
}
