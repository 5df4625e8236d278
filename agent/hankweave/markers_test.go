package hankweave

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/agent/hankweave/hwsim"
	"github.com/cairn-dev/cairn/agent/hankweave/hwsim/hwsimtest"
)

var rig = []hwsim.RigStep{hwsim.Copy("./templates", "src", map[string]string{"src/main.go": "package main\n"})}

// marker renders what a test checks of a Marker on one line.
func (m Marker) line() string {
	s := fmt.Sprintf("%s %s/%d %q %s", m.Kind, m.CodonID, m.Attempt, m.CodonName, strings.Join(m.Patterns, "|"))
	if m.RecordedSHA != "" {
		s += " sha=" + m.RecordedSHA[:7]
	}
	if !m.InPlan {
		s += " (not in plan)"
	}
	return s
}

func TestDue(t *testing.T) {
	cases := []struct {
		name string
		plan []hwsim.Entry
		opts []hwsim.Option
		play func(s *hwsimtest.Sim)
		want []string
		exit string // ExitDue(st, false) as a line; "" = nil
	}{
		{
			name: "completed, rig setup on the first codon only",
			plan: hwsim.Plan(
				hwsim.Codon{ID: "a", Name: "Write A", Files: []string{"a.md"}, RigSetup: rig},
				hwsim.Codon{ID: "b", Name: "Write B", Files: []string{"b.md", "!tmp/**"}},
			),
			play: func(s *hwsimtest.Sim) {
				s.StartRun()
				s.StartCodon("a")
				s.WriteFile("a.md", "a")
				s.CompleteCodon("a")
				s.StartCodon("b")
				s.WriteFile("b.md", "b")
				s.CompleteCodon("b")
				s.Shutdown()
			},
			want: []string{
				`rig-setup a/0 "Write A" a.md`,
				`completed a/0 "Write A" a.md`,
				`completed b/0 "Write B" a.md|b.md|!tmp/**`,
			},
		},
		{
			name: "rig setup due as soon as the codon is starting",
			plan: hwsim.Plan(hwsim.Codon{ID: "a", Files: []string{"a.md"}, RigSetup: rig}),
			play: func(s *hwsimtest.Sim) { s.StartRun(); s.BeginCodon("a"); s.Advance("a", "starting") },
			want: []string{`rig-setup a/0 "a" a.md`},
			exit: `exit a/0 "a" a.md`,
		},
		{
			name: "no rig setup while preparing",
			plan: hwsim.Plan(hwsim.Codon{ID: "a", Files: []string{"a.md"}, RigSetup: rig}),
			play: func(s *hwsimtest.Sim) { s.StartRun(); s.BeginCodon("a") },
			want: nil,
			exit: `exit a/0 "a" a.md`,
		},
		{
			name: "failed, retried, completed",
			plan: hwsim.Plan(hwsim.Codon{ID: "a", Files: []string{"a.md"}, RigSetup: rig}),
			play: func(s *hwsimtest.Sim) {
				s.StartRun()
				s.StartCodon("a")
				s.FailCodon("a", "overloaded", true)
				s.StartCodon("a")
				s.CompleteCodon("a")
			},
			want: []string{
				`rig-setup a/0 "a" a.md`,
				`error a/0 "a" a.md`,
				`rig-setup a/1 "a" a.md`,
				`completed a/1 "a" a.md`,
			},
		},
		{
			name: "failed during preparing: its rig setup did not finish",
			plan: hwsim.Plan(hwsim.Codon{ID: "a", Files: []string{"a.md"}, RigSetup: rig}),
			play: func(s *hwsimtest.Sim) {
				s.StartRun()
				s.BeginCodon("a")
				s.FailCodon("a", "copy failed", false)
				s.FailRun()
			},
			want: []string{`error a/0 "a" a.md`},
		},
		{
			name: "failed during starting: its rig setup ran",
			plan: hwsim.Plan(hwsim.Codon{ID: "a", Files: []string{"a.md"}, RigSetup: rig}),
			play: func(s *hwsimtest.Sim) {
				s.StartRun()
				s.BeginCodon("a")
				s.Advance("a", "starting")
				s.FailCodon("a", "claude not found", false)
			},
			want: []string{`rig-setup a/0 "a" a.md`, `error a/0 "a" a.md`},
		},
		{
			name: "skipped before and after rig setup",
			plan: hwsim.Plan(
				hwsim.Codon{ID: "a", Files: []string{"a.md"}, RigSetup: rig},
				hwsim.Codon{ID: "b", Files: []string{"b.md"}, RigSetup: rig},
			),
			play: func(s *hwsimtest.Sim) {
				s.StartRun()
				s.SkipCodon("a") // skipped while preparing
				s.StartCodon("b")
				s.SkipCodon("b") // skipped while running
			},
			want: []string{
				`skipped a/0 "a" a.md`,
				`rig-setup b/0 "b" a.md|b.md`,
				`skipped b/0 "b" a.md|b.md`,
			},
		},
		{
			name: "loops: iteration ids, names and patterns from the plan",
			plan: hwsim.Plan(
				hwsim.Codon{ID: "draft", Name: "Draft", Files: []string{"draft.md"}},
				hwsim.Loop("review-loop", 2,
					hwsim.Codon{ID: "review", Name: "Review", Files: []string{"review.md"}},
					hwsim.Codon{ID: "fix", Name: "Fix", Files: []string{"draft.md", "fixes/**"}}),
			),
			play: func(s *hwsimtest.Sim) {
				s.StartRun()
				for _, id := range []string{"draft", "review#0", "fix#0", "review#1"} {
					s.StartCodon(id)
					s.CompleteCodon(id)
				}
				s.StartCodon("fix#1")
				s.Stop() // interrupted in the second iteration
			},
			want: []string{
				`completed draft/0 "Draft" draft.md`,
				`completed review#0/0 "Review" draft.md|review.md`,
				`completed fix#0/0 "Fix" draft.md|review.md|fixes/**`,
				`completed review#1/0 "Review" draft.md|review.md|fixes/**`,
			},
			exit: `exit fix#1/0 "Fix" draft.md|review.md|fixes/**`,
		},
		{
			name: "the runtime's own checkpoints are adopted, empty ones are not",
			plan: hwsim.Plan(hwsim.Codon{ID: "a", Files: []string{"a.md"}, RigSetup: rig}, hwsim.Codon{ID: "b"}),
			opts: []hwsim.Option{hwsim.WithRuntimeCheckpoints(func(kind, run, codon string) string {
				if codon == "b" {
					return ""
				}
				return strings.Repeat(map[string]string{"rig-setup": "1", "completed": "2"}[kind], 40)
			})},
			play: func(s *hwsimtest.Sim) {
				s.StartRun()
				s.StartCodon("a")
				s.CompleteCodon("a")
				s.StartCodon("b")
				s.CompleteCodon("b")
			},
			want: []string{
				`rig-setup a/0 "a" a.md sha=1111111`,
				`completed a/0 "a" a.md sha=2222222`,
				`completed b/0 "b" a.md`,
			},
		},
		{
			name: "crash, then the runtime restarts: exit before, error after",
			plan: hwsim.Plan(hwsim.Codon{ID: "a", Files: []string{"a.md"}}),
			opts: []hwsim.Option{hwsim.WithRunIDs("1000-aaaaa", "2000-bbbbb")},
			play: func(s *hwsimtest.Sim) {
				s.StartRun()
				s.StartCodon("a")
				s.Crash()
				s.StartRun() // marks the first run crashed, its open codon failed
				s.StartCodon("a")
			},
			want: []string{`error a/0 "a" a.md`},
			exit: `exit a/0 "a" a.md`, // the new run's codon, once its runtime is gone too
		},
		{
			name: "the runtime's shutdown with a codon unfinished: exit of the failed run",
			plan: hwsim.Plan(hwsim.Codon{ID: "a", Files: []string{"a.md"}}, hwsim.Codon{ID: "b", Files: []string{"b.md"}}),
			play: func(s *hwsimtest.Sim) {
				s.StartRun()
				s.StartCodon("a")
				s.CompleteCodon("a")
				s.StartCodon("b")
				s.Shutdown() // RunFailed, currentRunId null, b left running
			},
			want: []string{`completed a/0 "a" a.md`},
			exit: `exit b/0 "b" a.md|b.md`,
		},
		{
			name: "a later run that completed owes no exit for an older one",
			plan: hwsim.Plan(hwsim.Codon{ID: "a", Files: []string{"a.md"}}),
			play: func(s *hwsimtest.Sim) {
				s.StartRun()
				s.StartCodon("a")
				s.Shutdown() // the first run failed with a running
				s.StartRun()
				s.SkipCodon("a")
				s.Shutdown()
			},
			want: []string{`skipped a/0 "a" a.md`},
		},
		{
			name: "a codon the plan does not know",
			plan: hwsim.Plan(hwsim.Codon{ID: "a", Files: []string{"a.md"}}, hwsim.Codon{ID: "b", Files: []string{"b.md"}}),
			play: func(s *hwsimtest.Sim) {
				s.StartRun()
				s.StartCodon("a")
				s.CompleteCodon("a")
				s.SetPlan(hwsim.Plan(hwsim.Codon{ID: "b", Files: []string{"b.md"}}))
			},
			want: []string{`completed a/0 "a" b.md (not in plan)`},
		},
		{
			name: "nothing started",
			plan: hwsim.Plan(hwsim.Codon{ID: "a"}),
			play: func(s *hwsimtest.Sim) { s.StartRun() },
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			sim := hwsimtest.New(t, dir, tc.plan, tc.opts...)
			tc.play(sim)
			st, err := ReadState(dir)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range Due(st) {
				got = append(got, m.line())
				if m.RunID == "" || m.Branch != "run-"+m.RunID || m.StartTime.IsZero() {
					t.Errorf("marker %+v", m)
				}
				if (m.Kind == KindRigSetup) != m.EndTime.IsZero() {
					t.Errorf("end time of %s: %v", m.Key(), m.EndTime)
				}
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("Due:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			exit := ""
			if m := ExitDue(st, false); m != nil {
				exit = m.line()
				if m.Kind != KindExit || m.RecordedSHA != "" {
					t.Errorf("exit marker %+v", m)
				}
			}
			if exit != tc.exit {
				t.Fatalf("ExitDue = %q, want %q", exit, tc.exit)
			}
			if m := ExitDue(st, true); m != nil {
				t.Fatalf("ExitDue with a live lock = %+v", m)
			}
		})
	}
}

// Markers only accumulate: every key due at one moment is due, unchanged, at
// every later moment. This is what lets the daemon reconcile after a restart
// by comparing keys with its ledger.
func TestDueKeysAreStable(t *testing.T) {
	dir := t.TempDir()
	sim := hwsimtest.New(t, dir, hwsim.Plan(
		hwsim.Codon{ID: "a", Files: []string{"a.md"}, RigSetup: rig},
		hwsim.Loop("l", 2, hwsim.Codon{ID: "r", Files: []string{"r.md"}, RigSetup: rig}),
		hwsim.Codon{ID: "z", Files: []string{"z.md"}},
	))
	steps := []func(){
		func() { sim.StartRun() },
		func() { sim.BeginCodon("a") },
		func() { sim.Advance("a", "starting") },
		func() { sim.Advance("a", "initializing") },
		func() { sim.Advance("a", "running") },
		func() { sim.FailCodon("a", "x", true) },
		func() { sim.StartCodon("a") },
		func() { sim.CompleteCodon("a") },
		func() { sim.StartCodon("r#0") },
		func() { sim.SkipCodon("r#0") },
		func() { sim.StartCodon("r#1") },
		func() { sim.Crash() },
		func() { sim.StartRun() },
		func() { sim.StartCodon("z") },
		func() { sim.CompleteCodon("z") },
		func() { sim.Shutdown() },
	}
	seen := map[string]Marker{}
	for i, step := range steps {
		step()
		st, err := ReadState(dir)
		if err != nil {
			t.Fatal(err)
		}
		now := map[string]Marker{}
		for _, m := range Due(st) {
			if _, dup := now[m.Key()]; dup {
				t.Fatalf("step %d: key %s twice", i, m.Key())
			}
			now[m.Key()] = m
		}
		for k, old := range seen {
			m, ok := now[k]
			if !ok {
				t.Fatalf("step %d: %s no longer due", i, k)
			}
			if m.line() != old.line() || !m.EndTime.Equal(old.EndTime) {
				t.Fatalf("step %d: %s changed: %s → %s", i, k, old.line(), m.line())
			}
		}
		seen = now
	}
	if len(seen) != 9 { // a: rig,err,rig,done; r#0: rig,skip; r#1: rig,err(crash); z: done
		for k := range seen {
			t.Log(k)
		}
		t.Fatalf("%d markers at the end", len(seen))
	}
}

func TestMarkerKeyAndDuration(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := Marker{Kind: KindCompleted, RunID: "1-abcde", CodonID: "review#2", Attempt: 1, StartTime: start, EndTime: start.Add(1500 * time.Millisecond)}
	if m.Key() != "1-abcde/review#2/1/completed" {
		t.Fatal(m.Key())
	}
	if m.Duration() != 1500*time.Millisecond {
		t.Fatal(m.Duration())
	}
	m.EndTime = time.Time{}
	if m.Duration() != 0 {
		t.Fatal(m.Duration())
	}
}

func TestFullSHA(t *testing.T) {
	for in, want := range map[string]string{
		"":                            "",
		"abc":                         "",
		strings.Repeat("A", 40):       strings.Repeat("a", 40),
		strings.Repeat("0", 64):       strings.Repeat("0", 64),
		strings.Repeat("g", 40):       "",
		" " + strings.Repeat("1", 40): strings.Repeat("1", 40),
	} {
		if got := fullSHA(in); got != want {
			t.Errorf("fullSHA(%q) = %q", in, got)
		}
	}
}

func TestDueNilAndEmpty(t *testing.T) {
	if Due(nil) != nil || ExitDue(nil, false) != nil {
		t.Fatal("nil state")
	}
	st, err := ParseState([]byte(`{"runs":[{"runId":"r","status":"running","codons":[{"codonId":"a","status":"running"}]}],"currentRunId":null,"executionPlan":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	m := ExitDue(st, false)
	if m == nil || m.CodonID != "a" || m.Patterns != nil || m.InPlan {
		t.Fatalf("exit on newest running run without currentRunId: %+v", m)
	}
}

// The exit marker of a run the runtime ended says when (Stopped, the run's
// endTime, which places it against the workspace's first checkpoint); one
// of a run still marked running does not.
func TestExitDueStopped(t *testing.T) {
	plan := hwsim.Plan(hwsim.Codon{ID: "a", Files: []string{"a.md"}})
	for _, tc := range []struct {
		name    string
		stop    func(s *hwsimtest.Sim)
		stopped bool
	}{
		{"shutdown", (*hwsimtest.Sim).Shutdown, true},
		{"failed", (*hwsimtest.Sim).FailRun, true},
		{"forced", (*hwsimtest.Sim).Stop, false},
		{"crash", (*hwsimtest.Sim).Crash, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := hwsimtest.New(t, dir, plan)
			s.StartRun()
			s.StartCodon("a")
			tc.stop(s)
			st, err := ReadState(dir)
			if err != nil {
				t.Fatal(err)
			}
			m := ExitDue(st, false)
			if m == nil || m.CodonID != "a" {
				t.Fatalf("ExitDue = %+v", m)
			}
			end, _ := ParseTimeString(st.Runs[0].EndTime)
			if tc.stopped != !m.Stopped.IsZero() || !m.Stopped.Equal(end) || !m.EndTime.IsZero() {
				t.Fatalf("Stopped %v EndTime %v, run endTime %q", m.Stopped, m.EndTime, st.Runs[0].EndTime)
			}
			if run, rec, _ := Active(st); tc.stopped && (run != nil || rec != nil) {
				t.Fatalf("Active on a run the runtime ended: %s", rec.CodonID)
			}
		})
	}
}

// File times are compared with the marker's endTime at the runtime's own
// resolution: only a later millisecond is provably after it.
func TestMarkerEndedBefore(t *testing.T) {
	end, ok := ParseTimeString("2026-01-01T00:00:00.123Z")
	if !ok {
		t.Fatal("unparsable")
	}
	m := Marker{Kind: KindCompleted, EndTime: end}
	at := func(ns int) time.Time { return time.Date(2026, 1, 1, 0, 0, 0, ns, time.UTC) }
	for _, c := range []struct {
		t    time.Time
		want bool
	}{
		{at(122_999_999), false},
		{at(123_000_000), false},
		{at(123_456_789), false}, // the marker's own millisecond: before or after it, nobody knows
		{at(123_999_999), false},
		{at(124_000_000), true},
		{at(900_000_000), true},
	} {
		if got := m.EndedBefore(c.t); got != c.want {
			t.Errorf("EndedBefore(%s) = %v, want %v", c.t.Format("05.000000000"), got, c.want)
		}
	}
	if (Marker{Kind: KindRigSetup}).EndedBefore(at(0).Add(time.Hour)) {
		t.Error("a marker without an endTime is before nothing")
	}
}

func TestRuntimeCheckpoints(t *testing.T) {
	sha := strings.Repeat("a", 40)
	for _, c := range []struct {
		name      string
		codons    []CodonExecution
		yes, know bool
	}{
		{"nothing yet", []CodonExecution{{CodonID: "a", Status: StatusStarting}}, false, false},
		{"a rig-setup sha", []CodonExecution{{CodonID: "a", Status: StatusStarting, RigSetupSHA: sha}}, true, true},
		{"a skip sha", []CodonExecution{{CodonID: "a", Status: StatusSkipped, SkipSHA: strings.ToUpper(sha)}}, true, true},
		{"completed without one", []CodonExecution{{CodonID: "a", Status: StatusCompleted, CompletionSHA: ""}}, false, true},
		{"failed and skipped without one", []CodonExecution{{CodonID: "a", Status: StatusFailed}, {CodonID: "b", Status: StatusSkipped}}, false, false},
		{"not a sha", []CodonExecution{{CodonID: "a", Status: StatusRunning, RigSetupSHA: "abc"}}, false, false},
	} {
		yes, known := RuntimeCheckpoints(&Run{RunID: "r", Codons: c.codons})
		if yes != c.yes || known != c.know {
			t.Errorf("%s: (%v, %v), want (%v, %v)", c.name, yes, known, c.yes, c.know)
		}
	}
}
