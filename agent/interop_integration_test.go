//go:build linux

package agent_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/cairn-dev/cairn/agent/hankweave/hwsim"
	"github.com/cairn-dev/cairn/agent/hankweave/hwsim/hwsimtest"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// Integration tests of how the daemon meets the runtime as it really behaves:
// its own shutdown (RunFailed before the lock goes), its own checkpoints
// recorded in later writes, and file times that cannot order a change
// against a marker.

// TestInteropExitAfterRuntimeShutdown: the runtime's shutdown with a codon
// unfinished marks the run failed and drops currentRunId before removing its
// lock; the interrupted codon still gets its exit checkpoint, on top of the
// runtime's own exit commit. A run the runtime ended that way before cairn
// first watched the workspace gets none.
func TestInteropExitAfterRuntimeShutdown(t *testing.T) {
	exec := filepath.Join(t.TempDir(), "exec")
	rs := newRuntimeSealer(t, exec)
	for _, k := range []string{"rig-setup", "completed", "error", "skipped"} {
		rs.skip[k] = true // only the exit commit at the shutdown
	}
	sim := hwsimtest.New(t, exec, stopPlan(), hwsim.WithClock(hwClock()), hwsim.WithRuntimeCheckpoints(rs.seal))

	// Shut down with a codon unfinished before cairn ever watched it.
	old, oldSim := newHankExec(t, stopPlan())
	oldSim.StartRun()
	oldSim.StartCodon("plan")
	oldSim.WriteFile("plan.md", "old\n")
	oldSim.Shutdown()

	state := t.TempDir()
	startDaemon(t, state, "--config", configFile(t, noAutosave), "--watch", exec, "--watch", old)
	gitDir := hwStore(exec)
	waitBaseline(t, exec, state)
	waitBaseline(t, old, state)

	run := sim.StartRun()
	sim.StartCodon("plan")
	sim.WriteFile("plan.md", "the plan\n")
	sim.CompleteCodon("plan")
	plan := waitMarker(t, exec, state, markerKey{ckpt.KindCompleted, run, "plan", 0})
	sim.StartCodon("code")
	sim.WriteFile("code/a.go", "package a\n")
	sim.Shutdown()

	exit := waitMarker(t, exec, state, markerKey{ckpt.KindExit, run, "code", 0})
	runtimeExit := rs.sha("exit", "code", 0)
	if runtimeExit == "" {
		t.Fatal("the runtime made no exit commit")
	}
	checkCheckpoint(t, gitDir, exit, wantCkpt{Name: "Code", Parent: runtimeExit, Files: []string{"code/a.go", "plan.md"}, State: ckpt.StateOK})
	if exit.Adopted {
		t.Errorf("exit: adopted; an exit checkpoint is cairn's")
	}
	if p := git(t, gitDir, "rev-parse", runtimeExit+"^"); p != plan.SHA {
		t.Errorf("the runtime's exit commit sits on %s, want the plan checkpoint %s", p, plan.SHA)
	}

	// The next run of both workspaces: a marker each proves the daemon has
	// read everything before it, and the old workspace owes no exit.
	run2 := sim.StartRun()
	sim.SkipCodon("plan")
	waitMarker(t, exec, state, markerKey{ckpt.KindSkipped, run2, "plan", 0})
	oldRun2 := oldSim.StartRun()
	oldSim.SkipCodon("plan")
	waitMarker(t, old, state, markerKey{ckpt.KindSkipped, oldRun2, "plan", 0})
	assertKeys(t, ledger(t, exec, state), []markerKey{
		{ckpt.KindCompleted, run, "plan", 0},
		{ckpt.KindExit, run, "code", 0},
		{ckpt.KindSkipped, run2, "plan", 0},
	})
	assertKeys(t, ledger(t, old, state), []markerKey{{ckpt.KindSkipped, oldRun2, "plan", 0}})
}

// interopPlan: a codon without a rig, then three with one.
func interopPlan() []hwsim.Entry {
	rig := func(file string) []hwsim.RigStep {
		return []hwsim.RigStep{hwsim.Command("make "+file, map[string]string{file: "rig\n"})}
	}
	return hwsim.Plan(
		hwsim.Codon{ID: "plan", Name: "Plan", Files: []string{"plan.md"}},
		hwsim.Codon{ID: "test", Name: "Test", Files: []string{"tests/**"}, RigSetup: rig("tests/fixture.txt")},
		hwsim.Codon{ID: "lint", Name: "Lint", Files: []string{"lint/**"}, RigSetup: rig("lint/lint.cfg")},
		hwsim.Codon{ID: "stuck", Name: "Stuck", Files: []string{"stuck/**"}, RigSetup: rig("stuck/stuck.cfg")},
	)
}

// TestInteropAdoptsRigSetupRecordedLater: a runtime that checkpoints by
// itself commits its rig-setup checkpoint after the codon's starting is on
// disk and records the SHA in a later write. cairn, seeing such a runtime (a
// SHA in the run, or in an earlier run while the new one shows nothing yet),
// waits for that SHA and adopts it instead of sealing a second rig-setup on
// the same branch. What the runtime does not record is still sealed: a
// rig-setup it moves on without, one it never records (after the bounded
// wait), and the exit.
func TestInteropAdoptsRigSetupRecordedLater(t *testing.T) {
	exec := filepath.Join(t.TempDir(), "exec")
	rs := newRuntimeSealer(t, exec)
	none := map[string]bool{"lint": true, "stuck": true} // rig setups the runtime records no checkpoint for
	sealer := func(kind, runID, codonID string) string {
		if kind == "rig-setup" {
			if none[codonID] {
				return ""
			}
			// The runtime's commit of the tree takes a while, with starting on
			// disk: not a wait, the time the daemon must wait through.
			time.Sleep(500 * time.Millisecond)
		}
		return rs.seal(kind, runID, codonID)
	}
	sim := hwsimtest.New(t, exec, interopPlan(), hwsim.WithClock(hwClock()), hwsim.WithRuntimeCheckpoints(sealer))
	state := t.TempDir()
	d := startDaemon(t, state, "--config", configFile(t, noAutosave), "--watch", exec)
	gitDir := hwStore(exec)
	waitBaseline(t, exec, state)

	run := sim.StartRun()
	k := func(kind ckpt.Kind, codon string) markerKey { return markerKey{kind, run, codon, 0} }
	sim.StartCodon("plan")
	sim.WriteFile("plan.md", "plan\n")
	sim.CompleteCodon("plan")
	waitMarker(t, exec, state, k(ckpt.KindCompleted, "plan"))

	sim.StartCodon("test") // the run has shown a SHA: cairn waits for the rig-setup's
	rig := waitMarker(t, exec, state, k(ckpt.KindRigSetup, "test"))
	if want := rs.sha("rig-setup", "test", 0); !rig.Adopted || rig.SHA != want {
		t.Errorf("rig-setup test: adopted=%v sha %s, want the runtime's %s", rig.Adopted, rig.SHA, want)
	}
	sim.WriteFile("tests/t.go", "package t\n")
	sim.CompleteCodon("test")
	waitMarker(t, exec, state, k(ckpt.KindCompleted, "test"))

	// The runtime moves on past starting without recording one: cairn seals it.
	sim.StartCodon("lint")
	lint := waitMarker(t, exec, state, k(ckpt.KindRigSetup, "lint"))
	sim.CompleteCodon("lint")
	waitMarker(t, exec, state, k(ckpt.KindCompleted, "lint"))

	// The runtime stalls in starting and records nothing: cairn seals one
	// after its bounded wait, while the runtime's lock is still held.
	sim.BeginCodon("stuck")
	sim.Advance("stuck", "starting")
	stuck := waitMarker(t, exec, state, k(ckpt.KindRigSetup, "stuck"))
	if !strings.Contains(d.log.String(), "the runtime recorded no rig-setup checkpoint in time") {
		t.Errorf("rig-setup stuck sealed, but not after waiting for the runtime")
	}
	sim.Shutdown() // stuck unfinished: the runtime's exit commit, RunFailed, lock removed
	waitMarker(t, exec, state, k(ckpt.KindExit, "stuck"))

	// A new run shows nothing yet (its skip has no checkpoint): the earlier
	// run tells, and cairn waits for its first rig-setup too.
	rs.skip["skipped"] = true
	run2 := sim.StartRun()
	sim.SkipCodon("plan")
	waitMarker(t, exec, state, markerKey{ckpt.KindSkipped, run2, "plan", 0})
	sim.StartCodon("test")
	rig2 := waitMarker(t, exec, state, markerKey{ckpt.KindRigSetup, run2, "test", 0})
	if want := rs.sha("rig-setup", "test", 1); !rig2.Adopted || rig2.SHA != want {
		t.Errorf("run 2 rig-setup test: adopted=%v sha %s, want the runtime's %s", rig2.Adopted, rig2.SHA, want)
	}
	sim.CompleteCodon("test")
	waitMarker(t, exec, state, markerKey{ckpt.KindCompleted, run2, "test", 0})
	sim.Shutdown()

	recs := ledger(t, exec, state)
	assertKeys(t, recs, []markerKey{
		k(ckpt.KindCompleted, "plan"),
		k(ckpt.KindRigSetup, "test"),
		k(ckpt.KindCompleted, "test"),
		k(ckpt.KindRigSetup, "lint"),
		k(ckpt.KindCompleted, "lint"),
		k(ckpt.KindRigSetup, "stuck"),
		k(ckpt.KindExit, "stuck"),
		{ckpt.KindSkipped, run2, "plan", 0},
		{ckpt.KindRigSetup, run2, "test", 0},
		{ckpt.KindCompleted, run2, "test", 0},
	})
	cairns := map[markerKey]bool{ // sealed by cairn; every other one adopted
		k(ckpt.KindRigSetup, "lint"): true, k(ckpt.KindRigSetup, "stuck"): true,
		k(ckpt.KindExit, "stuck"): true, {ckpt.KindSkipped, run2, "plan", 0}: true,
	}
	inLedger := map[string]bool{}
	for _, r := range lifecycleRecords(recs) {
		inLedger[r.SHA] = true
		if r.Adopted == cairns[keyOf(r)] {
			t.Errorf("%s: adopted=%v", keyOf(r), r.Adopted)
		}
		if r.State != ckpt.StateOK {
			t.Errorf("%s: state %s %v", keyOf(r), r.State, r.Issues)
		}
	}
	for _, r := range []ckpt.Record{lint, stuck} {
		if got := treeFiles(t, gitDir, r.SHA); !slices.Contains(got, map[string]string{"lint": "lint/lint.cfg", "stuck": "stuck/stuck.cfg"}[r.CodonID]) {
			t.Errorf("%s: tree %q lacks its rig's file", keyOf(r), got)
		}
	}
	// One checkpoint per marker on each branch: no second rig-setup, nothing
	// outside the ledger but the runtime's exit commit.
	exitCommit := rs.sha("exit", "stuck", 0)
	for _, id := range []string{run, run2} {
		subjects := map[string]int{}
		for _, line := range strings.Split(git(t, gitDir, "log", "--format=%H %s", "refs/heads/main..refs/heads/run-"+id), "\n") {
			sha, subject, _ := strings.Cut(line, " ")
			kind, _, _ := strings.Cut(subject, " [run:")
			subjects[kind]++
			if !inLedger[sha] && sha != exitCommit {
				t.Errorf("run-%s: commit %s (%s) is in no ledger record", id, sha, subject)
			}
		}
		for s, n := range subjects {
			if n > 1 && !strings.HasPrefix(s, "exit:") {
				t.Errorf("run-%s: %d commits %q", id, n, s)
			}
		}
	}
}

// rigFirstPlan: a first codon with a rig setup, then one without.
func rigFirstPlan() []hwsim.Entry {
	return hwsim.Plan(
		hwsim.Codon{ID: "test", Name: "Test", Files: []string{"tests/**"},
			RigSetup: []hwsim.RigStep{hwsim.Command("make fixture", map[string]string{"tests/fixture.txt": "rig\n"})}},
		hwsim.Codon{ID: "code", Name: "Code", Files: []string{"tests/**", "code/**"}},
	)
}

// heldRefs lists the store's captured checkpoints not yet published.
func heldRefs(t *testing.T, gitDir string) []string {
	t.Helper()
	return strings.Fields(git(t, gitDir, "for-each-ref", "--format=%(refname)", "refs/cairn-held/"))
}

// waitCaptured waits until the daemon has captured the rig-setup of the
// codon now starting (a held ref), and fails if it sealed one instead.
func waitCaptured(t *testing.T, exec, state string, k markerKey) {
	t.Helper()
	gitDir := hwStore(exec)
	waitFor(t, 20*time.Second, "rig-setup "+k.String()+" captured", func() bool {
		for _, r := range ledger(t, exec, state) {
			if keyOf(r) == k {
				t.Fatalf("%s sealed (%s) while its codon is still starting; want it captured and held", k, r.ID)
			}
		}
		return len(heldRefs(t, gitDir)) > 0
	})
}

// TestInteropFirstRigSetupSelfCheckpointing: on the first codon of a
// workspace's first run nothing tells yet whether the runtime checkpoints
// by itself. A runtime that does records its rig-setup SHA in a later write
// while the codon is starting: cairn adopts it, and the tree it captured
// at starting is thrown away. One rig-setup record, the runtime's, and no
// commit on the run's branch outside the ledger.
func TestInteropFirstRigSetupSelfCheckpointing(t *testing.T) {
	exec := filepath.Join(t.TempDir(), "exec")
	rs := newRuntimeSealer(t, exec)
	sealer := func(kind, runID, codonID string) string {
		if kind == "rig-setup" {
			// The runtime's commit of the tree takes a while, with starting
			// on disk: the time in which cairn captures its own.
			time.Sleep(500 * time.Millisecond)
		}
		return rs.seal(kind, runID, codonID)
	}
	sim := hwsimtest.New(t, exec, rigFirstPlan(), hwsim.WithClock(hwClock()), hwsim.WithRuntimeCheckpoints(sealer))
	state := t.TempDir()
	startDaemon(t, state, "--config", configFile(t, noAutosave), "--watch", exec)
	gitDir := hwStore(exec)
	waitBaseline(t, exec, state)

	run := sim.StartRun()
	k := func(kind ckpt.Kind, codon string) markerKey { return markerKey{kind, run, codon, 0} }
	sim.StartCodon("test")
	rig := waitMarker(t, exec, state, k(ckpt.KindRigSetup, "test"))
	if want := rs.sha("rig-setup", "test", 0); !rig.Adopted || rig.SHA != want {
		t.Errorf("rig-setup test: adopted=%v sha %s, want the runtime's %s", rig.Adopted, rig.SHA, want)
	}
	sim.WriteFile("tests/t.go", "package t\n")
	sim.CompleteCodon("test")
	waitMarker(t, exec, state, k(ckpt.KindCompleted, "test"))
	sim.StartCodon("code")
	sim.WriteFile("code/a.go", "package a\n")
	sim.CompleteCodon("code")
	waitMarker(t, exec, state, k(ckpt.KindCompleted, "code"))
	sim.Shutdown()

	recs := ledger(t, exec, state)
	assertKeys(t, recs, []markerKey{k(ckpt.KindRigSetup, "test"), k(ckpt.KindCompleted, "test"), k(ckpt.KindCompleted, "code")})
	inLedger := map[string]bool{}
	rigs := 0
	for _, r := range recs {
		inLedger[r.SHA] = true
		if r.Kind == ckpt.KindRigSetup {
			rigs++ // failed ones too
		}
	}
	if rigs != 1 {
		t.Errorf("%d rig-setup records, want the runtime's alone", rigs)
	}
	for _, line := range strings.Split(git(t, gitDir, "log", "--format=%H %s", "refs/heads/main..refs/heads/run-"+run), "\n") {
		if sha, subject, _ := strings.Cut(line, " "); !inLedger[sha] {
			t.Errorf("run-%s: commit %s (%s) is in no ledger record", run, sha, subject)
		}
	}
	if held := heldRefs(t, gitDir); len(held) > 0 {
		t.Errorf("captures left: %q", held)
	}
}

// TestInteropFirstRigSetupCaptured: a runtime that records no checkpoint of
// its own. The first codon's rig-setup is captured when the codon enters
// starting and recorded only when it leaves starting, holding the files as
// they were at starting: a file written in between is not in it (and the
// next checkpoint has it). A runtime that dies while starting gets the
// capture published before its exit. A daemon restarted while holding a
// capture drops it and captures again, marked sealed late.
func TestInteropFirstRigSetupCaptured(t *testing.T) {
	execA, simA := newHankExec(t, rigFirstPlan())
	execB, simB := newHankExec(t, rigFirstPlan())
	execC, simC := newHankExec(t, rigFirstPlan())
	state := t.TempDir()
	d := startDaemon(t, state, "--config", configFile(t, noAutosave), "--watch", execA, "--watch", execB, "--watch", execC)
	for _, exec := range []string{execA, execB, execC} {
		waitBaseline(t, exec, state)
	}

	// A: the codon leaves starting.
	runA := simA.StartRun()
	kA := func(kind ckpt.Kind, codon string) markerKey { return markerKey{kind, runA, codon, 0} }
	simA.BeginCodon("test")
	simA.Advance("test", "starting")
	waitCaptured(t, execA, state, kA(ckpt.KindRigSetup, "test"))
	written := time.Now()
	simA.WriteFile("tests/after-starting.txt", "after\n")
	simA.Advance("test", "initializing")
	rig := waitMarker(t, execA, state, kA(ckpt.KindRigSetup, "test"))
	gitA := hwStore(execA)
	files := treeFiles(t, gitA, rig.SHA)
	if !slices.Contains(files, "tests/fixture.txt") || slices.Contains(files, "tests/after-starting.txt") {
		t.Errorf("rig-setup holds %q, want the rig's fixture and not the file written after starting", files)
	}
	if rig.Adopted || rig.State != ckpt.StateOK || !rig.Time.Before(written) {
		t.Errorf("rig-setup: adopted=%v state %s %v, time %v (want before %v, the capture's)", rig.Adopted, rig.State, rig.Issues, rig.Time, written)
	}
	if tip := git(t, gitA, "rev-parse", "refs/heads/run-"+runA); tip != rig.SHA {
		t.Errorf("run-%s at %s, want the rig-setup %s", runA, tip, rig.SHA)
	}
	simA.Advance("test", "running")
	simA.CompleteCodon("test")
	done := waitMarker(t, execA, state, kA(ckpt.KindCompleted, "test"))
	if files := treeFiles(t, gitA, done.SHA); !slices.Contains(files, "tests/after-starting.txt") || done.Parent != rig.SHA {
		t.Errorf("completed test on %s holds %q, want the file written after starting, on the rig-setup", done.Parent, files)
	}

	// B: the runtime dies while starting.
	runB := simB.StartRun()
	kB := func(kind ckpt.Kind, codon string) markerKey { return markerKey{kind, runB, codon, 0} }
	simB.BeginCodon("test")
	simB.Advance("test", "starting")
	waitCaptured(t, execB, state, kB(ckpt.KindRigSetup, "test"))
	simB.Shutdown()
	exit := waitMarker(t, execB, state, kB(ckpt.KindExit, "test"))
	recsB := ledger(t, execB, state)
	assertKeys(t, recsB, []markerKey{kB(ckpt.KindRigSetup, "test"), kB(ckpt.KindExit, "test")})
	for _, r := range recsB {
		if keyOf(r) == kB(ckpt.KindRigSetup, "test") && exit.Parent != r.SHA {
			t.Errorf("exit on %s, want the published rig-setup %s", exit.Parent, r.SHA)
		}
	}

	// C: the daemon restarts while holding a capture.
	runC := simC.StartRun()
	kC := markerKey{ckpt.KindRigSetup, runC, "test", 0}
	simC.BeginCodon("test")
	simC.Advance("test", "starting")
	waitCaptured(t, execC, state, kC)
	gitC := hwStore(execC)
	before := heldRefs(t, gitC)
	d.stop(syscall.SIGTERM)
	d.start()
	waitFor(t, 20*time.Second, "the capture redone after the restart", func() bool {
		now := heldRefs(t, gitC)
		return len(now) == 1 && !slices.Equal(now, before)
	})
	simC.Advance("test", "initializing")
	late := waitMarker(t, execC, state, kC)
	if late.State != ckpt.StateRacy || len(late.Issues) == 0 || !strings.Contains(late.Issues[0].Reason, "sealed late") {
		t.Errorf("rig-setup after a restart: state %s %v, want racy, sealed late", late.State, late.Issues)
	}
	for _, g := range []string{gitA, hwStore(execB), gitC} {
		if held := heldRefs(t, g); len(held) > 0 {
			t.Errorf("%s: captures left: %q", g, held)
		}
	}
}

// TestInteropEditsBeforeMarkerNotRacy: while a codon runs (the daemon has
// read the state since it started), the agent edits files, then the codon
// completes. Whatever the edited files' times say (here set an hour ahead: a
// file time in the marker's own millisecond, or kernel tick, cannot be
// ordered against it either), the watch saw them change before the marker,
// so the checkpoint is not racy. A file written after the marker and held by
// its checkpoint is still named.
func TestInteropEditsBeforeMarkerNotRacy(t *testing.T) {
	const n = 5
	var parts []hwsim.Part
	for i := range n {
		// A rig setup gives each codon a checkpoint to wait for before editing.
		parts = append(parts, hwsim.Codon{ID: fmt.Sprintf("c%d", i), Files: []string{"**"},
			RigSetup: []hwsim.RigStep{hwsim.Command("prepare", map[string]string{fmt.Sprintf("rig-%d.txt", i): "rig\n"})}})
	}
	exec, sim := newHankExec(t, hwsim.Plan(parts...))
	state := t.TempDir()
	startDaemon(t, state, "--config", configFile(t, noAutosave), "--watch", exec)
	gitDir := hwStore(exec)
	waitBaseline(t, exec, state)
	ahead := time.Now().Add(time.Hour)
	touch := func(rel string) {
		t.Helper()
		if err := os.Chtimes(filepath.Join(exec, "agentRoot", rel), ahead, ahead); err != nil {
			t.Fatal(err)
		}
	}

	run := sim.StartRun()
	for i := range n {
		id := fmt.Sprintf("c%d", i)
		sim.StartCodon(id)
		waitMarker(t, exec, state, markerKey{ckpt.KindRigSetup, run, id, 0})
		// The codon runs: the daemon reads the state again (a heartbeat's
		// pass) before the agent edits.
		ow := newOpenWatch(t, filepath.Join(exec, ".hankweave"))
		sim.Heartbeat()
		ow.waitNames(t, 10*time.Second, "runtime.lock", "state.json")
		ow.close()
		edited := []string{fmt.Sprintf("edit-%d-a.txt", i), fmt.Sprintf("edit-%d-b.txt", i), "shared.txt"}
		for _, rel := range edited {
			sim.WriteFile(rel, fmt.Sprintf("codon %d\n", i))
			touch(rel)
		}
		sim.CompleteCodon(id)
		after := fmt.Sprintf("after-%d.txt", i)
		sim.WriteFile(after, "after\n")
		touch(after)
		r := waitMarker(t, exec, state, markerKey{ckpt.KindCompleted, run, id, 0})
		files := treeFiles(t, gitDir, r.SHA)
		named := map[string]bool{}
		for _, is := range r.Issues {
			named[is.Path] = true
		}
		for _, rel := range edited {
			if !slices.Contains(files, rel) {
				t.Errorf("%s: %s, edited before the marker, missing", id, rel)
			}
			if named[rel] {
				t.Errorf("%s: %s, edited before the marker, named racy: %+v", id, rel, r.Issues)
			}
		}
		if slices.Contains(files, after) && !named[after] {
			t.Errorf("%s: holds %s, written after the marker, but the record (%s) does not say so", id, after, r.State)
		}
		if r.State == ckpt.StateRacy && !named[after] {
			t.Errorf("%s: racy for %+v", id, r.Issues)
		}
	}
}

// openWatch reports the opens of a file, or of the files in a folder, by
// inotify (IN_OPEN): how a test learns that the daemon is trying to take a
// lock the test holds, or has read the runtime's files.
type openWatch struct {
	fd int
}

func newOpenWatch(t *testing.T, path string) *openWatch {
	t.Helper()
	fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC | syscall.IN_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := syscall.InotifyAddWatch(fd, path, syscall.IN_OPEN); err != nil {
		syscall.Close(fd)
		t.Fatal(err)
	}
	ow := &openWatch{fd: fd}
	t.Cleanup(ow.close)
	return ow
}

// close stops watching; a second call does nothing.
func (ow *openWatch) close() {
	if ow.fd >= 0 {
		syscall.Close(ow.fd)
		ow.fd = -1
	}
}

// opened reads the opens seen since the last call: for a folder, the names
// of the files opened in it; for a file, one "" per open.
func (ow *openWatch) opened(t *testing.T) []string {
	t.Helper()
	buf := make([]byte, 64<<10)
	var names []string
	for {
		n, err := syscall.Read(ow.fd, buf)
		if err != nil && !errors.Is(err, syscall.EAGAIN) {
			t.Fatal(err)
		}
		if n <= 0 {
			return names
		}
		for off := 0; off+syscall.SizeofInotifyEvent <= n; {
			ev := (*syscall.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := buf[off+syscall.SizeofInotifyEvent : off+syscall.SizeofInotifyEvent+int(ev.Len)]
			names = append(names, string(bytes.TrimRight(name, "\x00")))
			off += syscall.SizeofInotifyEvent + int(ev.Len)
		}
	}
}

// drain forgets the opens seen so far.
func (ow *openWatch) drain(t *testing.T) {
	ow.opened(t)
}

// wait waits for an open of the watched file.
func (ow *openWatch) wait(t *testing.T, within time.Duration, what string) {
	t.Helper()
	waitFor(t, within, what, func() bool { return len(ow.opened(t)) > 0 })
}

// waitNames waits until the files named names, in the watched folder, have
// been opened in that order.
func (ow *openWatch) waitNames(t *testing.T, within time.Duration, names ...string) {
	t.Helper()
	waitFor(t, within, fmt.Sprintf("the daemon to open %v", names), func() bool {
		for _, name := range ow.opened(t) {
			if len(names) > 0 && name == names[0] {
				names = names[1:]
			}
		}
		return len(names) == 0
	})
}
