package checkpoints

import (
	"context"
	"errors"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/hankweave"
	"github.com/cairn-dev/cairn/restore"
	"github.com/cairn-dev/cairn/restore/ckpt"
	"github.com/cairn-dev/cairn/snapshot"
)

// Verify compares the checkpoint target names (empty: the newest with a
// commit) with what git alone would record for the work tree now, and looks
// up every object it names (snapshot.Store.Verify). Targets resolve as for
// show and restore; a ledger id or SHA prefix whose commit git no longer
// confirms is still verified, so its missing objects are reported rather
// than refused.
//
// The selection is the one a seal of that checkpoint would use now: in a
// Hankweave workspace with a plan (state.json, read afresh), the union of
// checkpointedFiles through the checkpoint's codon, or through the codon
// running now (or last run) for a checkpoint without one, passed through
// excludes (the daemon adds its configured excludes; nil adds none);
// otherwise the store's own patterns.
func Verify(ctx context.Context, st *snapshot.Store, target string, excludes func([]string) []string) (api.Verification, error) {
	rec, id, err := verifyTarget(ctx, st, target)
	if err != nil {
		return api.Verification{}, err
	}
	var pats []string
	if p, ok := planPatterns(st, rec.CodonID); ok {
		pats = p
		if excludes != nil {
			pats = excludes(p)
		}
	}
	return st.Verify(ctx, pats, id)
}

// verifyTarget is the record target names (as far as the ledger knows it)
// and what to hand the store: a full SHA, or the ledger id or prefix itself
// when git does not confirm the commit.
func verifyTarget(ctx context.Context, st *snapshot.Store, target string) (ckpt.Record, string, error) {
	recs := st.Records()
	if target == "" {
		for i := len(recs) - 1; i >= 0; i-- {
			if recs[i].Usable() {
				return recs[i], recs[i].ID, nil
			}
		}
		return ckpt.Record{}, "", nil // the store names the lack of one
	}
	t, err := restore.ParseTarget(target)
	if err != nil {
		return ckpt.Record{}, "", err
	}
	rec, err := ResolveTarget(ctx, st, t)
	var unusable *restore.UnusableError
	switch {
	case err == nil:
		return rec, rec.SHA, nil
	case errors.As(err, &unusable) && (t.Kind == restore.TargetID || t.Kind == restore.TargetSHA):
		for _, r := range recs {
			if t.Kind == restore.TargetID && r.ID == t.ID {
				rec = r
			}
		}
		return rec, target, nil
	}
	return ckpt.Record{}, "", err
}

// planPatterns is a Hankweave workspace's plan selection through codon
// (empty: the codon running now, or last run), configured excludes not
// added. ok is false for another layout, or with no readable plan.
func planPatterns(st *snapshot.Store, codon string) ([]string, bool) {
	if st.Layout() != snapshot.LayoutHankweave {
		return nil, false
	}
	hs, err := hankweave.ReadState(st.Dir())
	if err != nil {
		return nil, false
	}
	if codon == "" {
		return CurrentPatterns(hs)
	}
	if len(hs.ExecutionPlan) == 0 {
		return nil, false
	}
	return PlanUnion(hs, codon), true
}
