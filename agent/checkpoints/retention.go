package checkpoints

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/hankweave"
	"github.com/cairn-dev/cairn/restore/ckpt"
	"github.com/cairn-dev/cairn/snapshot"
	"github.com/cairn-dev/cairn/snapshot/retain"
)

// Retention (docs/operating.md, "Retention"): what no policy may drop, the plan for
// one store, and carrying it out. The daemon applies it from a workspace's
// idle pass (applyRetention); `cairn prune` calls PlanRetention and
// ApplyRetention directly.

// Protect is what no retention policy drops in st's workspace: the
// checkpoint the work tree is at (← HEAD), every pin, every SHA the
// runtime's state.json records (its rollbacks need them), the current run
// and the run it continues from (by state.json, and by the ledger: the run
// of the newest record that has one, and the run holding its first
// record's parent). A state.json that exists but cannot be read is an
// error: without it nothing is known safe to drop.
func Protect(st *snapshot.Store) (retain.Protected, error) {
	p := retain.Protected{SHAs: map[string]bool{}, Runs: map[string]bool{}}
	if pos := st.Position(); pos != "" {
		p.SHAs[strings.ToLower(pos)] = true
	}
	pins, err := st.Pins()
	if err != nil {
		return p, err
	}
	for _, s := range pins {
		p.SHAs[s] = true
	}
	recs := st.Records()
	protectLedgerRuns(recs, p.Runs)
	if st.Layout() == snapshot.LayoutHankweave {
		hs, err := hankweave.ReadState(st.Dir())
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return p, fmt.Errorf("retention needs the runtime's state to know what it may drop: %w", err)
		default:
			protectState(hs, p)
		}
	}
	return p, nil
}

// protectLedgerRuns adds the ledger's current run and the run it continues from.
func protectLedgerRuns(recs []ckpt.Record, runs map[string]bool) {
	cur := ""
	for i := len(recs) - 1; i >= 0; i-- {
		if recs[i].RunID != "" && recs[i].SHA != "" {
			cur = recs[i].RunID
			break
		}
	}
	if cur == "" {
		return
	}
	runs[cur] = true
	parent := ""
	for _, r := range recs { // oldest first: the run's first record
		if r.RunID == cur && r.SHA != "" {
			parent = r.Parent
			break
		}
	}
	for _, r := range recs {
		if parent != "" && strings.EqualFold(r.SHA, parent) && r.RunID != "" {
			runs[r.RunID] = true
		}
	}
}

// protectState adds every SHA state.json records and its current run with
// the run that run continues from.
func protectState(hs *hankweave.State, p retain.Protected) {
	add := func(sha string) {
		if sha = strings.ToLower(strings.TrimSpace(sha)); sha != "" {
			p.SHAs[sha] = true
		}
	}
	for _, run := range hs.Runs {
		add(run.StartingConditions.InitialCheckpointSHA)
		if src := run.StartingConditions.Source; src != nil {
			add(src.CheckpointSHA)
		}
		for _, c := range run.Codons {
			add(c.RigSetupSHA)
			add(c.CompletionSHA)
			add(c.ErrorSHA)
			add(c.SkipSHA)
		}
	}
	if cur := hs.CurrentRun(); cur != nil {
		p.Runs[cur.RunID] = true
		if src := cur.StartingConditions.Source; src != nil && src.RunID != "" {
			p.Runs[src.RunID] = true
		}
	}
}

// PlanRetention is what ps would drop from st now: retain.Plan over the
// ledger with Protect's set.
func PlanRetention(st *snapshot.Store, ps retain.Policies) ([]retain.Drop, error) {
	if err := ps.Validate(); err != nil {
		return nil, err
	}
	prot, err := Protect(st)
	if err != nil {
		return nil, err
	}
	return retain.Plan(st.Records(), ps, prot), nil
}

// ApplyRetention plans and drops (snapshot.Store.Drop): the refs go, the
// records stay in the ledger marked pruned at now with the rule.
func ApplyRetention(ctx context.Context, st *snapshot.Store, ps retain.Policies, now time.Time) (snapshot.DropResult, error) {
	drops, err := PlanRetention(st, ps)
	if err != nil || len(drops) == 0 {
		return snapshot.DropResult{}, err
	}
	return st.Drop(ctx, drops, now)
}

// Pin pins (or, unpin, unpins) the checkpoint target names in st. An unpin
// also takes a full SHA that no longer resolves (a pin on a commit the
// ledger lost).
func Pin(ctx context.Context, st *snapshot.Store, target string, unpin bool) (api.PinResult, error) {
	out := api.PinResult{Workspace: st.Dir()}
	rec, err := ResolveArg(ctx, st, target)
	switch {
	case err == nil:
		out.SHA = strings.ToLower(rec.SHA)
		if rec.InLedger() {
			out.Record = &rec
		}
	case unpin && isFullSHA(target):
		out.SHA = strings.ToLower(target)
	default:
		return out, err
	}
	if unpin {
		had, err := st.Unpin(ctx, out.SHA)
		out.Changed = had
		return out, err
	}
	pins, err := st.Pins()
	if err != nil {
		return out, err
	}
	out.Changed = !slices.Contains(pins, out.SHA)
	out.Pinned = true
	return out, st.Pin(ctx, out.SHA)
}

func isFullSHA(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for _, c := range strings.ToLower(s) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
