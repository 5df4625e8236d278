package workspace

import (
	"context"
	"time"

	"github.com/cairn-dev/cairn/agent/config"

	"github.com/cairn-dev/cairn/agent/checkpoints"
	"github.com/cairn-dev/cairn/snapshot/retain"
)

// Retention (docs/operating.md, "Retention"): the daemon applies it from a
// workspace's idle pass; what it may drop and the plan are package
// workspace's (Protect, PlanRetention, ApplyRetention).

// applyRetention applies the workspace's retention policies to its store.
// It runs on the workspace's goroutine (the maintenance idle pass calls it),
// never during a restore, and only logs: a failure is retried at the next pass.
func (w *Workspace) applyRetention(ctx context.Context) {
	st := w.Store()
	if st == nil || w.rolling.Load() || w.gone {
		return
	}
	ps := w.set.Retention.Merge(config.Retention(retain.Defaults())).Policies()
	res, err := checkpoints.ApplyRetention(ctx, st, ps, time.Now())
	for _, sk := range res.Skipped {
		w.log.Debug().Str("ref", sk.Drop.Ref).Str("reason", sk.Reason).Msg("retention: drop skipped")
	}
	if err != nil {
		w.log.Warn().Err(err).Msg("retention")
		return
	}
	if len(res.Pruned) > 0 {
		w.log.Info().Int("checkpoints", len(res.Pruned)).Int("refs", len(res.Refs)).Msg("retention: pruned")
	}
	w.applyBudget(ctx, st) // budget.go: max_store_size, max_total_size
	w.replicateSoon("")    // replication.go: push the deletions
}
