package config

import (
	"fmt"
	"math"
	"sort"

	"github.com/cairn-dev/cairn/snapshot/retain"
)

// Retention is a workspace's retention policies (docs/operating.md, "Retention"):
// in TOML, [retention] for autosaves with [retention.pre_restore] and
// [retention.checkpoints] (lifecycle, baseline, manual) below it, under
// [defaults] or a [[watch]] entry. A group that is not written is zero here
// and takes the defaults' at merge; one that is written but keeps nothing is
// refused at load.
type Retention retain.Policies

// Policies is r as the planner takes it.
func (r Retention) Policies() retain.Policies { return retain.Policies(r) }

// Merge fills the groups r leaves unset from d.
func (r Retention) Merge(d Retention) Retention {
	if r.Autosave.Empty() {
		r.Autosave = d.Autosave
	}
	if r.PreRestore.Empty() {
		r.PreRestore = d.PreRestore
	}
	if r.Checkpoints.Empty() {
		r.Checkpoints = d.Checkpoints
	}
	return r
}

// retentionError is a retention table refused at load. The TOML decoder
// keeps only its message, so Parse knows it by retentionErrPrefix and
// finds its line by the first key the reason quotes.
type retentionError struct{ reason string }

const retentionErrPrefix = "retention: "

func (e *retentionError) Error() string { return retentionErrPrefix + e.reason }

// UnmarshalTOML reads a [retention] table: keep_* keys for autosaves, and
// the pre_restore and checkpoints sub-tables.
func (r *Retention) UnmarshalTOML(v any) error {
	m, ok := v.(map[string]any)
	if !ok {
		return &retentionError{`"retention": want a table`}
	}
	var out Retention
	top := map[string]any{}
	for k, val := range m {
		switch k {
		case "pre_restore", "checkpoints":
			sub, ok := val.(map[string]any)
			if !ok {
				return &retentionError{fmt.Sprintf("%q in [retention]: want a table", k)}
			}
			p, err := parsePolicy("retention."+k, sub)
			if err != nil {
				return err
			}
			if k == "pre_restore" {
				out.PreRestore = p
			} else {
				out.Checkpoints = p
			}
		default:
			top[k] = val
		}
	}
	if len(top) > 0 {
		p, err := parsePolicy("retention", top)
		if err != nil {
			return err
		}
		out.Autosave = p
	}
	*r = out
	return nil
}

// parsePolicy reads one group's keys; a group that keeps nothing is refused.
func parsePolicy(table string, m map[string]any) (retain.Policy, error) {
	var p retain.Policy
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	first := table
	for _, k := range keys {
		val := m[k]
		if first == table {
			first = k
		}
		count := func(dst *int) error {
			n, ok := val.(int64)
			if !ok || n < 0 || n > math.MaxInt32 {
				return &retentionError{fmt.Sprintf("%q in [%s] = %v: want a whole number, 0 or more", k, table, val)}
			}
			*dst = int(n)
			return nil
		}
		var err error
		switch k {
		case "keep_last":
			err = count(&p.KeepLast)
		case "keep_hourly":
			err = count(&p.KeepHourly)
		case "keep_daily":
			err = count(&p.KeepDaily)
		case "keep_weekly":
			err = count(&p.KeepWeekly)
		case "keep_monthly":
			err = count(&p.KeepMonthly)
		case "keep_within":
			str, ok := val.(string)
			if !ok {
				return p, &retentionError{fmt.Sprintf("%q in [%s]: want a duration such as 24h or 30d", k, table)}
			}
			d, perr := retain.ParseSpan(str)
			if perr != nil {
				return p, &retentionError{fmt.Sprintf("%q in [%s]: %v", k, table, perr)}
			}
			p.KeepWithin = d
		default:
			return p, &retentionError{fmt.Sprintf("%q in [%s]: unknown key (want keep_last, keep_within, keep_hourly, keep_daily, keep_weekly, keep_monthly)", k, table)}
		}
		if err != nil {
			return p, err
		}
	}
	if err := p.Validate(); err != nil {
		return p, &retentionError{fmt.Sprintf("%q in [%s]: the policy %v", first, table, err)}
	}
	return p, nil
}
