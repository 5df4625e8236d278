package agent

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/hankweave"
	"github.com/cairn-dev/cairn/restore"
	"github.com/cairn-dev/cairn/snapshot"
)

// Restores and rollbacks (README.md, "Restore and rollback"). The functions
// here are shared by the daemon (which runs them on the workspace's
// goroutine) and by the cairn command when no daemon runs (which runs them on
// the store directly, under its lock).

// ErrCodonRunning is the runtime's refusal while the runtime runs a codon.
//
//lint:ignore ST1005 the runtime's exact wording (docs/runtime-formats.md)
var ErrCodonRunning = errors.New(restore.ErrCodonRunning)

// Checkpoints converts ledger records for restore.Resolve.
func Checkpoints(recs []snapshot.Record) []restore.Checkpoint {
	out := make([]restore.Checkpoint, 0, len(recs))
	for _, r := range recs {
		out = append(out, restore.Checkpoint{ID: r.ID, SHA: r.SHA, Kind: string(r.Kind), Label: r.Label,
			CodonID: r.CodonID, CodonName: r.CodonName, RunID: r.RunID, Attempt: r.Attempt, Time: r.Time,
			State: string(r.State)})
	}
	return out
}

// ResolveTarget finds the checkpoint a target names; a record counts only
// when git confirms its commit. A SHA prefix is matched as the runtime's
// rollback.toCheckpoint matches it: the SHAs state.json records, the ledger,
// then the store's commits (main's first one too). The record is the
// ledger's, or one made from git for a commit outside the ledger (no id).
func ResolveTarget(ctx context.Context, st *snapshot.Store, t restore.Target) (restore.Checkpoint, snapshot.Record, error) {
	recs := st.Records()
	confirmed := func(sha string) bool {
		_, err := st.Git().Run(ctx, nil, "cat-file", "-e", "--end-of-options", sha+"^{commit}")
		return err == nil
	}
	src := restore.Sources{Confirmed: confirmed}
	if t.Kind == restore.TargetSHA || t.Kind == restore.TargetID { // an id may fall back to a SHA prefix
		src.Runtime = runtimeCheckpoints(st)
		src.Commits = func(prefix string) []restore.Checkpoint { return storeCommits(ctx, st, prefix) }
	}
	c, err := restore.ResolveIn(Checkpoints(recs), t, src)
	if err != nil {
		return c, snapshot.Record{}, err
	}
	if c.InLedger() {
		for _, r := range recs {
			if r.ID == c.ID {
				return c, r, nil
			}
		}
	}
	rec, err := outsideRecord(ctx, st, c)
	return c, rec, err
}

// runtimeCheckpoints are the checkpoints state.json records for every codon
// record of every run (Hankweave layout). An unreadable state has none: git
// still finds the runtime's commits, only without their codon.
func runtimeCheckpoints(st *snapshot.Store) []restore.Checkpoint {
	if st.Layout() != snapshot.LayoutHankweave {
		return nil
	}
	hs, err := hankweave.ReadState(st.Dir())
	if err != nil {
		return nil
	}
	names := map[string]string{}
	for _, e := range hs.ExecutionPlan {
		if e.Codon.Name != "" {
			names[e.CodonID] = e.Codon.Name
		}
	}
	var out []restore.Checkpoint
	for _, run := range hs.Runs {
		attempts := map[string]int{}
		for _, rec := range run.Codons {
			n := attempts[rec.CodonID]
			attempts[rec.CodonID]++
			for _, k := range []struct{ kind, sha, at string }{
				{restore.KindRigSetup, rec.RigSetupSHA, rec.StartTime},
				{restore.KindCompleted, rec.CompletionSHA, rec.EndTime},
				{restore.KindError, rec.ErrorSHA, rec.EndTime},
				{restore.KindSkipped, rec.SkipSHA, rec.EndTime},
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
				out = append(out, restore.Checkpoint{SHA: sha, Kind: k.kind, CodonID: rec.CodonID, CodonName: name,
					RunID: run.RunID, Attempt: n, Time: when, State: string(snapshot.StateOK)})
			}
		}
	}
	return out
}

// runtimeSubject is the first line of a lifecycle commit the runtime made:
// {status}:{codonId} [run:{runId}] {codonName}.
var runtimeSubject = regexp.MustCompile(`^([a-z-]+):(\S+) \[run:([^\]\s]+)\] ?(.*)$`)

// storeCommits lists the commits of the store whose SHA begins with prefix
// and that a branch or one of cairn's refs reaches: a commit nothing
// references (a seal abandoned half-way) is no checkpoint.
func storeCommits(ctx context.Context, st *snapshot.Store, prefix string) []restore.Checkpoint {
	g := st.Git()
	out, err := g.Run(ctx, nil, "rev-parse", "--disambiguate="+prefix)
	objs := strings.Fields(string(out))
	if err != nil || len(objs) == 0 {
		return nil
	}
	out, err = g.Run(ctx, strings.NewReader(strings.Join(objs, "\n")+"\n"), "cat-file", "--batch-check=%(objectname) %(objecttype)")
	if err != nil {
		return nil
	}
	var commits []string
	for _, l := range strings.Split(string(out), "\n") {
		if sha, typ, _ := strings.Cut(l, " "); typ == "commit" {
			ref, err := g.Run(ctx, nil, "for-each-ref", "--count=1", "--format=%(refname)", "--contains", sha, "refs/heads", "refs/cairn")
			if err == nil && len(strings.TrimSpace(string(ref))) > 0 {
				commits = append(commits, sha)
			}
		}
	}
	if len(commits) == 0 {
		return nil
	}
	out, err = g.Run(ctx, nil, append([]string{"log", "--no-walk=unsorted", "--format=%H%x1f%cI%x1f%s%x1e"}, commits...)...)
	if err != nil {
		return nil
	}
	var cps []restore.Checkpoint
	for _, c := range strings.Split(string(out), "\x1e") {
		f := strings.SplitN(strings.TrimLeft(c, "\n"), "\x1f", 3)
		if len(f) != 3 {
			continue
		}
		cp := restore.Checkpoint{SHA: f[0], Label: f[2], State: string(snapshot.StateOK)}
		cp.Time, _ = time.Parse(time.RFC3339, f[1])
		if m := runtimeSubject.FindStringSubmatch(f[2]); m != nil && snapshot.Kind(m[1]).IsLifecycle() {
			cp.Kind, cp.CodonID, cp.RunID, cp.CodonName, cp.Label = m[1], m[2], m[3], m[4], ""
		}
		cps = append(cps, cp)
	}
	return cps
}

// outsideRecord describes a commit the ledger lacks as a record without an
// id, with its parent and what it changed, for results and cairn show.
func outsideRecord(ctx context.Context, st *snapshot.Store, c restore.Checkpoint) (snapshot.Record, error) {
	rec := snapshot.Record{SHA: c.SHA, Kind: snapshot.Kind(c.Kind), Label: c.Label, CodonID: c.CodonID,
		CodonName: c.CodonName, RunID: c.RunID, Attempt: c.Attempt, Time: c.Time, State: snapshot.StateOK}
	out, err := st.Git().Run(ctx, nil, "show", "-s", "--format=%P", "--end-of-options", c.SHA)
	if err != nil {
		return rec, fmt.Errorf("read commit %s: %w", c.Short(), err)
	}
	if ps := strings.Fields(string(out)); len(ps) > 0 {
		rec.Parent = ps[0]
	}
	out, err = st.Git().Run(ctx, nil, "diff-tree", "-r", "--root", "--no-commit-id", "--no-renames", "--name-status", "-z", "--end-of-options", c.SHA)
	if err != nil {
		return rec, fmt.Errorf("diff commit %s: %w", c.Short(), err)
	}
	f := strings.Split(string(out), "\x00")
	for i := 0; i+1 < len(f); i += 2 {
		switch f[i] {
		case "A":
			rec.Added++
		case "D":
			rec.Removed++
		default:
			rec.Changed++
		}
	}
	return rec, nil
}

// CodonRunning reports whether a Hankweave runtime is running a codon in
// dir: its lock is live and the current run has a record that is not terminal.
func CodonRunning(dir string) bool {
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

// RestoreOp is one restore to carry out.
type RestoreOp struct {
	Target restore.Target
	Paths  []string
	DryRun bool
	// Continue records the continuation in state.json (a Hankweave
	// workspace whose runtime is not running; whole restores only).
	Continue bool
	Progress func(step, total int, msg string)
	// Resolved, when set, is called once the target is known, before anything changes.
	Resolved func(c restore.Checkpoint)
	// Changed is what changed since the last seal, when a watch knows it
	// (nil: the pre-restore checkpoint reconciles the whole work tree).
	Changed []string
}

// RunRestore resolves op.Target over the store's ledger and restores the
// work tree to it. dir is the workspace (the execution directory for the
// Hankweave layout).
func RunRestore(ctx context.Context, st *snapshot.Store, dir string, op RestoreOp) (api.RestoreResult, error) {
	hank := st.Layout() == snapshot.LayoutHankweave
	if hank && !op.DryRun && CodonRunning(dir) {
		return api.RestoreResult{}, ErrCodonRunning
	}
	c, rec, err := ResolveTarget(ctx, st, op.Target)
	if err != nil {
		return api.RestoreResult{}, err
	}
	if op.Resolved != nil {
		op.Resolved(c)
	}
	position := st.Position()
	res, err := st.Restore(ctx, snapshot.RestoreOptions{Target: c.SHA, Label: c.ID, Paths: op.Paths,
		DryRun: op.DryRun, Progress: op.Progress, Changed: op.Changed})
	out := toAPIResult(res, rec)
	out.Paths = op.Paths
	if err != nil {
		return out, err
	}
	if hank && !op.DryRun && len(op.Paths) == 0 {
		ar, aerr := restoreArchive(ctx, st, dir, c.SHA, position)
		out.Archive = ar
		if aerr != nil {
			return out, fmt.Errorf("restore rigArchive/: %w", aerr)
		}
	}
	if hank && op.Continue && !op.DryRun && len(op.Paths) == 0 {
		cont, note, cerr := RecordContinuation(dir, c, Checkpoints(st.Records()))
		out.Continued, out.StateNote = cont, note
		if cerr != nil {
			out.StateNote = "state.json not updated: " + cerr.Error()
		}
	}
	return out, nil
}

// Undo restores the newest pre-restore checkpoint (itself undoable).
// op's Paths, DryRun, Progress and Resolved are used; its target is the
// pre-restore checkpoint, and state.json is never touched.
func Undo(ctx context.Context, st *snapshot.Store, dir string, op RestoreOp) (api.RestoreResult, error) {
	recs := st.Records()
	for i := len(recs) - 1; i >= 0; i-- {
		r := recs[i]
		if r.Kind == snapshot.KindPreRestore && r.SHA != "" && r.State != snapshot.StateFailed {
			op.Target, op.Continue = restore.ByID(r.ID), false
			return RunRestore(ctx, st, dir, op)
		}
	}
	return api.RestoreResult{}, errors.New("nothing to undo: no pre-restore checkpoint in the ledger")
}

func toAPIResult(res snapshot.RestoreResult, target snapshot.Record) api.RestoreResult {
	conv := func(v []snapshot.PlanFile) []api.PlanFile {
		out := []api.PlanFile{}
		for _, f := range v {
			out = append(out, api.PlanFile{Path: f.Path, Size: f.Size, Action: f.Action})
		}
		return out
	}
	out := api.RestoreResult{Target: toAPIRecord(target), Write: conv(res.Write), Delete: conv(res.Delete),
		Kept: res.Kept, DryRun: res.DryRun}
	if res.PreRestore != nil {
		r := toAPIRecord(*res.PreRestore)
		out.PreRestore = &r
	}
	for _, d := range res.Diff {
		out.Diff = append(out.Diff, api.PathIssue{Path: d.Path, Reason: d.Reason})
	}
	return out
}

// NewRunID makes a run id the way the runtime does: <ms>-<5 base-36 characters>.
func NewRunID(now time.Time) string {
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

// RecordContinuation writes the rollback into state.json as the runtime
// does (docs/runtime-formats.md, "state.json"): the abandoned run completed
// with an endTime, then a new continuation run, first and current, resuming
// after the target's codon. Unknown fields are preserved. No state.json:
// nothing to do (note says so). It refuses while the runtime's lock is live.
func RecordContinuation(dir string, target restore.Checkpoint, cps []restore.Checkpoint) (*api.Continuation, string, error) {
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
	cont := &api.Continuation{}
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

	// Where the new run resumes: after the target's codon; a rig-setup
	// target resumes before it (null); a checkpoint outside the lifecycle
	// resumes after the newest codon that ended before it.
	srcRun, after := target.RunID, (*string)(nil)
	switch {
	case target.Kind == restore.KindRigSetup:
	case target.CodonID != "":
		a := target.CodonID
		after = &a
	default:
		if c, ok := endedBefore(cps, target); ok {
			a := c.CodonID
			after = &a
			if srcRun == "" {
				srcRun = c.RunID
			}
		}
	}
	if srcRun == "" && from != nil {
		srcRun = from.RunID
	}
	id := NewRunID(now)
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

// endedBefore is the newest terminal codon checkpoint older than c in the ledger.
func endedBefore(cps []restore.Checkpoint, c restore.Checkpoint) (restore.Checkpoint, bool) {
	var best restore.Checkpoint
	found := false
	for _, x := range cps {
		if x.CodonID == "" || x.ID == c.ID || x.Time.After(c.Time) || !x.Usable() {
			continue
		}
		switch x.Kind {
		case restore.KindCompleted, restore.KindError, restore.KindSkipped:
		default:
			continue
		}
		if !found || !x.Time.Before(best.Time) {
			best, found = x, true
		}
	}
	return best, found
}

// targetError maps a restore error to an HTTP status and code.
func targetError(err error) (int, string) {
	var inv *restore.InvalidTargetError
	var amb *restore.AmbiguousError
	var unusable *restore.UnusableError
	switch {
	case errors.Is(err, ErrCodonRunning):
		return 409, "CODON_RUNNING"
	case restore.IsNotFound(err):
		return 404, "UNKNOWN_CHECKPOINT"
	case errors.As(err, &inv):
		return 400, "INVALID_TARGET"
	case errors.As(err, &amb):
		return 409, "AMBIGUOUS_CHECKPOINT"
	case errors.As(err, &unusable):
		return 409, "UNUSABLE_CHECKPOINT"
	case strings.HasPrefix(err.Error(), "nothing to undo"):
		return 409, "NOTHING_TO_UNDO"
	}
	return 500, "RESTORE_FAILED"
}

// describe is a one-line name for a checkpoint in messages.
func describe(c restore.Checkpoint) string {
	s := c.Name() + " (" + c.Short() + ", " + c.Kind
	if c.CodonID != "" {
		s += " " + c.CodonID
	}
	return s + ")"
}

// restoreArchive brings back files the runtime archived on the line the
// restore abandons (target..position), or as orphans.
func restoreArchive(ctx context.Context, st *snapshot.Store, dir, target, position string) (*api.ArchiveRestore, error) {
	abandoned := map[string]bool{}
	if position != "" && position != target {
		out, err := st.Git().Run(ctx, nil, "rev-list", target+".."+position)
		if err != nil {
			return nil, err
		}
		for _, sha := range strings.Fields(string(out)) {
			abandoned[sha] = true
		}
	}
	res, err := hankweave.RestoreArchive(dir, st.WorkTree(), func(sha string) bool { return abandoned[strings.ToLower(sha)] })
	if err != nil {
		return nil, err
	}
	if len(res.Restored)+len(res.Protected)+len(res.Failed) == 0 {
		return nil, nil
	}
	ar := &api.ArchiveRestore{RestoredPaths: res.Restored, ProtectedPaths: res.Protected, FailedPaths: res.Failed, Status: "ok"}
	if len(res.Failed) > 0 {
		ar.Status = "partial"
	}
	if ar.RestoredPaths == nil {
		ar.RestoredPaths = []string{}
	}
	return ar, nil
}
