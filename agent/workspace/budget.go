package workspace

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/cairn-dev/cairn/agent/config"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/checkpoints"
	"github.com/cairn-dev/cairn/platform"
	"github.com/cairn-dev/cairn/restore/ckpt"
	"github.com/cairn-dev/cairn/snapshot"
	"github.com/cairn-dev/cairn/snapshot/retain"
)

// Budgets and disk space (docs/operating.md, "Budgets and disk space"). After the
// retention pass, a budget pass drops more while the store is projected over
// max_store_size (or its share of max_total_size), in one fixed order
// (retain.BudgetOrder), never what retention protects. A store's bytes are
// Store.Stats (git's count-objects for objects/, a walk for the rest); what a
// drop frees is projected (Store.ProjectedBytes: the objects the remaining
// refs reach), because it leaves the disk only when maintenance prunes and
// repacks, which the daemon runs right after (budgetMaintain makes that run a
// full one with a short grace, so it frees what the pass dropped).

// budgetPruneGrace is the grace for unreachable objects in the maintenance
// after a budget pass dropped something: short, so a budget is met after
// that maintenance, yet long enough for a seal in flight (its fresh objects
// are seconds old). Budget drops are the oldest checkpoints.
const budgetPruneGrace = 15 * time.Minute

// freeSpace reads the free and total bytes of path's filesystem (a variable
// for tests).
var freeSpace = platform.FreeSpace

// diskFull says why autosaves must pause on the filesystem holding dir, ""
// when they may go on (or the free space cannot be read).
func diskFull(dir string, f config.DiskFloor) string {
	free, total, err := freeSpace(dir)
	if err != nil || total == 0 {
		return ""
	}
	if floor := f.Floor(total); free < floor {
		return fmt.Sprintf("disk almost full: %s free, floor %s", ckpt.HumanBytes(int64(free)), ckpt.HumanBytes(int64(floor)))
	}
	return ""
}

// autosavePaused is the autosave path's check (workspace.autosave): true
// when the store's filesystem is under the disk floor; status says so
// (autosavePaused) until an autosave may run again. Lifecycle, manual and
// pre-restore checkpoints never ask: they seal while they fit.
func (w *Workspace) autosavePaused() bool {
	st := w.Store()
	if st == nil {
		return false
	}
	why := diskFull(st.GitDir(), w.set.DiskFloor)
	w.mu.Lock()
	was := w.status.AutosavePaused
	w.mu.Unlock()
	if why != was {
		if why != "" {
			w.log.Warn().Str("reason", why).Msg("autosaves paused")
		} else {
			w.log.Info().Msg("autosaves resumed: disk space above the floor")
		}
		w.setStatus(func(s *api.WorkspaceStatus) { s.AutosavePaused = why })
	}
	return why != ""
}

// BudgetPlan is what a budget pass drops.
type BudgetPlan struct {
	Max       int64         // the budget
	Before    int64         // the store's bytes now
	Projected int64         // after the drops, once maintenance collects them
	Drops     []retain.Drop // in the fixed order
	// ProtectedOver: even with every drop the budget allows, the store stays
	// over it; what remains is protected and kept.
	ProtectedOver string
}

// PlanBudget is what st must drop, besides the refs in already (retention's
// plan), to weigh at most max bytes after maintenance: the shortest prefix
// of retain.BudgetOrder that gets there (a binary search over the
// projection, which shrinks as the prefix grows), or all of it, saying so,
// when the protected rest alone is over.
func PlanBudget(ctx context.Context, st *snapshot.Store, max int64, already []retain.Drop) (BudgetPlan, error) {
	stats, err := st.Stats(ctx)
	if err != nil {
		return BudgetPlan{Max: max}, err
	}
	return planBudget(ctx, st, stats, max, already)
}

// planBudget is PlanBudget on stats already measured (Prune's).
func planBudget(ctx context.Context, st *snapshot.Store, stats snapshot.StoreStats, max int64, already []retain.Drop) (BudgetPlan, error) {
	p := BudgetPlan{Max: max, Before: stats.Bytes}
	var err error
	without := map[string]bool{}
	for _, d := range already {
		without[d.Ref] = true
	}
	project := func(drops []retain.Drop) (int64, error) {
		w := make(map[string]bool, len(without)+len(drops))
		for r := range without {
			w[r] = true
		}
		for _, d := range drops {
			w[d.Ref] = true
		}
		return st.ProjectedBytes(ctx, stats, w)
	}
	if p.Projected, err = project(nil); err != nil {
		return p, err
	}
	if max <= 0 || p.Projected <= max {
		return p, nil
	}
	prot, err := checkpoints.Protect(st)
	if err != nil {
		return p, err
	}
	var cands []retain.Drop
	for _, d := range retain.BudgetOrder(st.Records(), prot, budgetRule(max)) {
		if !without[d.Ref] {
			cands = append(cands, d)
		}
	}
	all, err := project(cands)
	if err != nil {
		return p, err
	}
	if all > max {
		p.ProtectedOver = fmt.Sprintf("the protected checkpoints alone weigh %s, over the budget of %s: kept",
			ckpt.HumanBytes(all), ckpt.HumanBytes(max))
		if all >= p.Projected {
			// Kept checkpoints reach everything the candidates hold (a newer
			// one descends from them): dropping would free nothing and
			// only lose checkpoints.
			p.ProtectedOver += "; dropping the others would free nothing (kept checkpoints descend from them), so none was dropped"
			return p, nil
		}
		p.Drops, p.Projected = cands, all
		return p, nil
	}
	lo, hi, best := 1, len(cands), all // the smallest k with project(cands[:k]) <= max
	for lo < hi {
		mid := (lo + hi) / 2
		v, err := project(cands[:mid])
		if err != nil {
			return p, err
		}
		if v <= max {
			hi, best = mid, v
		} else {
			lo = mid + 1
		}
	}
	if hi == len(cands) {
		best = all
	}
	p.Drops, p.Projected = cands[:hi], best
	return p, nil
}

func budgetRule(max int64) string {
	return fmt.Sprintf("%s (max %s)", retain.BudgetRule, ckpt.HumanBytes(max))
}

// totals are the stores this process serves, as last measured, for
// max_total_size: every workspace of a non-root daemon, one owner's in a
// root daemon's worker.
var totals = struct {
	sync.Mutex
	bytes map[string]int64 // git dir → bytes
}{bytes: map[string]int64{}}

// noteTotal records a store's bytes and returns the sum over the stores of
// this process (those whose git dir still exists).
func noteTotal(gitDir string, n int64) (sum int64) {
	totals.Lock()
	defer totals.Unlock()
	totals.bytes[gitDir] = n
	for d, b := range totals.bytes {
		if _, err := os.Stat(d); err != nil {
			delete(totals.bytes, d)
			continue
		}
		sum += b
	}
	return sum
}

// effectiveBudget is the budget of a store of size bytes: max_store_size,
// lowered, when the stores together exceed max_total_size, to this store's
// share of the excess (in proportion to its size), so the stores together
// shed the excess once, each in its own fixed order.
func effectiveBudget(set config.Settings, gitDir string, size int64) int64 {
	max := int64(set.MaxStoreSize)
	if set.MaxTotalSize <= 0 {
		return max
	}
	sum := noteTotal(gitDir, size)
	if excess := sum - int64(set.MaxTotalSize); excess > 0 && sum > 0 {
		share := size - (excess*size+sum-1)/sum
		if max <= 0 || share < max {
			max = max64(share, 0)
		}
	}
	return max
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// PruneOptions configure Prune.
type PruneOptions struct {
	Policies     retain.Policies
	MaxStoreSize int64 // 0: no budget
	MaxTotalSize int64 // with the stores this process measured (the daemon)
	DryRun       bool
	BudgetOnly   bool          // the daemon's budget pass: retention ran just before
	PruneGrace   time.Duration // of the maintenance a real run ends with; 0: budgetPruneGrace
}

// Prune applies the retention policies, then the size budget, to st now:
// `cairn prune`, and the daemon's idle pass (without the maintenance, which
// the daemon runs after it). A dry run only plans, with the projection of
// what it frees; a real run drops, then runs a full maintenance (grace
// opts.PruneGrace) and measures.
func Prune(ctx context.Context, st *snapshot.Store, opts PruneOptions, now time.Time, maintain bool) (api.PruneResult, error) {
	res := api.PruneResult{Workspace: st.Dir(), DryRun: opts.DryRun, Drops: []api.PruneDrop{}}
	var drops []retain.Drop
	var err error
	if !opts.BudgetOnly {
		if drops, err = checkpoints.PlanRetention(st, opts.Policies); err != nil {
			return res, err
		}
	}
	stats, err := st.Stats(ctx)
	if err != nil {
		return res, err
	}
	max := opts.MaxStoreSize
	if opts.MaxTotalSize > 0 {
		max = effectiveBudget(config.Settings{MaxStoreSize: config.Size(opts.MaxStoreSize), MaxTotalSize: config.Size(opts.MaxTotalSize)}, st.GitDir(), stats.Bytes)
	}
	// With no budget drops, bp.Projected is already what retention alone frees.
	bp, err := planBudget(ctx, st, stats, max, drops)
	if err != nil {
		return res, err
	}
	drops = append(drops, bp.Drops...)
	res.BytesBefore, res.Projected, res.MaxStoreBytes, res.ProtectedOver = bp.Before, bp.Projected, max, bp.ProtectedOver
	skipped := map[string]string{}
	if !opts.DryRun && len(drops) > 0 {
		dr, err := st.Drop(ctx, drops, now)
		for _, sk := range dr.Skipped {
			skipped[sk.Drop.Ref] = sk.Reason
		}
		if err != nil {
			return res, err
		}
	}
	for _, d := range drops {
		last := d.Records[len(d.Records)-1]
		pd := api.PruneDrop{Ref: d.Ref, Unit: string(d.Unit), Kind: string(last.Kind), Time: last.Time, Rule: d.Rule, Skipped: skipped[d.Ref]}
		for _, r := range d.Records {
			pd.IDs = append(pd.IDs, r.ID)
		}
		res.Drops = append(res.Drops, pd)
	}
	if opts.DryRun || !maintain {
		return res, nil
	}
	grace := opts.PruneGrace
	if grace == 0 {
		grace = budgetPruneGrace
	}
	mr, err := st.Maintain(ctx, snapshot.MaintainOptions{Full: true, PruneGrace: grace})
	ar := maintenanceResult(st.Dir(), mr, err)
	res.Maintenance, res.BytesAfter = &ar, mr.After.Bytes
	return res, err
}

// applyBudget is the daemon's budget pass, after retention (applyRetention
// calls it): it drops what the budget asks and notes the pass in status,
// where budgetMaintain reads whether the maintenance that follows must
// collect what it dropped.
func (w *Workspace) applyBudget(ctx context.Context, st *snapshot.Store) {
	if w.set.MaxStoreSize <= 0 && w.set.MaxTotalSize <= 0 {
		return
	}
	res, err := Prune(ctx, st, PruneOptions{BudgetOnly: true, MaxStoreSize: int64(w.set.MaxStoreSize), MaxTotalSize: int64(w.set.MaxTotalSize)}, time.Now(), false)
	if err != nil {
		w.log.Warn().Err(err).Msg("budget")
		return
	}
	b := &api.Budget{MaxBytes: res.MaxStoreBytes, Projected: res.Projected, At: time.Now().UTC(), ProtectedOver: res.ProtectedOver}
	for _, d := range res.Drops {
		if d.Skipped == "" {
			b.Dropped += len(d.IDs)
		}
	}
	if b.ProtectedOver != "" {
		w.log.Warn().Str("reason", b.ProtectedOver).Msg("budget: protected checkpoints over budget")
	}
	if b.Dropped > 0 {
		w.log.Info().Int("checkpoints", b.Dropped).Int64("bytes_before", res.BytesBefore).Int64("projected", res.Projected).
			Int64("budget", res.MaxStoreBytes).Msg("budget: dropped to fit")
	}
	w.setStatus(func(s *api.WorkspaceStatus) { s.Budget = b })
}

// budgetMaintain adjusts the maintenance that follows a budget pass that
// dropped checkpoints: a full one, with the short grace, so what the pass
// dropped leaves the disk now.
func (w *Workspace) budgetMaintain(opts *snapshot.MaintainOptions) {
	w.mu.Lock()
	b := w.status.Budget
	w.mu.Unlock()
	// Only a pass that dropped something leaves bytes for a full repack to
	// free; over budget with nothing droppable, a full repack every idle
	// pass would cost much and free nothing.
	if b == nil || b.Dropped == 0 {
		return
	}
	opts.Full = true
	if opts.PruneGrace == 0 || opts.PruneGrace > budgetPruneGrace {
		opts.PruneGrace = budgetPruneGrace
	}
}

// pruneOptions are a workspace's settings as Prune takes them.
func PruneOptionsFor(set config.Settings) PruneOptions {
	return PruneOptions{Policies: set.Retention.Merge(config.Retention(retain.Defaults())).Policies(),
		MaxStoreSize: int64(set.MaxStoreSize), MaxTotalSize: int64(set.MaxTotalSize), PruneGrace: min(set.GCPruneGrace.Duration, budgetPruneGrace)}
}
