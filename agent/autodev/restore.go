package autodev

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/agent/hankweave"
)

// RestoreError is a restore that did not happen (or failed half-way): its
// message is the seed's, "Restore failed: <reason>".
type RestoreError struct {
	Reason string
	// Unknown: no checkpoint has that id. Live: a run is live.
	Unknown, Live bool
	Err           error
}

func (e *RestoreError) Error() string {
	if e.Live {
		return MsgRunLive
	}
	return "Restore failed: " + e.Reason
}

func (e *RestoreError) Unwrap() error { return e.Err }

// Restored is what a restore did.
type Restored struct {
	Target     Entry
	PreRestore Entry  // the work it replaced: parked (dirty tree) or HEAD as it was
	SavedOn    string // the branch the work was parked on; empty for a clean tree
}

// Message is the seed's line: Restored to "<label>" (<sha7>); saved on <branch>.
func (r Restored) Message() string {
	s := fmt.Sprintf("Restored to %q (%s)", r.Target.Label, short(r.Target.Commit))
	if r.SavedOn != "" {
		s += "; saved on " + r.SavedOn
	}
	return s + "."
}

func short(sha string) string { return sha[:min(7, len(sha))] }

// RunLive reports whether an agent run is live in dir: the runtime's lock is
// held by a live process with a fresh heartbeat.
func RunLive(dir string) bool {
	l, err := hankweave.ReadLock(dir)
	return err == nil && l.Alive(time.Now())
}

var hexRE = regexp.MustCompile(`^[0-9a-f]{4,64}$`)

// find is the entry with that id, or the one whose commit begins with it.
func find(entries []Entry, target string) (Entry, bool) {
	for _, e := range entries {
		if e.ID == target {
			return e, true
		}
	}
	if !hexRE.MatchString(target) {
		return Entry{}, false
	}
	var hit []Entry
	for _, e := range entries {
		if strings.HasPrefix(e.Commit, target) && !containsCommit(hit, e.Commit) {
			hit = append(hit, e)
		}
	}
	if len(hit) == 1 {
		return hit[0], true
	}
	return Entry{}, false
}

func containsCommit(es []Entry, sha string) bool {
	for _, e := range es {
		if e.Commit == sha {
			return true
		}
	}
	return false
}

// Restore rewinds the repository to the checkpoint target (an id, or a prefix
// of its commit): a dirty tree is first committed onto a new branch
// autodev/pre-restore-<time>, a clean one is reset directly; then git reset
// --hard to the checkpoint, and a pre-restore entry records the work it
// replaced, so restoring that entry undoes the restore. If the work cannot be
// parked, nothing is rewound.
func (r *Repo) Restore(ctx context.Context, target string) (Restored, error) {
	if RunLive(r.dir) {
		return Restored{}, &RestoreError{Live: true}
	}
	if err := r.ownGitDir(); errors.Is(err, ErrNotRepo) {
		return Restored{}, &RestoreError{Reason: MsgNotRepo, Err: ErrNotRepo}
	} else if err != nil {
		return Restored{}, &RestoreError{Reason: err.Error(), Err: err}
	}
	unlock, err := r.lock()
	if err != nil {
		return Restored{}, &RestoreError{Reason: err.Error(), Err: err}
	}
	defer unlock()
	entries, err := r.load(ctx)
	if err != nil {
		return Restored{}, &RestoreError{Reason: err.Error(), Err: err}
	}
	to, ok := find(entries, target)
	if !ok {
		return Restored{}, &RestoreError{Reason: "unknown checkpoint: " + target, Unknown: true}
	}
	st, err := r.probe(ctx)
	if err != nil {
		return Restored{}, &RestoreError{Reason: err.Error(), Err: err}
	}
	if _, err := r.run(ctx, "", nil, nil, "cat-file", "-e", to.Commit+"^{commit}"); err != nil {
		return Restored{}, &RestoreError{Reason: fmt.Sprintf("checkpoint %s: commit %s is no longer in the repository", to.ID, short(to.Commit)), Err: err}
	}
	tree, dirty, err := r.tree(ctx, st)
	if err != nil {
		return Restored{}, &RestoreError{Reason: "cannot read the work to park: " + err.Error(), Err: err}
	}
	now := r.Now().UTC()
	pre := Entry{ID: nextID(entries), Label: "before restoring " + to.ID + " (" + to.Label + ")", Kind: KindPreRestore,
		Time: now.Truncate(time.Second), Commit: st.head}
	if dirty {
		pre.Branch = ParkPrefix + now.Format("2006-01-02T15-04-05-000Z")
		sha, err := r.commit(ctx, tree, st.head, pre, pre.Time)
		if err == nil {
			err = r.moveBranch(ctx, "refs/heads/"+pre.Branch, sha, "", SubjectPrefix+pre.Label)
		}
		if err != nil {
			return Restored{}, &RestoreError{Reason: "cannot park the work on " + pre.Branch + ": " + err.Error() + "; nothing was rewound", Err: err}
		}
		pre.Commit = sha
		// The index takes the parked tree, so the reset removes the parked
		// files the checkpoint lacks, as it would after git commit -a.
		if _, err := r.run(ctx, "", nil, nil, "read-tree", "-i", "-m", sha); err != nil {
			_ = r.save(append(entries, pre)) // the parked work stays findable
			return Restored{}, &RestoreError{Reason: "cannot stage the parked work: " + err.Error() + "; nothing was rewound, the work is also on " + pre.Branch, Err: err}
		}
	} else if st.head == "" {
		pre = Entry{} // nothing committed and nothing to keep
	}
	// reset --hard names the restore in the reflogs of HEAD and the branch.
	if _, err := r.run(ctx, "", nil, []string{"GIT_REFLOG_ACTION=autodev: restore " + to.ID}, "reset", "-q", "--hard", to.Commit); err != nil {
		reason := "git reset --hard " + short(to.Commit) + ": " + err.Error()
		if pre.Branch != "" {
			reason += "; your work is also saved on " + pre.Branch
			_ = r.save(append(entries, pre)) // the parked work stays findable
		}
		return Restored{}, &RestoreError{Reason: reason, Err: err}
	}
	res := Restored{Target: to, SavedOn: pre.Branch}
	if pre.Commit != "" {
		entries = append(entries, pre)
		res.PreRestore = pre
		if err := r.save(entries); err != nil {
			return res, fmt.Errorf("restored, but the pre-restore entry (commit %s) could not be listed: %w", pre.Commit, err)
		}
	}
	return res, nil
}
