package agent

import (
	"context"
	"errors"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/hankweave"
	"github.com/cairn-dev/cairn/restore"
	"github.com/cairn-dev/cairn/snapshot"
)

// Verify compares the checkpoint target names (empty: the newest with a
// commit) with what git alone would record for the work tree now, under
// patterns (nil: the store's defaults), and looks up every object it names
// (snapshot.Store.Verify). Targets resolve as for show and restore; a ledger
// id or SHA prefix whose commit git no longer confirms is still verified,
// so its missing objects are reported rather than refused.
func Verify(ctx context.Context, st *snapshot.Store, patterns []string, target string) (api.Verification, error) {
	if target == "" {
		return st.Verify(ctx, patterns, "")
	}
	t, err := restore.ParseTarget(target)
	if err != nil {
		return api.Verification{}, err
	}
	rec, err := ResolveTarget(ctx, st, t)
	var unusable *restore.UnusableError
	switch {
	case err == nil:
		return st.Verify(ctx, patterns, rec.SHA)
	case errors.As(err, &unusable) && (t.Kind == restore.TargetID || t.Kind == restore.TargetSHA):
		return st.Verify(ctx, patterns, target)
	}
	return api.Verification{}, err
}

// PlanPatterns is the selection a Hankweave workspace's next seal uses: the
// union of checkpointedFiles in the plan of its state.json through the codon
// running now (or last run), configured excludes not added. ok is false for
// another layout, or with no readable plan.
func PlanPatterns(st *snapshot.Store) ([]string, bool) {
	if st.Layout() != snapshot.LayoutHankweave {
		return nil, false
	}
	hs, err := hankweave.ReadState(st.Dir())
	if err != nil {
		return nil, false
	}
	return (&hankState{last: hs}).currentPatterns()
}

// verifyPatterns is the selection the daemon would use for the workspace's
// next seal: the plan's (excludes added) for a Hankweave workspace with a
// plan, else the store's own (configured patterns and excludes). It reads
// state.json afresh, touching nothing of the workspace's goroutine.
func (w *workspace) verifyPatterns(st *snapshot.Store) []string {
	if pats, ok := PlanPatterns(st); ok {
		return w.patterns(pats)
	}
	return nil
}
