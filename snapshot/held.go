package snapshot

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/cairn-dev/cairn/platform"
	"github.com/cairn-dev/cairn/restore/ckpt"
)

// heldPrefix is where a captured checkpoint waits to be published: outside
// refs/heads/ and refs/cairn/, so it is never listed, replicated nor
// recovered into the ledger, while git keeps its objects like any ref's
// (docs/cairn-formats.md, "Refs").
const heldPrefix = "refs/cairn-held/"

// Held is a checkpoint sealed but not published: its commit is on a held ref
// and in no ledger record, and its run's branch has not moved.
type Held struct {
	Ref      string      // the held ref, refs/cairn-held/<id>
	Branch   string      // the ref Publish moves (refs/heads/run-<runId>)
	Tip      string      // the branch's value when captured (zeroSHA: not made yet)
	Position string      // the position when captured
	Record   ckpt.Record // the record Publish appends: the captured tree's commit and time
	req      SealRequest
}

// Capture seals a run's checkpoint as Seal does, on the tip of the run's
// branch, with the files as they are now, but publishes nothing: the commit
// goes on a held ref, with no ledger record, no branch move and no new
// position. Publish records it later, or Discard drops it. A capture that
// fails is recorded as a failed seal is.
func (s *Store) Capture(ctx context.Context, req SealRequest) (Held, error) {
	var h Held
	ctx = withProgress(ctx, req.Progress)
	err := s.withLock(ctx, func() error {
		if err := s.refreshIfChanged(ctx); err != nil {
			return err
		}
		if req.RunID == "" || req.Ref != "" {
			return errors.New("only a checkpoint on its run's branch can be captured")
		}
		req.hold = heldPrefix + s.nextID()
		branch, _, tip, _ := s.target(ctx, req, "") // an error is sealLocked's to record
		pos := s.position()
		rec, err := s.sealLocked(ctx, req)
		h = Held{Ref: req.hold, Branch: branch, Tip: tip, Position: pos, Record: rec, req: req}
		if err == nil && (rec.SHA == "" || rec.Ref != req.hold) {
			err = fmt.Errorf("capture sealed nothing on %s", req.hold)
		}
		return err
	})
	return h, err
}

// Publish records a captured checkpoint and moves its run's branch to it,
// as if it had been sealed then: its tree and time are the capture's. When
// the branch moved or checkpoints were recorded since the capture, its tree
// is committed again on the branch's tip under the next id, so that the
// branch and the ledger stay in order. The held ref is removed.
func (s *Store) Publish(ctx context.Context, h Held) (ckpt.Record, error) {
	var rec ckpt.Record
	err := s.withLock(ctx, func() error {
		if err := s.refreshIfChanged(ctx); err != nil {
			return err
		}
		if tip, ok := s.refTip(ctx, h.Ref); !ok || tip != h.Record.SHA {
			return fmt.Errorf("captured checkpoint %s (%s) is no longer on %s", h.Record.ID, h.Record.SHA, h.Ref)
		}
		rec = h.Record
		rec.Ref = h.Branch
		cur := zeroSHA
		if tip, ok := s.refTip(ctx, h.Branch); ok {
			cur = tip
		}
		if cur != h.Tip || s.recordedSince(rec.ID) {
			var err error
			if rec, err = s.recommit(ctx, h, rec, cur); err != nil {
				return err
			}
		}
		if _, err := s.git.Run(ctx, nil, "update-ref", "-m", "cairn: "+string(rec.Kind)+" "+rec.ID, h.Branch, rec.SHA, cur); err != nil {
			return fmt.Errorf("ref %s moved while publishing (another writer?); not overwritten: %w", h.Branch, err)
		}
		if s.position() == h.Position { // no checkpoint sealed or restored since the capture
			s.notePosition(rec.SHA)
		}
		if err := s.appendRecord(rec); err != nil {
			return err
		}
		if err := s.dropHeld(ctx, h.Ref, h.Record.SHA); err != nil {
			zerologCtx(ctx).Warn().Err(err).Str("ref", h.Ref).Msg("published, but its held ref stays until the next start")
		}
		return nil
	})
	if err != nil {
		return ckpt.Record{}, err // nothing published, whatever was made on the way
	}
	return rec, nil
}

// recordedSince reports whether the ledger holds a record newer than id.
// Callers hold the lock.
func (s *Store) recordedSince(id string) bool {
	return len(s.records) > 0 && idNum(s.records[len(s.records)-1].ID) > idNum(id)
}

// recommit seals the captured tree again on the branch's tip cur (or on the
// capture's parent while the branch is not made), with the capture's time,
// under the next id.
func (s *Store) recommit(ctx context.Context, h Held, rec ckpt.Record, cur string) (ckpt.Record, error) {
	parent := h.Record.Parent
	if cur != zeroSHA {
		parent = cur
	}
	rec.ID = s.nextID()
	ts := isoTime(rec.Time)
	out, err := s.git.withEnv("GIT_AUTHOR_DATE="+ts, "GIT_COMMITTER_DATE="+ts).Run(ctx,
		strings.NewReader(message(h.req, rec, "", rec.Time)), "commit-tree", h.Record.SHA+"^{tree}", "-p", parent, "-F", "-")
	if err != nil {
		return rec, err
	}
	sha := strings.TrimSpace(string(out))
	a, c, r, err := s.diffCounts(ctx, parent, sha)
	if err != nil {
		return rec, err
	}
	if err := platform.SyncFS(s.gitDir); err != nil { // the commit is on disk before a ref names it
		return rec, err
	}
	rec.SHA, rec.Parent = sha, parent
	rec.Added, rec.Changed, rec.Removed = a, c, r
	rec.Republished = true // in the ledger: what cairn's index stands for is the record before it (lastSealed)
	return rec, nil
}

// Discard drops a captured checkpoint: its held ref is removed, and with it
// the only name of its commit (maintenance prunes it).
func (s *Store) Discard(ctx context.Context, h Held) error {
	return s.withLock(ctx, func() error { return s.dropHeld(ctx, h.Ref, h.Record.SHA) })
}

// DiscardHeld drops every captured checkpoint left by an earlier process
// (one that ended while holding them), and returns their refs.
func (s *Store) DiscardHeld(ctx context.Context) ([]string, error) {
	var gone []string
	err := s.withLock(ctx, func() error {
		tips, err := s.refTips(ctx)
		if err != nil {
			return err
		}
		var errs []error
		for ref, sha := range tips {
			if !strings.HasPrefix(ref, heldPrefix) {
				continue
			}
			if err := s.dropHeld(ctx, ref, sha); err != nil {
				errs = append(errs, err)
				continue
			}
			gone = append(gone, ref)
		}
		return errors.Join(errs...)
	})
	return gone, err
}

// dropHeld removes the held ref if it still names sha. Callers hold the lock.
func (s *Store) dropHeld(ctx context.Context, ref, sha string) error {
	if !strings.HasPrefix(ref, heldPrefix) {
		return fmt.Errorf("%s is not a held ref", ref)
	}
	if _, err := s.git.Run(ctx, nil, "update-ref", "-d", ref, sha); err != nil {
		return fmt.Errorf("remove %s: %w", ref, err)
	}
	return nil
}
