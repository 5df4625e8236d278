package snapshot

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// AdoptRequest names a checkpoint the runtime sealed itself.
type AdoptRequest struct {
	SHA       string
	Kind      ckpt.Kind
	CodonID   string
	CodonName string
	RunID     string
	Attempt   int
}

// Adopt records a commit the runtime already made (a SHA from its state
// file) in the ledger, after git confirms it is a commit of the store. No new
// commit is made. Adopting the same SHA twice returns the first record.
func (s *Store) Adopt(ctx context.Context, req AdoptRequest) (ckpt.Record, error) {
	var rec ckpt.Record
	err := s.withLock(ctx, func() error {
		if err := s.refreshIfChanged(ctx); err != nil {
			return err
		}
		full, ok := s.resolve(ctx, req.SHA+"^{commit}")
		if !ok {
			return fmt.Errorf("runtime checkpoint %s is not a commit of the store", req.SHA)
		}
		for _, r := range s.records {
			if r.SHA == full && r.Kind == req.Kind {
				rec = r
				return nil
			}
		}
		out, err := s.git.Run(ctx, nil, "show", "-s", "--format=%P%x1f%cI", full)
		if err != nil {
			return err
		}
		parent, when, _ := strings.Cut(strings.TrimSpace(string(out)), "\x1f")
		t, _ := time.Parse(time.RFC3339, when)
		rec = ckpt.Record{ID: s.nextID(), SHA: full, Parent: strings.Fields(parent + " ")[0], Kind: req.Kind,
			CodonID: req.CodonID, CodonName: req.CodonName, RunID: req.RunID, Attempt: req.Attempt,
			Time: t.UTC(), State: ckpt.StateOK, Adopted: true}
		if req.RunID != "" {
			rec.Ref = "refs/heads/run-" + req.RunID
		}
		if rec.Parent != "" {
			if rec.Added, rec.Changed, rec.Removed, err = s.diffCounts(ctx, rec.Parent, full); err != nil {
				return err
			}
		}
		return s.appendRecord(rec)
	})
	return rec, err
}
