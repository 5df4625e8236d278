package autodev

import (
	"context"
	"errors"
	"fmt"

	"github.com/cairn-dev/cairn/restore"
	"github.com/cairn-dev/cairn/restore/ckpt"
)

// The repository as a restore sees it: restore.Run and restore.Undo restore
// an autodev workspace as they restore every other layout (README.md,
// "Restore and rollback"); what is the layout's own stays here: a restore is
// Repo.Restore (park a dirty tree, then git reset --hard), it has no dry run
// and no partial restore, and its refusals are the seed's words.

// Refusals of what the layout cannot do; the API answers them 400.
var (
	ErrNoDryRun = errors.New("the autodev layout has no dry run: a restore is git reset --hard, after parking a dirty tree")
	ErrNoPaths  = errors.New("the autodev layout has no partial restore: a restore is git reset --hard of the whole tree")
)

// Store is one restore's view of the repository: a restore.Store and a
// restore.Gate. Its ledger is the list as NewStore read it.
type Store struct {
	repo    *Repo
	records []ckpt.Record // oldest first
	err     error         // reading the list
}

var (
	_ restore.Store = (*Store)(nil)
	_ restore.Gate  = (*Store)(nil)
)

// NewStore reads the list of r for one restore. A folder that is no
// repository has an empty list; an error reading it is the store's Check.
func NewStore(ctx context.Context, r *Repo) *Store {
	s := &Store{repo: r}
	l, err := r.List(ctx)
	if err != nil {
		s.err = err
		return s
	}
	for i := len(l.Entries) - 1; i >= 0; i-- {
		s.records = append(s.records, l.Entries[i].Record())
	}
	return s
}

// Records is the list, oldest first.
func (s *Store) Records() []ckpt.Record { return s.records }

// HasCommit reports whether the repository holds sha as a commit. Asked only
// once Admit let the restore begin (git may run in the repository).
func (s *Store) HasCommit(ctx context.Context, sha string) bool {
	_, err := s.repo.run(ctx, "", nil, nil, "cat-file", "-e", sha+"^{commit}")
	return err == nil
}

// Commits is empty: the repository's other commits are no checkpoints.
func (s *Store) Commits(context.Context, string) []ckpt.Record { return nil }

// Describe is never needed (every target is a listed checkpoint): rec as it is.
func (s *Store) Describe(_ context.Context, rec ckpt.Record) (ckpt.Record, error) { return rec, nil }

// Check refuses a dry run and a partial restore, and reports an error met
// reading the list.
func (s *Store) Check(op restore.Op) error {
	switch {
	case op.DryRun:
		return ErrNoDryRun
	case len(op.Paths) > 0:
		return ErrNoPaths
	}
	return s.err
}

// Admit refuses, in the order Repo.Restore checks them, a restore that cannot
// begin: what Check refuses, a live run, a repository git may not run in,
// a list that could not be read, a target that is neither an id nor a
// commit prefix.
func (s *Store) Admit(_ context.Context, op restore.Op) error {
	switch {
	case op.DryRun:
		return ErrNoDryRun
	case len(op.Paths) > 0:
		return ErrNoPaths
	case RunLive(s.repo.dir):
		return &RestoreError{Live: true}
	}
	if err := s.repo.ownGitDir(); errors.Is(err, ErrNotRepo) {
		return &RestoreError{Reason: MsgNotRepo, Err: ErrNotRepo}
	} else if err != nil {
		return &RestoreError{Reason: err.Error(), Err: err}
	}
	if s.err != nil {
		return &RestoreError{Reason: s.err.Error(), Err: s.err}
	}
	if k := op.Target.Kind; k != restore.TargetID && k != restore.TargetSHA {
		return &RestoreError{Reason: "unknown checkpoint: " + op.Target.String(), Unknown: true}
	}
	return nil
}

// Unresolved words a target that did not resolve as Repo.Restore does.
func (s *Store) Unresolved(t restore.Target, err error) error {
	var un *restore.UnusableError
	if errors.As(err, &un) {
		c := un.Checkpoint
		return &RestoreError{Reason: fmt.Sprintf("checkpoint %s: commit %s is no longer in the repository", c.ID, short(c.SHA)), Err: err}
	}
	return &RestoreError{Reason: "unknown checkpoint: " + t.String(), Unknown: true, Err: err}
}

// Restore parks a dirty tree and resets the repository to the checkpoint
// (Repo.Restore). The pre-restore checkpoint is the work it replaced;
// SavedOn the branch a dirty tree was parked on.
func (s *Store) Restore(ctx context.Context, req ckpt.Request) (ckpt.Outcome, error) {
	switch {
	case req.DryRun:
		return ckpt.Outcome{}, ErrNoDryRun
	case len(req.Paths) > 0:
		return ckpt.Outcome{}, ErrNoPaths
	}
	target := req.Label // the checkpoint's id
	if target == "" {
		target = req.Target
	}
	res, err := s.repo.Restore(ctx, target)
	oc := ckpt.Outcome{Target: res.Target.Commit, SavedOn: res.SavedOn}
	if res.PreRestore.ID != "" {
		pre := res.PreRestore.Record()
		oc.PreRestore, oc.From = &pre, pre.SHA
	}
	return oc, err
}

// Message is the seed's line for a restore to target: Restored to
// "<label>" (<sha7>); saved on <branch>.
func Message(target ckpt.Record, savedOn string) string {
	return Restored{Target: Entry{Label: target.Label, Commit: target.SHA}, SavedOn: savedOn}.Message()
}
