package restore

import (
	"context"
	"fmt"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// The restore pipeline (README.md, "Restore and rollback"): resolve the
// target, refuse while the runtime runs a codon, then the store seals a
// pre-restore checkpoint, plans, applies and verifies; a whole restore of a
// runtime's workspace then brings back what the runtime archived and records
// the continuation. The daemon runs it on the workspace's goroutine, the
// cairn command on the store under its lock.

// Store is what a restore asks of the shadow store (snapshot.Store).
type Store interface {
	// Records is the ledger, oldest first.
	Records() []ckpt.Record
	// HasCommit reports whether git holds sha as a commit.
	HasCommit(ctx context.Context, sha string) bool
	// Commits lists the store's commits whose SHA begins with prefix, as
	// records without an id.
	Commits(ctx context.Context, prefix string) []ckpt.Record
	// Describe completes a record of a commit the ledger lacks (parent,
	// what it changed).
	Describe(ctx context.Context, rec ckpt.Record) (ckpt.Record, error)
	// Restore seals a pre-restore checkpoint, plans, applies and verifies.
	Restore(ctx context.Context, req ckpt.Request) (ckpt.Outcome, error)
}

// Gate is a Store that decides itself whether a restore may begin, and
// words the refusals: the autodev layout (agent/autodev), whose checkpoints
// are commits in the user's own repository and whose refusals are the
// seed's "Restore failed: <reason>". Run and Undo ask it when the store is one.
type Gate interface {
	// Check refuses, before the ledger is read, what no restore of the
	// store can do (a dry run, a partial restore), and reports the error
	// reading the ledger met (Records is then empty).
	Check(op Op) error
	// Admit refuses a restore that cannot begin now (an agent run is live,
	// the repository is busy); Run asks it before resolving the target.
	Admit(ctx context.Context, op Op) error
	// Unresolved is the answer to a target that did not resolve with err.
	Unresolved(t Target, err error) error
}

// Runtime is the agent runtime whose workspace is restored (Hankweave): its
// running codon, the checkpoints it recorded itself, its archive and its
// state. A workspace without one (plain layout) passes nil.
type Runtime interface {
	// CodonRunning reports whether the runtime is running a codon now.
	CodonRunning() bool
	// Checkpoints are the checkpoints the runtime recorded (no ledger id).
	Checkpoints() []ckpt.Record
	// RestoreArchive brings back the files the runtime archived on the line
	// a restore from position from to target abandons; nil when none.
	RestoreArchive(ctx context.Context, target, from string) (*Archive, error)
	// RecordContinuation records in the runtime's state that work continues
	// from target, resuming where at says. No state to record into: a nil
	// continuation and a note saying why.
	RecordContinuation(target ckpt.Record, at Resume) (*Continuation, string, error)
}

// Op is one restore to carry out.
type Op struct {
	Target Target
	Paths  []string
	DryRun bool
	// Continue records the continuation in the runtime's state (whole
	// restores of a runtime's workspace only).
	Continue bool
	Progress func(step, total int, msg string)
	// Resolved, when set, is called once the target is known, before anything changes.
	Resolved func(c ckpt.Record)
	// Changed is what changed since the last seal, when a watch knows it
	// (nil: the pre-restore checkpoint reconciles the whole work tree).
	Changed []string
}

// Result is what a restore did (or, dry, would do).
type Result struct {
	Target    ckpt.Record // the checkpoint restored to; zero when the restore never began
	Outcome   ckpt.Outcome
	Paths     []string
	Archive   *Archive      // what came back from the runtime's archive
	Continued *Continuation // the run the runtime's state now continues with
	StateNote string        // why the runtime's state was not updated, when it was not
}

// Archive is what a restore brought back from the runtime's archive.
type Archive struct {
	Restored  []string
	Protected []string // the destination exists: left as it is
	Failed    []string
	Status    string // ok, partial
}

// Continuation is the run a rollback recorded in the runtime's state.
type Continuation struct {
	FromRun       string
	ToRun         string
	SourceRun     string
	AfterCodon    *string
	CheckpointSHA string
}

// ResolveTarget finds the checkpoint a target names; a record counts only
// when git confirms its commit. A SHA prefix is matched as the runtime's
// rollback.toCheckpoint matches it: the SHAs the runtime recorded, the
// ledger, then the store's commits (main's first one too). The record is
// the ledger's, or one made from git for a commit outside the ledger (no id).
// rt may be nil.
func ResolveTarget(ctx context.Context, st Store, rt Runtime, t Target) (ckpt.Record, error) {
	recs := st.Records()
	src := Sources{Confirmed: func(sha string) bool { return st.HasCommit(ctx, sha) }}
	if t.Kind == TargetSHA || t.Kind == TargetID { // an id may fall back to a SHA prefix
		if rt != nil {
			src.Runtime = rt.Checkpoints()
		}
		src.Commits = func(prefix string) []ckpt.Record { return st.Commits(ctx, prefix) }
	}
	c, err := ResolveIn(recs, t, src)
	if err != nil {
		return ckpt.Record{}, err
	}
	if c.InLedger() {
		for _, r := range recs {
			if r.ID == c.ID {
				return r, nil
			}
		}
	}
	c.State = ckpt.StateOK
	return st.Describe(ctx, c)
}

// Run resolves op.Target over the store's ledger and restores the work tree
// to it. rt is the workspace's runtime, nil for none.
func Run(ctx context.Context, st Store, rt Runtime, op Op) (Result, error) {
	if rt != nil && !op.DryRun && rt.CodonRunning() {
		return Result{}, ErrCodonRunning
	}
	g, gated := st.(Gate)
	if gated {
		if err := g.Admit(ctx, op); err != nil {
			return Result{}, err
		}
	}
	rec, err := ResolveTarget(ctx, st, rt, op.Target)
	if err != nil {
		if gated {
			err = g.Unresolved(op.Target, err)
		}
		return Result{}, err
	}
	if op.Resolved != nil {
		op.Resolved(rec)
	}
	oc, err := st.Restore(ctx, ckpt.Request{Target: rec.SHA, Label: rec.ID, Paths: op.Paths,
		DryRun: op.DryRun, Progress: op.Progress, Changed: op.Changed})
	out := Result{Target: rec, Outcome: oc, Paths: op.Paths}
	if err != nil {
		return out, err
	}
	whole := rt != nil && !op.DryRun && len(op.Paths) == 0
	if whole {
		ar, aerr := rt.RestoreArchive(ctx, rec.SHA, oc.From)
		out.Archive = ar
		if aerr != nil {
			return out, fmt.Errorf("restore rigArchive/: %w", aerr)
		}
	}
	if whole && op.Continue {
		cont, note, cerr := rt.RecordContinuation(rec, ResumeAt(rec, st.Records()))
		out.Continued, out.StateNote = cont, note
		if cerr != nil {
			out.StateNote = "state.json not updated: " + cerr.Error()
		}
	}
	return out, nil
}

// Undo restores the newest pre-restore checkpoint (itself undoable). op's
// Paths, DryRun, Progress, Resolved and Changed are used; its target is the
// pre-restore checkpoint, and the runtime's state is never touched.
func Undo(ctx context.Context, st Store, rt Runtime, op Op) (Result, error) {
	if g, ok := st.(Gate); ok {
		if err := g.Check(op); err != nil {
			return Result{}, err
		}
	}
	recs := st.Records()
	for i := len(recs) - 1; i >= 0; i-- {
		r := recs[i]
		if r.Kind == ckpt.KindPreRestore && r.SHA != "" && r.State != ckpt.StateFailed {
			op.Target, op.Continue = ByID(r.ID), false
			return Run(ctx, st, rt, op)
		}
	}
	return Result{}, ErrNothingToUndo
}

// Resume is where the run continuing from a checkpoint picks up: after
// AfterCodon (nil: from the start of SourceRun's plan).
type Resume struct {
	SourceRun  string // empty: the runtime's current run
	AfterCodon *string
}

// ResumeAt is where work continues after a rollback to target, given the
// ledger: after the target's codon; a rig-setup target resumes before it
// (nil); a checkpoint outside the lifecycle resumes after the newest codon
// that ended before it.
func ResumeAt(target ckpt.Record, ledger []ckpt.Record) Resume {
	r := Resume{SourceRun: target.RunID}
	switch {
	case target.Kind == ckpt.KindRigSetup:
	case target.CodonID != "":
		a := target.CodonID
		r.AfterCodon = &a
	default:
		if c, ok := endedBefore(ledger, target); ok {
			a := c.CodonID
			r.AfterCodon = &a
			if r.SourceRun == "" {
				r.SourceRun = c.RunID
			}
		}
	}
	return r
}

// endedBefore is the newest terminal codon checkpoint older than c in the ledger.
func endedBefore(cps []ckpt.Record, c ckpt.Record) (ckpt.Record, bool) {
	var best ckpt.Record
	found := false
	for _, x := range cps {
		if x.CodonID == "" || x.ID == c.ID || x.Time.After(c.Time) || !x.Usable() {
			continue
		}
		switch x.Kind {
		case ckpt.KindCompleted, ckpt.KindError, ckpt.KindSkipped:
		default:
			continue
		}
		if !found || !x.Time.Before(best.Time) {
			best, found = x, true
		}
	}
	return best, found
}

// CodonsAfter counts the codons whose lifecycle checkpoints came after the
// target: the work a rollback to it undoes.
func CodonsAfter(recs []ckpt.Record, target ckpt.Record) int {
	seen := map[string]bool{}
	for _, r := range recs {
		if r.CodonID != "" && r.Kind.IsLifecycle() && r.Time.After(target.Time) && r.SHA != target.SHA {
			seen[r.RunID+"/"+r.CodonID] = true
		}
	}
	return len(seen)
}
