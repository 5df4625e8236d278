// Package retain decides which checkpoints a retention policy drops
// (docs/operating.md, "Retention"). It is pure: it reads ledger records and returns
// a plan; the store (snapshot.Store.Drop) carries it out.
//
// The vocabulary is restic's: keep_last, keep_within, keep_hourly,
// keep_daily, keep_weekly, keep_monthly, where keep_daily = N keeps the
// newest checkpoint of each of the last N days that have one. Buckets are
// UTC calendar hours, days, ISO weeks and months (no DST). keep_within
// counts back from the group's newest checkpoint, not from now, so a
// workspace left alone for a month keeps its last day of work.
//
// What can be dropped follows the store's shape: a checkpoint on a ref of
// its own (refs/cairn/<kind>/<id>, refs/heads/recovery/…) one by one; a run
// branch (refs/heads/run-<id>) only as a whole, when no checkpoint on it is
// kept or protected. Any other ref is never dropped.
package retain

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// Policy is one group's retention rules. A checkpoint is kept when any rule
// keeps it; a zero field is a rule that keeps nothing.
type Policy struct {
	KeepLast    int           `json:"keepLast,omitempty"`
	KeepWithin  time.Duration `json:"keepWithin,omitempty"`
	KeepHourly  int           `json:"keepHourly,omitempty"`
	KeepDaily   int           `json:"keepDaily,omitempty"`
	KeepWeekly  int           `json:"keepWeekly,omitempty"`
	KeepMonthly int           `json:"keepMonthly,omitempty"`
}

// Empty reports whether p keeps nothing (such a policy is refused).
func (p Policy) Empty() bool { return p == Policy{} }

// Validate refuses a policy that keeps nothing or holds a negative count.
func (p Policy) Validate() error {
	for _, f := range []struct {
		name string
		n    int
	}{{"keep_last", p.KeepLast}, {"keep_hourly", p.KeepHourly}, {"keep_daily", p.KeepDaily},
		{"keep_weekly", p.KeepWeekly}, {"keep_monthly", p.KeepMonthly}} {
		if f.n < 0 {
			return fmt.Errorf("%s = %d: want 0 or more", f.name, f.n)
		}
	}
	if p.KeepWithin < 0 {
		return fmt.Errorf("keep_within %s: want 0 or more", p.KeepWithin)
	}
	if p.Empty() {
		return fmt.Errorf("keeps nothing: set at least one of keep_last, keep_within, keep_hourly, keep_daily, keep_weekly, keep_monthly")
	}
	return nil
}

// String lists the rules that are set, as the config writes them:
// "keep_within=24h keep_hourly=168 keep_daily=30".
func (p Policy) String() string {
	var parts []string
	add := func(name string, n int) {
		if n > 0 {
			parts = append(parts, name+"="+strconv.Itoa(n))
		}
	}
	add("keep_last", p.KeepLast)
	if p.KeepWithin > 0 {
		parts = append(parts, "keep_within="+FormatSpan(p.KeepWithin))
	}
	add("keep_hourly", p.KeepHourly)
	add("keep_daily", p.KeepDaily)
	add("keep_weekly", p.KeepWeekly)
	add("keep_monthly", p.KeepMonthly)
	if len(parts) == 0 {
		return "keep nothing"
	}
	return strings.Join(parts, " ")
}

// ParseSpan reads a keep_within duration: Go's units (h, m, s) plus d (24h)
// and w (7d), e.g. "24h", "30d", "1w2d12h".
func ParseSpan(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf("empty duration")
	}
	var total time.Duration
	rest := t
	for rest != "" {
		i := 0
		for i < len(rest) && (rest[i] >= '0' && rest[i] <= '9') {
			i++
		}
		j := i
		for j < len(rest) && !(rest[j] >= '0' && rest[j] <= '9') {
			j++
		}
		if i == 0 || j == i {
			return 0, fmt.Errorf("bad duration %q (want e.g. 24h, 30d, 1w)", s)
		}
		n, err := strconv.ParseInt(rest[:i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("bad duration %q (want e.g. 24h, 30d, 1w)", s)
		}
		unit := rest[i:j]
		var d time.Duration
		switch unit {
		case "w":
			d = 7 * 24 * time.Hour
		case "d":
			d = 24 * time.Hour
		default:
			u, err := time.ParseDuration("1" + unit)
			if err != nil {
				return 0, fmt.Errorf("bad duration %q (want e.g. 24h, 30d, 1w)", s)
			}
			d = u
		}
		total += time.Duration(n) * d
		rest = rest[j:]
	}
	return total, nil
}

// FormatSpan writes d with days when it is a whole number of days ("30d"),
// else as Go does ("36h0m0s" → "36h").
func FormatSpan(d time.Duration) string {
	if d > 0 && d%(24*time.Hour) == 0 {
		return strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d"
	}
	s := d.String()
	s = strings.TrimSuffix(s, "0s")
	s = strings.TrimSuffix(s, "0m")
	if s == "" {
		return "0s"
	}
	return s
}

// Group is a set of kinds that share a policy.
type Group string

const (
	GroupAutosave    Group = "autosave"    // [retention]
	GroupPreRestore  Group = "pre_restore" // [retention.pre_restore]
	GroupCheckpoints Group = "checkpoints" // [retention.checkpoints]: lifecycle, baseline, manual
)

// GroupOf is the policy group a kind belongs to.
func GroupOf(k ckpt.Kind) Group {
	switch k {
	case ckpt.KindAutosave:
		return GroupAutosave
	case ckpt.KindPreRestore:
		return GroupPreRestore
	}
	return GroupCheckpoints
}

// Policies holds one policy per group.
type Policies struct {
	Autosave    Policy `json:"autosave"`
	PreRestore  Policy `json:"preRestore"`
	Checkpoints Policy `json:"checkpoints"`
}

// Defaults suit a laptop: every autosave for 24 h, then hourly for 7 days
// and daily for 30; pre-restore checkpoints 30 days; lifecycle checkpoints,
// baselines and manual ones 90 days.
func Defaults() Policies {
	return Policies{
		Autosave:    Policy{KeepWithin: 24 * time.Hour, KeepHourly: 7 * 24, KeepDaily: 30},
		PreRestore:  Policy{KeepWithin: 30 * 24 * time.Hour},
		Checkpoints: Policy{KeepWithin: 90 * 24 * time.Hour},
	}
}

// Of is the policy of group g.
func (ps Policies) Of(g Group) Policy {
	switch g {
	case GroupAutosave:
		return ps.Autosave
	case GroupPreRestore:
		return ps.PreRestore
	}
	return ps.Checkpoints
}

// Validate refuses policies of which one keeps nothing.
func (ps Policies) Validate() error {
	for _, g := range []Group{GroupAutosave, GroupPreRestore, GroupCheckpoints} {
		if err := ps.Of(g).Validate(); err != nil {
			return fmt.Errorf("retention %s: %w", g, err)
		}
	}
	return nil
}

// Rule names the policy that drops a checkpoint of group g, as PrunedBy records it.
func (ps Policies) Rule(g Group) string {
	return "retention." + string(g) + " (" + ps.Of(g).String() + ")"
}

// Protected is what no policy drops, computed by the caller (see
// docs/operating.md, "Retention"): the checkpoint the work tree is at, every SHA
// state.json records, pins (SHAs), and the current run and the run it
// continues from (run ids). The newest checkpoint of each kind is
// protected by Plan itself.
type Protected struct {
	SHAs map[string]bool // full lowercase SHAs
	Runs map[string]bool // run ids
}

// Unit is what one drop removes.
type Unit string

const (
	UnitSingle Unit = "single" // one checkpoint on a ref of its own
	UnitRun    Unit = "run"    // a whole run branch
)

// Drop is one ref to delete and the ledger records it takes with it.
type Drop struct {
	Unit    Unit          `json:"unit"`
	Ref     string        `json:"ref"`             // full ref name
	RunID   string        `json:"runId,omitempty"` // UnitRun
	Records []ckpt.Record `json:"records"`         // oldest first; the records marked pruned
	Rule    string        `json:"rule"`            // why: the policy that keeps none of them
}

// UnitOf says how the checkpoint sealed on ref can be dropped: one by one,
// with its run, or never ("").
func UnitOf(ref string) (Unit, string) {
	switch {
	case strings.HasPrefix(ref, "refs/cairn/"), strings.HasPrefix(ref, "refs/heads/recovery/"):
		return UnitSingle, ""
	case strings.HasPrefix(ref, "refs/heads/run-"):
		return UnitRun, strings.TrimPrefix(ref, "refs/heads/run-")
	}
	return "", ""
}

// Kept returns the records of recs (one group's) each rule of p keeps,
// mapped to the first rule that keeps them. recs may be in any order.
func Kept(recs []ckpt.Record, p Policy) map[string]string {
	sorted := append([]ckpt.Record(nil), recs...)
	sort.SliceStable(sorted, func(i, j int) bool { return newer(sorted[i], sorted[j]) })
	kept := map[string]string{}
	keep := func(r ckpt.Record, rule string) {
		if _, ok := kept[key(r)]; !ok {
			kept[key(r)] = rule
		}
	}
	for i, r := range sorted {
		if i < p.KeepLast {
			keep(r, "keep_last")
		}
	}
	if p.KeepWithin > 0 && len(sorted) > 0 {
		from := sorted[0].Time.Add(-p.KeepWithin)
		for _, r := range sorted {
			if !r.Time.Before(from) {
				keep(r, "keep_within")
			}
		}
	}
	for _, b := range []struct {
		rule   string
		n      int
		bucket func(time.Time) string
	}{
		{"keep_hourly", p.KeepHourly, func(t time.Time) string { return t.UTC().Format("2006-01-02T15") }},
		{"keep_daily", p.KeepDaily, func(t time.Time) string { return t.UTC().Format("2006-01-02") }},
		{"keep_weekly", p.KeepWeekly, func(t time.Time) string {
			y, w := t.UTC().ISOWeek()
			return fmt.Sprintf("%d-W%02d", y, w)
		}},
		{"keep_monthly", p.KeepMonthly, func(t time.Time) string { return t.UTC().Format("2006-01") }},
	} {
		left, last := b.n, ""
		for _, r := range sorted {
			if left <= 0 {
				break
			}
			if v := b.bucket(r.Time); v != last {
				keep(r, b.rule)
				last = v
				left--
			}
		}
	}
	return kept
}

// key identifies a record: its ledger id, else its SHA.
func key(r ckpt.Record) string {
	if r.ID != "" {
		return r.ID
	}
	return "sha:" + r.SHA
}

// newer orders newest first: by time, then by ledger number.
func newer(a, b ckpt.Record) bool {
	if !a.Time.Equal(b.Time) {
		return a.Time.After(b.Time)
	}
	return idNum(a.ID) > idNum(b.ID)
}

func idNum(id string) int {
	n, _ := ckpt.LedgerNum(id)
	return n
}

// Plan returns what ps drops from the ledger recs (any order): the
// checkpoints on refs of their own that their group's policy does not keep,
// and the runs none of whose checkpoints is kept. Never dropped: failed and
// already pruned records (nothing to drop), records without a ledger id or
// on another ref, the newest checkpoint of each kind, and whatever protect
// names. Drops come oldest first (runs by their newest checkpoint).
func Plan(recs []ckpt.Record, ps Policies, protect Protected) []Drop {
	var live []ckpt.Record
	for _, r := range recs {
		if r.ID != "" && r.Usable() {
			live = append(live, r)
		}
	}
	// Which records the policies keep.
	byGroup := map[Group][]ckpt.Record{}
	for _, r := range live {
		g := GroupOf(r.Kind)
		byGroup[g] = append(byGroup[g], r)
	}
	kept := map[string]bool{}
	for g, rs := range byGroup {
		for k := range Kept(rs, ps.Of(g)) {
			kept[k] = true
		}
	}
	// The newest of each kind, and what the caller protects.
	newest := map[ckpt.Kind]ckpt.Record{}
	for _, r := range live {
		if n, ok := newest[r.Kind]; !ok || newer(r, n) {
			newest[r.Kind] = r
		}
	}
	for _, r := range newest {
		kept[key(r)] = true
	}
	for _, r := range live {
		if protect.SHAs[strings.ToLower(r.SHA)] {
			kept[key(r)] = true
		}
	}

	var drops []Drop
	runs := map[string]*Drop{}
	blocked := map[string]bool{} // runs that keep something, or are protected
	for _, r := range live {
		unit, run := UnitOf(r.Ref)
		switch unit {
		case UnitSingle:
			if !kept[key(r)] {
				drops = append(drops, Drop{Unit: UnitSingle, Ref: r.Ref, Records: []ckpt.Record{r}, Rule: ps.Rule(GroupOf(r.Kind))})
			}
		case UnitRun:
			if kept[key(r)] || protect.Runs[run] || (r.RunID != "" && protect.Runs[r.RunID]) {
				blocked[run] = true
			}
			d := runs[run]
			if d == nil {
				d = &Drop{Unit: UnitRun, Ref: r.Ref, RunID: run}
				runs[run] = d
			}
			d.Records = append(d.Records, r)
		}
	}
	// A run's records that failed or were pruned before do not block it;
	// its ref may still hold the runtime's own commits, which the store
	// checks (the tip must be one of the records) before deleting.
	for run, d := range runs {
		if blocked[run] {
			continue
		}
		sort.SliceStable(d.Records, func(i, j int) bool { return newer(d.Records[j], d.Records[i]) })
		groups := map[Group]bool{}
		for _, r := range d.Records {
			groups[GroupOf(r.Kind)] = true
		}
		var rules []string
		for _, g := range []Group{GroupCheckpoints, GroupAutosave, GroupPreRestore} {
			if groups[g] {
				rules = append(rules, ps.Rule(g))
			}
		}
		d.Rule = strings.Join(rules, ", ")
		drops = append(drops, *d)
	}
	sort.SliceStable(drops, func(i, j int) bool {
		a, b := drops[i].Records[len(drops[i].Records)-1], drops[j].Records[len(drops[j].Records)-1]
		return newer(b, a)
	})
	return drops
}

// BudgetRule names a drop made to bring a store under its size budget.
const BudgetRule = "budget"

// BudgetOrder is what a size budget may drop from the ledger recs, in the
// one fixed order it drops them (docs/operating.md, "Budgets and disk space"): the
// oldest autosaves first, then the oldest pre-restore checkpoints, then the
// oldest whole runs (by their newest checkpoint). Baselines and manual
// checkpoints outside runs are never dropped for size, nor anything Plan
// never drops (the newest of each kind, what protect names, a run that
// holds any of those). Each drop's Rule is rule.
func BudgetOrder(recs []ckpt.Record, protect Protected, rule string) []Drop {
	all := Plan(recs, Policies{}, protect) // no policy keeps anything: only the protections remain
	var auto, pre, runs []Drop
	for _, d := range all {
		d.Rule = rule
		switch {
		case d.Unit == UnitRun:
			runs = append(runs, d)
		case d.Records[0].Kind == ckpt.KindAutosave:
			auto = append(auto, d)
		case d.Records[0].Kind == ckpt.KindPreRestore:
			pre = append(pre, d)
		}
	}
	// Plan returns them oldest first already; each list keeps that order.
	return append(append(auto, pre...), runs...)
}
