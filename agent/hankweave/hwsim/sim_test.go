// An external test package, so that it can use hwsimtest (which imports hwsim).
package hwsim_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/cairn-dev/cairn/agent/hankweave/hwsim"
	"github.com/cairn-dev/cairn/agent/hankweave/hwsim/hwsimtest"
)

func read(t *testing.T, s *hwsimtest.Sim, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(s.Path(rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// keys lists the members of the JSON object at path (names and indexes), in file order.
func keys(t *testing.T, doc []byte, path ...any) []string {
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
				t.Fatalf("[%d]: %v", k, err)
			}
			cur = a[k]
		}
	}
	dec := json.NewDecoder(bytes.NewReader(cur))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %s", cur)
	}
	var out []string
	for dec.More() {
		tok, _ := dec.Token()
		out = append(out, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func journal(t *testing.T, s *hwsimtest.Sim) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSuffix(string(read(t, s, JournalRel)), "\n"), "\n") {
		var ev map[string]any
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("journal line %q: %v", l, err)
		}
		out = append(out, ev)
	}
	return out
}

func clock() func() time.Time {
	t := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	return func() time.Time { t = t.Add(250 * time.Millisecond); return t }
}

// Every transition: state.json.bak is the previous state.json, no .tmp is
// left, the file is JSON.stringify(state, null, 2), one journal line follows.
func TestEveryTransitionFollowsTheProtocol(t *testing.T) {
	dir := t.TempDir()
	s := hwsimtest.New(t, dir, Plan(Codon{ID: "a", Files: []string{"a.md"}, RigSetup: []RigStep{Copy("t", "src", nil)}}), WithClock(clock()))
	s.StartRun()
	steps := []struct {
		do   func()
		want string // transitionType:from>to
	}{
		{func() { s.BeginCodon("a") }, "CodonStarted"},
		{func() { s.Advance("a", "starting") }, "CodonTransitioned:preparing>starting"},
		{func() { s.Advance("a", "initializing") }, "CodonTransitioned:starting>initializing"},
		{func() { s.Advance("a", "running") }, "CodonTransitioned:initializing>running"},
		{func() { s.Advance("a", "completing-sentinels") }, "CodonTransitioned:running>completing-sentinels"},
		{func() { s.Advance("a", "completed") }, "CodonTransitioned:completing-sentinels>completed"},
		{func() { s.Shutdown() }, "RunCompleted"},
	}
	for i, st := range steps {
		before := read(t, s, StateRel)
		nLines := len(journal(t, s))
		st.do()
		if got := read(t, s, StateBackupRel); !bytes.Equal(got, before) {
			t.Fatalf("step %d: .bak is not the previous state.json", i)
		}
		if _, err := os.Stat(s.Path(StateTempRel)); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("step %d: state.json.tmp left: %v", i, err)
		}
		after := read(t, s, StateRel)
		var re bytes.Buffer
		if err := json.Indent(&re, after, "", "  "); err != nil || !bytes.Equal(re.Bytes(), after) || bytes.HasSuffix(after, []byte("\n")) {
			t.Fatalf("step %d: not JSON.stringify(state, null, 2)", i)
		}
		evs := journal(t, s)
		if len(evs) != nLines+1 {
			t.Fatalf("step %d: %d journal lines, want %d", i, len(evs), nLines+1)
		}
		ev := evs[len(evs)-1]
		data := ev["data"].(map[string]any)
		got := data["transitionType"].(string)
		if got == "CodonTransitioned" {
			got += ":" + data["from"].(string) + ">" + data["to"].(string)
		}
		if got != st.want || ev["type"] != "state.transition" || ev["id"] == "" || ev["timestamp"] == nil {
			t.Fatalf("step %d: journal %v", i, ev)
		}
		lines := bytes.Split(bytes.TrimSuffix(read(t, s, JournalRel), []byte("\n")), []byte("\n"))
		if got := strings.Join(keys(t, lines[len(lines)-1]), ","); got != "id,timestamp,type,data" {
			t.Fatalf("event member order %v", got)
		}
	}
}

// Records are built the way the runtime's state manager builds them, member order included.
func TestRecordShapes(t *testing.T) {
	dir := t.TempDir()
	s := hwsimtest.New(t, dir, Plan(
		Codon{ID: "a", Name: "Alpha", Files: []string{"a.md"}, RigSetup: []RigStep{Command("make", map[string]string{"gen/x.txt": "x"})}},
		Loop("rl", 2, Codon{ID: "review", Files: []string{"r.md"}}),
	), WithClock(clock()), WithRunIDs("1753110463686-yayna"))
	s.StartRun()
	doc := read(t, s, StateRel)
	if got := strings.Join(keys(t, doc), ","); got != "runs,currentRunId,executionPlan" {
		t.Fatalf("state members %s", got)
	}
	if got := strings.Join(keys(t, doc, "runs", 0), ","); got != "runId,runFolder,gitBranch,startingConditions,codons,status,startTime,serverPid" {
		t.Fatalf("run members %s", got)
	}
	if got := strings.Join(keys(t, doc, "executionPlan", 1), ","); got != "codon,codonId,loopContext" {
		t.Fatalf("plan entry members %s", got)
	}
	var st struct {
		Runs []struct {
			RunID, GitBranch, Status, StartTime string
			StartingConditions                  map[string]any
			ServerPid                           int
			Codons                              []map[string]any
		}
		CurrentRunID  *string `json:"currentRunId"`
		ExecutionPlan []struct {
			CodonID     string
			Codon       map[string]any
			LoopContext map[string]any
		}
	}
	if err := json.Unmarshal(doc, &st); err != nil {
		t.Fatal(err)
	}
	r := st.Runs[0]
	if r.RunID != "1753110463686-yayna" || r.GitBranch != "run-1753110463686-yayna" || r.Status != "running" ||
		r.ServerPid != os.Getpid() || r.StartingConditions["type"] != "fresh" || *st.CurrentRunID != r.RunID ||
		len(r.StartTime) != 24 || !strings.HasPrefix(r.StartTime, "2026-03-01T12:00:0") || !strings.HasSuffix(r.StartTime, "Z") {
		t.Fatalf("run %+v", r)
	}
	if len(st.ExecutionPlan) != 3 || st.ExecutionPlan[2].CodonID != "review#1" ||
		st.ExecutionPlan[2].LoopContext["iteration"] != 1.0 || st.ExecutionPlan[2].Codon["id"] != "review" ||
		st.ExecutionPlan[0].Codon["name"] != "Alpha" {
		t.Fatalf("plan %+v", st.ExecutionPlan)
	}

	s.StartCodon("a")
	doc = read(t, s, StateRel)
	if got := strings.Join(keys(t, doc, "runs", 0, "codons", 0), ","); got !=
		"codonId,startTime,status,claudePid,claudeLogPath,claudeSessionId,currentCost,currentTokens,assistantMessageCount,extensionCount" {
		t.Fatalf("running record members %s", got)
	}
	if b, err := os.ReadFile(filepath.Join(s.AgentRoot(), "gen", "x.txt")); err != nil || string(b) != "x" {
		t.Fatalf("rig setup file: %q %v", b, err)
	}
	if _, err := os.Stat(s.Path(".hankweave/runs/1753110463686-yayna/a-claude.log")); err != nil {
		t.Fatal(err)
	}
	s.CompleteCodon("a")
	doc = read(t, s, StateRel)
	if got := strings.Join(keys(t, doc, "runs", 0, "codons", 0), ","); got !=
		"codonId,startTime,status,claudePid,claudeLogPath,claudeSessionId,currentCost,currentTokens,assistantMessageCount,extensionCount,endTime,exitCode,finalCost,finalTokens,resultMessageReceived,completionCheckpoint" {
		t.Fatalf("completed record members %s", got)
	}

	s.StartCodon("review#0")
	s.FailCodon("review#0", "overloaded", true)
	doc = read(t, s, StateRel)
	if got := strings.Join(keys(t, doc, "runs", 0, "codons", 1), ","); got !=
		"codonId,startTime,status,endTime,failedDuring,exitCode,failureReason,partialCost,partialTokens,claudePid,claudeSessionId,claudeLogPath,loopContext,extensionCount" {
		t.Fatalf("failed record members %s", got)
	}
	s.StartCodon("review#0") // retry: a new record, same codonId
	s.SkipCodon("review#0")
	s.SkipCodon("review#1") // never started: skipped while preparing
	var after struct {
		Runs []struct{ Codons []map[string]any }
	}
	if err := json.Unmarshal(read(t, s, StateRel), &after); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range after.Runs[0].Codons {
		d := c["failedDuring"]
		if d == nil {
			d = c["skippedDuring"]
		}
		got = append(got, c["codonId"].(string)+":"+c["status"].(string)+":"+toString(d)+":"+toString(c["loopContext"] != nil))
	}
	want := "a:completed::false review#0:failed:running:true review#0:skipped:running:true review#1:skipped:preparing:true"
	if strings.Join(got, " ") != want {
		t.Fatalf("records\n got %s\nwant %s", strings.Join(got, " "), want)
	}
}

func toString(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case bool:
		if x {
			return "true"
		}
		return "false"
	}
	return "?"
}

func TestRuntimeCheckpoints(t *testing.T) {
	dir := t.TempDir()
	sha := func(c string) string { return strings.Repeat(c, 40) }
	s := hwsimtest.New(t, dir, Plan(Codon{ID: "a", RigSetup: []RigStep{Command("make", nil)}}, Codon{ID: "b"}),
		WithRuntimeCheckpoints(func(kind, run, codon string) string {
			return sha(map[string]string{"rig-setup": "1", "completed": "2", "error": "3", "skipped": "4"}[kind])
		}))
	s.StartRun()
	s.StartCodon("a")
	s.CompleteCodon("a")
	s.StartCodon("b")
	s.FailCodon("b", "x", true)
	s.SkipCodon("b")
	var st struct {
		Runs []struct{ Codons []map[string]any }
	}
	if err := json.Unmarshal(read(t, s, StateRel), &st); err != nil {
		t.Fatal(err)
	}
	c := st.Runs[0].Codons
	if c[0]["rigSetupCheckpoint"] != sha("1") || c[0]["completionCheckpoint"] != sha("2") ||
		c[1]["errorCheckpoint"] != sha("3") || c[1]["rigSetupCheckpoint"] != nil || c[2]["skipCheckpoint"] != sha("4") {
		t.Fatalf("records %v", c)
	}
	var created []string
	for _, ev := range journal(t, s) {
		d := ev["data"].(map[string]any)
		if d["transitionType"] == "CheckpointCreated" {
			created = append(created, d["checkpointType"].(string)+":"+d["codonId"].(string))
			if d["branch"] != "run-"+s.RunID() || len(d["sha"].(string)) != 40 {
				t.Fatalf("CheckpointCreated %v", d)
			}
		}
	}
	if strings.Join(created, " ") != "rig-setup:a completed:a error:b skipped:b" {
		t.Fatalf("CheckpointCreated lines %v", created)
	}
}

func TestLockLifecycle(t *testing.T) {
	dir := t.TempDir()
	s := hwsimtest.New(t, dir, Plan(Codon{ID: "a"}), WithClock(clock()), WithPort(4444))
	s.StartRun()
	lock := read(t, s, LockRel)
	if got := strings.Join(keys(t, lock), ","); got != "pid,lockId,runId,startTime,lastHeartbeat,port" {
		t.Fatalf("lock members %s", got)
	}
	var l struct {
		PID           int    `json:"pid"`
		LockID        string `json:"lockId"`
		RunID         string `json:"runId"`
		StartTime     string `json:"startTime"`
		LastHeartbeat string `json:"lastHeartbeat"`
		Port          int    `json:"port"`
	}
	decode := func() {
		t.Helper()
		if err := json.Unmarshal(read(t, s, LockRel), &l); err != nil {
			t.Fatal(err)
		}
	}
	decode()
	if l.PID != os.Getpid() || l.RunID != s.RunID() || l.Port != 4444 || l.LockID == "" {
		t.Fatalf("lock %+v", l)
	}
	first := l.LastHeartbeat
	s.Heartbeat()
	decode()
	if l.LastHeartbeat <= first || l.StartTime > first {
		t.Fatalf("heartbeat did not move: %s → %s", first, l.LastHeartbeat)
	}
	if _, err := os.Stat(s.Path(LockTempRel)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("lock temp file left")
	}
	s.Crash()
	decode()
	hb, _ := time.Parse(time.RFC3339, l.LastHeartbeat)
	if !pidGone(l.PID) || !hb.Before(time.Date(2026, 3, 1, 11, 55, 0, 0, time.UTC)) {
		t.Fatalf("crashed lock: pid %d, heartbeat %s", l.PID, l.LastHeartbeat)
	}
	var st struct {
		Runs []struct{ Status string }
	}
	if err := json.Unmarshal(read(t, s, StateRel), &st); err != nil || st.Runs[0].Status != "running" {
		t.Fatalf("crash changed the run: %v %+v", err, st)
	}
	s.StartRun()
	s.Shutdown()
	if _, err := os.Stat(s.Path(LockRel)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("lock left after shutdown")
	}
	var end struct {
		Runs []struct {
			Status, EndTime string
		}
		CurrentRunID *string `json:"currentRunId"`
	}
	if err := json.Unmarshal(read(t, s, StateRel), &end); err != nil {
		t.Fatal(err)
	}
	if end.CurrentRunID != nil || end.Runs[0].Status != "completed" || end.Runs[0].EndTime == "" || end.Runs[1].Status != "crashed" {
		t.Fatalf("after shutdown %+v", end)
	}

	e := hwsimtest.New(t, t.TempDir(), nil, WithEpochMillisLock())
	e.StartRun()
	var m map[string]any
	if err := json.Unmarshal(read(t, e, LockRel), &m); err != nil {
		t.Fatal(err)
	}
	if _, ok := m["lastHeartbeat"].(float64); !ok {
		t.Fatalf("epoch lock %v", m)
	}
}

func TestCompaction(t *testing.T) {
	dir := t.TempDir()
	s := hwsimtest.New(t, dir, Plan(Codon{ID: "a"}))
	s.StartRun()
	s.StartCodon("a")
	s.CompleteCodon("a")
	s.Shutdown()
	orig := read(t, s, JournalRel)
	s.CompactJournal()
	if _, err := os.Stat(s.Path(JournalRel)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("events.jsonl still there")
	}
	z := read(t, s, JournalZstRel)
	if got, err := UnzstdRaw(z); err != nil || !bytes.Equal(got, orig) {
		t.Fatalf("unzstdRaw: %v", err)
	}
	if path, err := exec.LookPath("zstd"); err == nil {
		out, err := exec.Command(path, "-d", "-c", s.Path(JournalZstRel)).Output()
		if err != nil || !bytes.Equal(out, orig) {
			t.Fatalf("zstd -d: %v", err)
		}
	}
	var meta map[string]any
	if err := json.Unmarshal(read(t, s, JournalMetaRel), &meta); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(s.Path(JournalCASRel)); err != nil || !fi.IsDir() {
		t.Fatal("no cas/")
	}
	s.StartRun()
	back := read(t, s, JournalRel)
	if !bytes.HasPrefix(back, orig) || len(back) == len(orig) {
		t.Fatal("journal not restored then appended")
	}
	for _, rel := range []string{JournalZstRel, JournalMetaRel, JournalCASRel} {
		if _, err := os.Stat(s.Path(rel)); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s left after restore", rel)
		}
	}
}

func TestFiles(t *testing.T) {
	s := hwsimtest.New(t, t.TempDir(), nil)
	s.WriteFile("dir/sub/a.txt", "hello world")
	s.EditFile("dir/sub/a.txt", "world", "there")
	if b, _ := os.ReadFile(filepath.Join(s.AgentRoot(), "dir", "sub", "a.txt")); string(b) != "hello there" {
		t.Fatalf("edit: %q", b)
	}
	s.DeleteFile("dir/sub/a.txt")
	if _, err := os.Stat(filepath.Join(s.AgentRoot(), "dir", "sub", "a.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("not deleted")
	}
}

func TestTornHelpers(t *testing.T) {
	s := hwsimtest.New(t, t.TempDir(), Plan(Codon{ID: "a"}))
	s.StartRun()
	s.BeginCodon("a")
	whole := read(t, s, StateRel)
	s.TearState()
	if torn := read(t, s, StateRel); len(torn) != len(whole)/2 || json.Valid(torn) {
		t.Fatal("state not torn")
	}
	if !json.Valid(read(t, s, StateBackupRel)) {
		t.Fatal("backup not valid")
	}
	s.AppendJournalRaw([]byte(`{"id":"torn`))
	if j := read(t, s, JournalRel); !bytes.HasSuffix(j, []byte(`{"id":"torn`)) {
		t.Fatal("raw journal bytes not appended")
	}
}

func TestErrors(t *testing.T) {
	s, err := New(t.TempDir(), Plan(Codon{ID: "a"}))
	if err != nil {
		t.Fatal(err)
	}
	first := s.StartCodon("a") // no run yet
	if first == nil || s.Err() != first {
		t.Fatalf("err = %v, Err = %v", first, s.Err())
	}
	if id, err := s.StartRun(); err != first || id != "" || s.RunID() != "" {
		t.Fatalf("a call after an error did something: %q, %v", id, err)
	}

	s, err = New(t.TempDir(), Plan(Codon{ID: "a"}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.StartRun(); err != nil {
		t.Fatal(err)
	}
	if err := s.StartCodon("a"); err != nil {
		t.Fatal(err)
	}
	if err := s.Advance("a", "preparing"); err == nil || !strings.Contains(err.Error(), "invalid transition") {
		t.Fatalf("err = %v", err)
	}

	// A folder that cannot be made: New fails.
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if s, err := New(file, nil); err == nil || s != nil {
		t.Fatalf("New over a file: %v, %v", s, err)
	}
}

// Heartbeats from another goroutine use the simulator itself: hwsimtest's
// t.Fatal belongs to the test goroutine.
func TestHeartbeatConcurrently(t *testing.T) {
	s, err := New(t.TempDir(), Plan(Codon{ID: "a"}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.StartRun(); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 1)
	go func() {
		var first error
		for i := 0; i < 50 && first == nil; i++ {
			first = s.Heartbeat()
		}
		errs <- first
	}()
	if err := s.StartCodon("a"); err != nil {
		t.Fatal(err)
	}
	if err := s.CompleteCodon("a"); err != nil {
		t.Fatal(err)
	}
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}

// The order a watcher sees from a runtime that checkpoints by itself: the
// rig-setup SHA lands in a write after preparing→starting, with the codon
// still starting; a terminal checkpoint is journaled before the terminal
// transition that records it, with no state.json write of its own.
func TestRuntimeCheckpointOrder(t *testing.T) {
	dir := t.TempDir()
	var s *hwsimtest.Sim
	var seenAtSeal []string // the codon's status on disk when the runtime commits
	status := func() string {
		var st struct {
			Runs []struct{ Codons []map[string]any }
		}
		if err := json.Unmarshal(read(t, s, StateRel), &st); err != nil || len(st.Runs[0].Codons) == 0 {
			return "?"
		}
		c := st.Runs[0].Codons
		return c[len(c)-1]["status"].(string)
	}
	s = hwsimtest.New(t, dir, Plan(Codon{ID: "a", RigSetup: []RigStep{Command("make", nil)}}),
		WithRuntimeCheckpoints(func(kind, run, codon string) string {
			seenAtSeal = append(seenAtSeal, kind+"@"+status())
			return strings.Repeat(map[string]string{"rig-setup": "1", "completed": "2"}[kind], 40)
		}))
	s.StartRun()
	s.BeginCodon("a")
	s.Advance("a", "starting")
	var st struct {
		Runs []struct{ Codons []map[string]any }
	}
	if err := json.Unmarshal(read(t, s, StateRel), &st); err != nil {
		t.Fatal(err)
	}
	if rec := st.Runs[0].Codons[0]; rec["status"] != "starting" || rec["rigSetupCheckpoint"] != strings.Repeat("1", 40) {
		t.Fatalf("after starting: %v", rec)
	}
	var bak struct {
		Runs []struct{ Codons []map[string]any }
	}
	if err := json.Unmarshal(read(t, s, StateBackupRel), &bak); err != nil {
		t.Fatal(err)
	}
	if rec := bak.Runs[0].Codons[0]; rec["status"] != "starting" || rec["rigSetupCheckpoint"] != nil {
		t.Fatalf("the write before the rig-setup SHA: %v", rec)
	}
	s.Advance("a", "initializing")
	s.Advance("a", "running")
	before := read(t, s, StateRel)
	s.CompleteCodon("a")
	if got := strings.Join(seenAtSeal, " "); got != "rig-setup@starting completed@completing-sentinels" {
		t.Fatalf("the runtime committed at: %s", got)
	}
	var lines []string
	for _, ev := range journal(t, s) {
		d := ev["data"].(map[string]any)
		l := d["transitionType"].(string)
		switch l {
		case "CodonTransitioned":
			l += ":" + d["to"].(string)
		case "CheckpointCreated":
			l += ":" + d["checkpointType"].(string)
		}
		lines = append(lines, l)
	}
	want := "RunStarted CodonStarted CodonTransitioned:starting CheckpointCreated:rig-setup CodonTransitioned:initializing " +
		"CodonTransitioned:running CodonTransitioned:completing-sentinels CheckpointCreated:completed CodonTransitioned:completed"
	if got := strings.Join(lines, " "); got != want {
		t.Fatalf("journal\n got %s\nwant %s", got, want)
	}
	// The completion's CheckpointCreated changed no state.json: .bak is the completing-sentinels state.
	if bak := read(t, s, StateBackupRel); bytes.Equal(bak, before) || !bytes.Contains(bak, []byte(`"completing-sentinels"`)) {
		t.Fatalf("state.json.bak after the completion:\n%s", bak)
	}
}

// A shutdown with a codon unfinished: the runtime's exit commit, then
// RunFailed (failed, endTime, currentRunId null) with the record left
// running, then the lock removed. Stop (forced) leaves the run running.
func TestShutdownWithCodonUnfinished(t *testing.T) {
	dir := t.TempDir()
	var kinds []string
	s := hwsimtest.New(t, dir, Plan(Codon{ID: "a"}), WithClock(clock()),
		WithRuntimeCheckpoints(func(kind, run, codon string) string { kinds = append(kinds, kind+":"+codon); return "" }))
	s.StartRun()
	s.StartCodon("a")
	s.Shutdown()
	if _, err := os.Stat(s.Path(LockRel)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("lock left after shutdown")
	}
	var st struct {
		CurrentRunID *string `json:"currentRunId"`
		Runs         []struct {
			Status, EndTime string
			Codons          []map[string]any
		}
	}
	if err := json.Unmarshal(read(t, s, StateRel), &st); err != nil {
		t.Fatal(err)
	}
	if st.CurrentRunID != nil || st.Runs[0].Status != "failed" || st.Runs[0].EndTime == "" ||
		st.Runs[0].Codons[0]["status"] != "running" || st.Runs[0].Codons[0]["exitCode"] != nil {
		t.Fatalf("after the shutdown: %+v", st)
	}
	if strings.Join(kinds, " ") != "exit:a" {
		t.Fatalf("runtime checkpoints %v, want its exit commit", kinds)
	}
	evs := journal(t, s)
	if d := evs[len(evs)-1]["data"].(map[string]any); d["transitionType"] != "RunFailed" {
		t.Fatalf("last journal line %v", d)
	}

	s.StartRun()
	s.StartCodon("a")
	s.Stop()
	var forced struct {
		CurrentRunID *string `json:"currentRunId"`
		Runs         []struct{ Status string }
	}
	if err := json.Unmarshal(read(t, s, StateRel), &forced); err != nil {
		t.Fatal(err)
	}
	if forced.CurrentRunID == nil || forced.Runs[0].Status != "running" || len(kinds) != 1 {
		t.Fatalf("after a forced stop: %+v, runtime checkpoints %v", forced, kinds)
	}
}
