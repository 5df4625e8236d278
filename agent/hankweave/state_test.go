package hankweave

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/agent/hankweave/hwsim"
	"github.com/cairn-dev/cairn/agent/hankweave/hwsim/hwsimtest"
)

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A state the runtime wrote comes back byte for byte: unknown members, their
// order, null members, empty strings, numbers like 1e-7 and unescaped <, >, &.
func TestParseStateRoundTripIsExact(t *testing.T) {
	in := readTestdata(t, "state-runtime.json")
	st, err := ParseState(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := st.MarshalIndent()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(in, out) {
		t.Fatalf("round trip differs:\n%s", firstDiff(in, out))
	}

	// The typed view.
	if got := len(st.Runs); got != 2 {
		t.Fatalf("runs = %d", got)
	}
	r := st.CurrentRun()
	if r == nil || r.RunID != "1753110463686-yayna" || r.Branch() != "run-1753110463686-yayna" {
		t.Fatalf("current run = %+v", r)
	}
	if sc := r.StartingConditions; sc.Type != "continuation" || sc.Reason != "rollback" || sc.Source == nil ||
		sc.Source.AfterCodon != nil || sc.Source.CheckpointSHA != "1f9624104db901284fdab5dbcb898415c92a88bd" {
		t.Fatalf("startingConditions = %+v", sc)
	}
	c := r.Codons[1]
	if c.CodonID != "review#0" || c.Status != StatusFailed || c.FailedDuring != "running" ||
		c.FailureReason == nil || !c.FailureReason.Retriable || c.ExitCode == nil || *c.ExitCode != 1 ||
		c.LoopContext == nil || c.LoopContext.LoopID != "review-loop" || c.ErrorSHA == "" {
		t.Fatalf("record 1 = %+v", c)
	}
	if r.Codons[2].ExitCode != nil {
		t.Fatalf("exitCode null read as %v", *r.Codons[2].ExitCode)
	}
	if v, ok := r.Codons[0].Raw.Get("sentinels"); !ok || !bytes.Contains(v, []byte("1e-7")) {
		t.Fatalf("unknown member sentinels not kept: %s", v)
	}
	if e := st.ExecutionPlan[1]; e.Codon.Name != "Review" || len(e.Codon.CheckpointedFiles) != 2 || e.LoopContext == nil {
		t.Fatalf("plan entry = %+v", e)
	}
	if st.InitialCheckpoint != "4b825dc642cb6eb9a060e54bf8d69288fbee4904" {
		t.Fatalf("initialCheckpoint = %q", st.InitialCheckpoint)
	}
}

// Changing known fields rewrites only them: the rest keeps its bytes and order.
func TestStateEditKeepsEverythingElse(t *testing.T) {
	in := readTestdata(t, "state-runtime.json")
	st, err := ParseState(in)
	if err != nil {
		t.Fatal(err)
	}
	// What a rollback does: the abandoned run completed, a new run first.
	st.Runs[0].Status = RunCompleted
	st.Runs[0].EndTime = "2025-07-21T16:00:00.000Z"
	st.CurrentRunID = nil
	after := "write-line"
	st.Runs = append([]Run{{
		RunID:     "1753114000000-zzzzz",
		RunFolder: "/srv/runs/demo/.hankweave/runs/1753114000000-zzzzz",
		GitBranch: "run-1753114000000-zzzzz",
		StartingConditions: StartingConditions{Type: "continuation", Reason: "rollback",
			Source: &ContinuationSource{RunID: "1753110463686-yayna", AfterCodon: &after, CheckpointSHA: strings.Repeat("a", 40)}},
		Codons:    []CodonExecution{},
		Status:    RunRunning,
		StartTime: "2025-07-21T16:00:00.000Z",
		ServerPID: 1,
	}}, st.Runs...)
	id := "1753114000000-zzzzz"
	st.CurrentRunID = &id

	out, err := st.MarshalIndent()
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseState(out)
	if err != nil {
		t.Fatal(err)
	}
	old := mustUnmarshalMap(t, in)
	got := mustUnmarshalMap(t, out)
	oldRuns, gotRuns := old["runs"].([]any), got["runs"].([]any)
	if len(gotRuns) != 3 {
		t.Fatalf("runs = %d", len(gotRuns))
	}
	abandoned := gotRuns[1].(map[string]any)
	want := oldRuns[0].(map[string]any)
	want["status"] = "completed"
	want["endTime"] = "2025-07-21T16:00:00.000Z"
	if !jsonEqual(abandoned, want) {
		t.Fatalf("abandoned run changed beyond status/endTime:\n got %v\nwant %v", abandoned, want)
	}
	if !jsonEqual(gotRuns[2], oldRuns[1]) || !jsonEqual(got["executionPlan"], old["executionPlan"]) {
		t.Fatal("untouched parts changed")
	}
	newRun := gotRuns[0].(map[string]any)
	if newRun["codons"] == nil || len(newRun["codons"].([]any)) != 0 {
		t.Fatalf("new run codons = %v (want [])", newRun["codons"])
	}
	src := newRun["startingConditions"].(map[string]any)["source"].(map[string]any)
	if src["afterCodon"] != "write-line" {
		t.Fatalf("source = %v", src)
	}
	// Member order of the edited run: endTime appended at its end, as JavaScript does.
	if keys := objectKeys(t, mustRaw(t, out, "runs", 1)); strings.Join(keys, ",") !=
		"runId,runFolder,gitBranch,startingConditions,codons,status,startTime,serverPid,endTime" {
		t.Fatalf("member order = %v", keys)
	}
	if back.CurrentRun().RunID != id {
		t.Fatal("current run not the new one")
	}
}

func TestParseStateRejectsWhatTheRuntimeRejects(t *testing.T) {
	cases := []struct{ name, in string }{
		{"empty", ""},
		{"spaces", "  \n"},
		{"torn", `{"runs": [], "currentRunId": null, "executionPl`},
		{"array", `[]`},
		{"string", `"state"`},
		{"null", `null`},
		{"runs missing", `{"currentRunId": null, "executionPlan": []}`},
		{"runs object", `{"runs": {}, "currentRunId": null, "executionPlan": []}`},
		{"plan missing", `{"runs": [], "currentRunId": null}`},
		{"plan null", `{"runs": [], "currentRunId": null, "executionPlan": null}`},
		{"currentRunId missing", `{"runs": [], "executionPlan": []}`},
		{"currentRunId number", `{"runs": [], "currentRunId": 7, "executionPlan": []}`},
		{"trailing garbage", `{"runs": [], "currentRunId": null, "executionPlan": []} x`},
		{"two values", `{"runs": [], "currentRunId": null, "executionPlan": []}{}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, err := ParseState([]byte(tc.in))
			if err == nil || !errors.Is(err, ErrInvalidState) || st != nil {
				t.Fatalf("ParseState = %v, %v; want ErrInvalidState", st, err)
			}
		})
	}
}

// Inside a valid file, members of an unexpected type are left zero and kept.
func TestParseStateIsLenientInside(t *testing.T) {
	in := `{"runs": [null, 5, "x", {"runId": 12, "codons": [{"codonId": "a", "status": "failed", "exitCode": "one", "failureReason": "boom", "loopContext": [1]}, 3], "status": "running", "serverPid": "p"}], "currentRunId": "r", "executionPlan": [{"codonId": "a", "codon": {"id": "a", "checkpointedFiles": "a.md", "rigSetup": {"copy": 1}}}, 7]}`
	st, err := ParseState([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	r := st.Runs[3]
	if r.RunID != "" || r.ServerPID != 0 || r.Status != "running" || len(r.Codons) != 2 {
		t.Fatalf("run = %+v", r)
	}
	c := r.Codons[0]
	// A member that is not an object reads as an empty value that writes itself back.
	if c.CodonID != "a" || c.ExitCode != nil || c.FailureReason.Message != "" || c.FailureReason.Raw.IsObject() ||
		c.LoopContext.LoopID != "" || c.LoopContext.Raw.IsObject() {
		t.Fatalf("record = %+v", c)
	}
	if e := st.ExecutionPlan[0]; e.Codon.CheckpointedFiles != nil || e.Codon.RigSetup != nil {
		t.Fatalf("plan entry = %+v", e)
	}
	out, err := st.MarshalIndent()
	if err != nil {
		t.Fatal(err)
	}
	if !jsonEqual(mustUnmarshalMap(t, []byte(in)), mustUnmarshalMap(t, out)) {
		t.Fatalf("rewrite changed what it could not read:\n%s", out)
	}
	_ = Due(st)
	_ = ExitDue(st, false)
}

func TestReadState(t *testing.T) {
	plan := hwsim.Plan(hwsim.Codon{ID: "a", Files: []string{"a.md"}}, hwsim.Codon{ID: "b", Files: []string{"b.md"}})
	cases := []struct {
		name       string
		play       func(s *hwsimtest.Sim)
		wantSource string
		wantCodons int
		wantErr    error
	}{
		{"fresh", func(s *hwsimtest.Sim) { s.StartRun(); s.StartCodon("a") }, StateFile, 1, nil},
		{"torn falls back to bak", func(s *hwsimtest.Sim) {
			s.StartRun()
			s.StartCodon("a")
			s.CompleteCodon("a")
			s.BeginCodon("b") // state.json holds b, state.json.bak does not
			s.TearState()
		}, StateBackupFile, 1, nil},
		{"missing", func(s *hwsimtest.Sim) {}, "", 0, fs.ErrNotExist},
		{"both broken", func(s *hwsimtest.Sim) {
			s.StartRun()
			s.StartCodon("a")
			s.TearState()
			if err := os.WriteFile(s.Path(hwsim.StateBackupRel), []byte("{"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "", 0, ErrInvalidState},
		{"torn without bak", func(s *hwsimtest.Sim) {
			s.StartRun()
			s.TearState()
			_ = os.Remove(s.Path(hwsim.StateBackupRel))
		}, "", 0, ErrInvalidState},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			sim := hwsimtest.New(t, dir, plan)
			tc.play(sim)
			st, err := ReadState(dir)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if st.Source != tc.wantSource {
				t.Fatalf("source = %s, want %s", st.Source, tc.wantSource)
			}
			if (st.Source == StateBackupFile) != (st.Warning != nil) || (st.Warning != nil && !errors.Is(st.Warning, ErrInvalidState)) {
				t.Fatalf("warning = %v", st.Warning)
			}
			if n := len(st.CurrentRun().Codons); n != tc.wantCodons {
				t.Fatalf("codons = %d, want %d", n, tc.wantCodons)
			}
		})
	}
}

// The runtime's files come back byte for byte through ParseState.
func TestSimStateRoundTripIsExact(t *testing.T) {
	dir := t.TempDir()
	sim := hwsimtest.New(t, dir, hwsim.Plan(
		hwsim.Codon{ID: "a", Name: "First <one>", Files: []string{"a.md"}, RigSetup: []hwsim.RigStep{hwsim.Copy("t", "src", nil)}},
		hwsim.Loop("rl", 2, hwsim.Codon{ID: "review", Files: []string{"r.md"}}),
	))
	sim.StartRun()
	sim.StartCodon("a")
	sim.FailCodon("a", "overloaded", true)
	sim.StartCodon("a")
	sim.CompleteCodon("a")
	sim.SkipCodon("review#0")
	sim.StartCodon("review#1")
	in, err := os.ReadFile(StatePath(dir))
	if err != nil {
		t.Fatal(err)
	}
	st, err := ParseState(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := st.MarshalIndent()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(in, out) {
		t.Fatalf("round trip differs:\n%s", firstDiff(in, out))
	}
}

func TestWriteState(t *testing.T) {
	dir := t.TempDir()
	sim := hwsimtest.New(t, dir, hwsim.Plan(hwsim.Codon{ID: "a", Files: []string{"a.md"}}))
	sim.StartRun()
	sim.StartCodon("a")
	sim.CompleteCodon("a")

	st, err := ReadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteState(dir, st); !errors.Is(err, ErrRuntimeLive) {
		t.Fatalf("WriteState under a live lock = %v, want ErrRuntimeLive", err)
	}
	sim.Stop()

	before, _ := os.ReadFile(StatePath(dir))
	st.Runs[0].Status = RunCompleted
	st.Runs[0].EndTime = "2030-01-01T00:00:00.000Z"
	st.CurrentRunID = nil
	if err := WriteState(dir, st); err != nil {
		t.Fatal(err)
	}
	bak, _ := os.ReadFile(filepath.Join(dir, HankweaveDir, StateBackupFile))
	if !bytes.Equal(bak, before) {
		t.Fatal("state.json.bak is not the previous state.json")
	}
	if _, err := os.Stat(filepath.Join(dir, HankweaveDir, StateTempFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("state.json.tmp left behind: %v", err)
	}
	after, _ := os.ReadFile(StatePath(dir))
	var indented bytes.Buffer
	if err := json.Indent(&indented, after, "", "  "); err != nil || !bytes.Equal(indented.Bytes(), after) {
		t.Fatalf("not 2-space indented JSON: %v", err)
	}
	// Every member but the two changed survives.
	oldRec := mustRaw(t, before, "runs", 0, "codons", 0)
	newRec := mustRaw(t, after, "runs", 0, "codons", 0)
	if !jsonEqual(mustUnmarshalMap(t, oldRec), mustUnmarshalMap(t, newRec)) {
		t.Fatal("codon record changed")
	}
	back, err := ReadState(dir)
	if err != nil || back.Runs[0].Status != RunCompleted || back.CurrentRunID != nil {
		t.Fatalf("reread: %v %+v", err, back)
	}
}

// ---- helpers ----

func mustUnmarshalMap(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// mustRaw follows a path of member names and array indexes into a JSON document.
func mustRaw(t *testing.T, doc []byte, path ...any) []byte {
	t.Helper()
	cur := json.RawMessage(doc)
	for _, p := range path {
		switch k := p.(type) {
		case string:
			var m map[string]json.RawMessage
			if err := json.Unmarshal(cur, &m); err != nil {
				t.Fatal(err)
			}
			cur = m[k]
		case int:
			var a []json.RawMessage
			if err := json.Unmarshal(cur, &a); err != nil || k >= len(a) {
				t.Fatalf("index %d: %v", k, err)
			}
			cur = a[k]
		}
	}
	return cur
}

func objectKeys(t *testing.T, b []byte) []string {
	t.Helper()
	o, err := parseRawObject(b)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, f := range o.Fields() {
		keys = append(keys, f.Key)
	}
	return keys
}

func firstDiff(a, b []byte) string {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	lo := max(n-80, 0)
	return "want …" + string(a[lo:min(n+80, len(a))]) + "…\n got …" + string(b[lo:min(n+80, len(b))]) + "…"
}

// What a rollback by cairn does while the runtime is stopped: the abandoned
// run completed, a continuation run made current. The runtime (simulated)
// starts again, resumes that run, and its lifecycle goes on in it.
func TestWriteStateThenRuntimeResumes(t *testing.T) {
	dir := t.TempDir()
	sim := hwsimtest.New(t, dir, hwsim.Plan(hwsim.Codon{ID: "a", Files: []string{"a.md"}}, hwsim.Codon{ID: "b", Files: []string{"b.md"}}),
		hwsim.WithRunIDs("1000-aaaaa"))
	sim.StartRun()
	sim.StartCodon("a")
	sim.CompleteCodon("a")
	sim.StartCodon("b")
	sim.CompleteCodon("b")
	sim.Stop()

	st, err := ReadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	old := st.CurrentRun()
	old.Status, old.EndTime = RunCompleted, "2030-01-01T00:00:00.000Z"
	after := "a"
	newID := "2000-bbbbb"
	st.Runs = append([]Run{{
		RunID: newID, RunFolder: filepath.Join(dir, ".hankweave", "runs", newID), GitBranch: "run-" + newID,
		StartingConditions: StartingConditions{Type: "continuation", Reason: "rollback",
			Source: &ContinuationSource{RunID: "1000-aaaaa", AfterCodon: &after, CheckpointSHA: strings.Repeat("c", 40)}},
		Codons: []CodonExecution{}, Status: RunRunning, StartTime: "2030-01-01T00:00:00.000Z", ServerPID: 0,
	}}, st.Runs...)
	st.CurrentRunID = &newID
	if err := WriteState(dir, st); err != nil {
		t.Fatal(err)
	}

	if got := sim.StartRun(); got != newID {
		t.Fatalf("runtime started %s, want to resume %s", got, newID)
	}
	sim.StartCodon("b")
	sim.CompleteCodon("b")
	st, err = ReadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range Due(st) {
		got = append(got, m.Key())
	}
	want := "1000-aaaaa/a/0/completed 1000-aaaaa/b/0/completed 2000-bbbbb/b/0/completed"
	if strings.Join(got, " ") != want {
		t.Fatalf("Due = %v, want %s", got, want)
	}
	if r := st.Run("1000-aaaaa"); r.Status != RunCompleted || r.Codons[0].ClaudePID == nil {
		t.Fatalf("abandoned run %+v", r)
	}
	if _, ok := st.Run("1000-aaaaa").Codons[0].Raw.Get("finalTokens"); !ok {
		t.Fatal("unknown member lost through cairn's rewrite and the runtime's")
	}
}

func TestNewStructsMarshalLikeTheRuntime(t *testing.T) {
	st := &State{Runs: []Run{{RunID: "1-abcde", GitBranch: "run-1-abcde", StartingConditions: StartingConditions{Type: "fresh"}, Status: RunRunning}}}
	out, err := st.MarshalIndent()
	if err != nil {
		t.Fatal(err)
	}
	want := `{
  "runs": [
    {
      "runId": "1-abcde",
      "runFolder": "",
      "gitBranch": "run-1-abcde",
      "startingConditions": {
        "type": "fresh"
      },
      "codons": [],
      "status": "running",
      "startTime": "",
      "serverPid": 0
    }
  ],
  "currentRunId": null,
  "executionPlan": []
}`
	if string(out) != want {
		t.Fatalf("got\n%s", out)
	}
}
