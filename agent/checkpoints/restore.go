package checkpoints

import (
	"context"
	"crypto/rand"
	"errors"
	"io/fs"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/autodev"
	"github.com/cairn-dev/cairn/agent/hankweave"
	"github.com/cairn-dev/cairn/restore"
	"github.com/cairn-dev/cairn/restore/ckpt"
	"github.com/cairn-dev/cairn/snapshot"
)

// Restores and rollbacks (README.md, "Restore and rollback"). The functions
// here are shared by the daemon (which runs them on the workspace's
// goroutine) and by the cairn command when no daemon runs (which runs them on
// the store directly, under its lock).

// The Hankweave side of a restore: restore.Run drives the pipeline over the
// store (restore.Store) and this runtime (restore.Runtime).

// hankRuntime is a Hankweave runtime's workspace, for restore.Run.
type hankRuntime struct {
	st  *snapshot.Store
	dir string // the execution directory
}

// runtimeFor is the runtime of the workspace dir, nil for a plain one.
func runtimeFor(st *snapshot.Store, dir string) restore.Runtime {
	if st.Layout() != snapshot.LayoutHankweave {
		return nil
	}
	return hankRuntime{st: st, dir: dir}
}

func (h hankRuntime) CodonRunning() bool { return codonRunning(h.dir) }

func (h hankRuntime) Checkpoints() []ckpt.Record { return runtimeCheckpoints(h.st.Dir()) }

func (h hankRuntime) RestoreArchive(ctx context.Context, target, from string) (*restore.Archive, error) {
	return restoreArchive(ctx, h.st, h.dir, target, from)
}

func (h hankRuntime) RecordContinuation(target ckpt.Record, at restore.Resume) (*restore.Continuation, string, error) {
	return recordContinuation(h.dir, target, at)
}

// ResolveTarget finds the checkpoint a target names in the workspace of st
// (restore.ResolveTarget, with the SHAs state.json records).
func ResolveTarget(ctx context.Context, st *snapshot.Store, t restore.Target) (ckpt.Record, error) {
	return restore.ResolveTarget(ctx, st, runtimeFor(st, st.Dir()), t)
}

// runtimeCheckpoints are the checkpoints state.json records for every codon
// record of every run. An unreadable state has none: git still finds the
// runtime's commits, only without their codon.
func runtimeCheckpoints(dir string) []ckpt.Record {
	hs, err := hankweave.ReadState(dir)
	if err != nil {
		return nil
	}
	names := map[string]string{}
	for _, e := range hs.ExecutionPlan {
		if e.Codon.Name != "" {
			names[e.CodonID] = e.Codon.Name
		}
	}
	var out []ckpt.Record
	for _, run := range hs.Runs {
		attempts := map[string]int{}
		for _, rec := range run.Codons {
			n := attempts[rec.CodonID]
			attempts[rec.CodonID]++
			for _, k := range []struct {
				kind    ckpt.Kind
				sha, at string
			}{
				{ckpt.KindRigSetup, rec.RigSetupSHA, rec.StartTime},
				{ckpt.KindCompleted, rec.CompletionSHA, rec.EndTime},
				{ckpt.KindError, rec.ErrorSHA, rec.EndTime},
				{ckpt.KindSkipped, rec.SkipSHA, rec.EndTime},
			} {
				sha := strings.ToLower(strings.TrimSpace(k.sha))
				if sha == "" {
					continue
				}
				when, _ := time.Parse(time.RFC3339Nano, k.at)
				name := names[rec.CodonID]
				if name == "" {
					name = rec.CodonID
				}
				out = append(out, ckpt.Record{SHA: sha, Kind: k.kind, CodonID: rec.CodonID, CodonName: name,
					RunID: run.RunID, Attempt: n, Time: when, State: ckpt.StateOK})
			}
		}
	}
	return out
}

// codonRunning reports whether a Hankweave runtime is running a codon in
// dir: its lock is live and the current run has a record that is not terminal.
func codonRunning(dir string) bool {
	lk, err := hankweave.ReadLock(dir)
	if err != nil || lk == nil || !lk.Alive(time.Now()) {
		return false
	}
	st, err := hankweave.ReadState(dir)
	if err != nil {
		return false
	}
	_, rec, _ := hankweave.Active(st)
	return rec != nil
}

// RunRestore restores the workspace dir (the execution directory for the
// Hankweave layout) to op.Target: restore.Run over the store and the
// workspace's runtime, answered as the API answers it.
func RunRestore(ctx context.Context, st *snapshot.Store, dir string, op restore.Op) (api.RestoreResult, error) {
	res, err := restore.Run(ctx, st, runtimeFor(st, dir), op)
	return toAPIResult(res), err
}

// Undo restores the newest pre-restore checkpoint (restore.Undo); state.json
// is never touched.
func Undo(ctx context.Context, st *snapshot.Store, dir string, op restore.Op) (api.RestoreResult, error) {
	res, err := restore.Undo(ctx, st, runtimeFor(st, dir), op)
	return toAPIResult(res), err
}

// RunAutodev restores an autodev workspace's repository to op.Target (undo:
// to its newest pre-restore checkpoint) as every layout is restored,
// restore.Run or restore.Undo over the repository (autodev.Store), answered
// as the API answers it, with the layout and the seed's line.
func RunAutodev(ctx context.Context, repo *autodev.Repo, undo bool, op restore.Op) (api.RestoreResult, error) {
	run := restore.Run
	if undo {
		run = restore.Undo
	}
	res, err := run(ctx, autodev.NewStore(ctx, repo), nil, op)
	out := toAPIResult(res)
	if res.Target.SHA != "" {
		out.Layout, out.Message = autodev.LayoutName, autodev.Message(res.Target, res.Outcome.SavedOn)
	}
	return out, err
}

// toAPIResult is a restore's result as the API answers it; a restore that
// never began (refused, or its target unresolved) is the zero result.
func toAPIResult(res restore.Result) api.RestoreResult {
	if res.Target.SHA == "" {
		return api.RestoreResult{}
	}
	// Never null on the wire: an empty plan is [].
	conv := func(v []ckpt.PlanFile) []api.PlanFile { return append([]api.PlanFile{}, v...) }
	oc := res.Outcome
	out := api.RestoreResult{Target: res.Target, Write: conv(oc.Write), Delete: conv(oc.Delete),
		Kept: oc.Kept, DryRun: oc.DryRun, Paths: res.Paths, StateNote: res.StateNote, SavedOn: oc.SavedOn}
	if oc.PreRestore != nil {
		r := *oc.PreRestore
		out.PreRestore = &r
	}
	out.Diff = append(out.Diff, oc.Diff...)
	out.LeftOut = append(out.LeftOut, oc.LeftOut...)
	if a := res.Archive; a != nil {
		out.Archive = &api.ArchiveRestore{RestoredPaths: a.Restored, ProtectedPaths: a.Protected, FailedPaths: a.Failed, Status: a.Status}
	}
	if c := res.Continued; c != nil {
		out.Continued = &api.Continuation{FromRun: c.FromRun, ToRun: c.ToRun, SourceRun: c.SourceRun,
			AfterCodon: c.AfterCodon, CheckpointSHA: c.CheckpointSHA}
	}
	return out
}

// newRunID makes a run id the way the runtime does: <ms>-<5 base-36 characters>.
func newRunID(now time.Time) string {
	const digits = "0123456789abcdefghijklmnopqrstuvwxyz"
	var b strings.Builder
	for range 5 {
		n, err := rand.Int(rand.Reader, big.NewInt(36))
		if err != nil {
			n = big.NewInt(now.UnixNano() % 36)
		}
		b.WriteByte(digits[n.Int64()])
	}
	return strconv.FormatInt(now.UnixMilli(), 10) + "-" + b.String()
}

// recordContinuation writes the rollback into state.json as the runtime
// does (docs/runtime-formats.md, "state.json"): the abandoned run completed
// with an endTime, then a new continuation run, first and current, resuming
// where at says (restore.ResumeAt). Unknown fields are preserved. No
// state.json: nothing to do (note says so).
func recordContinuation(dir string, target ckpt.Record, at restore.Resume) (*restore.Continuation, string, error) {
	st, err := hankweave.ReadState(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, "no state.json: no run to continue", nil
		}
		return nil, "", err
	}
	now := time.Now()
	stamp := now.UTC().Format("2006-01-02T15:04:05.000Z")
	var from *hankweave.Run
	if from = st.CurrentRun(); from == nil && len(st.Runs) > 0 {
		from = &st.Runs[0]
	}
	cont := &restore.Continuation{}
	folder := ""
	if from != nil {
		cont.FromRun = from.RunID
		if from.Status == hankweave.RunRunning {
			from.Status = hankweave.RunCompleted
		}
		if from.EndTime == "" {
			from.EndTime = stamp
		}
		if from.RunID != "" && strings.Contains(from.RunFolder, from.RunID) {
			folder = from.RunFolder
		}
	}
	st.CurrentRunID = nil

	srcRun, after := at.SourceRun, at.AfterCodon
	if srcRun == "" && from != nil {
		srcRun = from.RunID
	}
	id := newRunID(now)
	if folder != "" {
		folder = strings.Replace(folder, from.RunID, id, 1)
	}
	run := hankweave.Run{RunID: id, RunFolder: folder, GitBranch: "run-" + id,
		StartingConditions: hankweave.StartingConditions{Type: "continuation", Reason: "rollback",
			Source: &hankweave.ContinuationSource{RunID: srcRun, AfterCodon: after, CheckpointSHA: target.SHA}},
		Codons: []hankweave.CodonExecution{}, Status: hankweave.RunRunning, StartTime: stamp}
	if from != nil {
		run.ServerPID = from.ServerPID
	}
	st.Runs = append([]hankweave.Run{run}, st.Runs...)
	st.CurrentRunID = &id
	if err := hankweave.WriteState(dir, st); err != nil {
		return nil, "", err
	}
	cont.ToRun, cont.SourceRun, cont.AfterCodon, cont.CheckpointSHA = id, srcRun, after, target.SHA
	return cont, "", nil
}

// Describe is a one-line name for a checkpoint in messages.
func Describe(c ckpt.Record) string {
	s := c.Name() + " (" + c.Short() + ", " + string(c.Kind)
	if c.CodonID != "" {
		s += " " + c.CodonID
	}
	return s + ")"
}

// restoreArchive brings back files the runtime archived on the line the
// restore abandons (what position descends from and target does not, by
// git's parents and the ledger's), or as orphans.
func restoreArchive(ctx context.Context, st *snapshot.Store, dir, target, position string) (*restore.Archive, error) {
	shas, err := st.Abandoned(ctx, target, position)
	if err != nil {
		return nil, err
	}
	abandoned := map[string]bool{}
	for _, sha := range shas {
		abandoned[sha] = true
	}
	res, err := hankweave.RestoreArchive(dir, st.WorkTree(), func(sha string) bool { return abandoned[strings.ToLower(sha)] })
	if err != nil {
		return nil, err
	}
	if len(res.Restored)+len(res.Protected)+len(res.Failed) == 0 {
		return nil, nil
	}
	ar := &restore.Archive{Restored: res.Restored, Protected: res.Protected, Failed: res.Failed, Status: "ok"}
	if len(res.Failed) > 0 {
		ar.Status = "partial"
	}
	if ar.Restored == nil {
		ar.Restored = []string{}
	}
	return ar, nil
}
