package restore

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// Resolve finds the checkpoint t names in the ledger cps (any order).
// confirmed reports whether git holds a commit; nil trusts the ledger. It is
// asked at most once per SHA.
//
// A record whose seal failed, or whose commit git does not confirm, is never
// a target: codon, last-success and time targets pass over it; an id or SHA
// prefix naming it gets *UnusableError.
//
// Errors: *InvalidTargetError, *NotFoundError (id, SHA, time, last-success;
// Error() is `unknown checkpoint: <input>`), *CodonNotFoundError,
// *TypeNotFoundError, *AmbiguousError, *UnusableError.
func Resolve(cps []ckpt.Record, t Target, confirmed func(sha string) bool) (ckpt.Record, error) {
	return ResolveIn(cps, t, Sources{Confirmed: confirmed})
}

// Sources are what a SHA prefix is matched against besides the ledger, as
// the runtime's rollback.toCheckpoint does: the SHAs its state records, then
// git's commits. Other targets use the ledger only.
type Sources struct {
	// Confirmed reports whether git holds a commit; nil trusts every SHA.
	Confirmed func(sha string) bool
	// Runtime are the checkpoints the runtime recorded (ID empty), any
	// order. One git does not confirm is left out.
	Runtime []ckpt.Record
	// Commits lists the store's commits whose SHA begins with the
	// lowercase prefix (ID empty); nil asks nothing.
	Commits func(prefix string) []ckpt.Record
}

// ResolveIn is Resolve with SHA prefixes also matched against src's
// runtime checkpoints and commits. A commit counts once, as its ledger
// record when it has one, else as the runtime recorded it.
func ResolveIn(cps []ckpt.Record, t Target, src Sources) (ckpt.Record, error) {
	r := &resolver{cps: order(cps), confirmed: src.Confirmed, seen: map[string]bool{}, src: src}
	switch t.Kind {
	case TargetID:
		return r.byID(t)
	case TargetSHA:
		return r.bySHA(t)
	case TargetCodon:
		return r.byCodon(t)
	case TargetLastSuccess:
		return r.lastSuccess(t)
	case TargetTime:
		return r.byTime(t)
	}
	return ckpt.Record{}, &InvalidTargetError{Input: t.Raw, Reason: "no target kind"}
}

type resolver struct {
	cps       []ckpt.Record // oldest first (see order)
	confirmed func(string) bool
	seen      map[string]bool
	src       Sources
}

// ok reports whether c can be restored: a sealed commit git confirms.
func (r *resolver) ok(c ckpt.Record) bool {
	if !c.Usable() {
		return false
	}
	if r.confirmed == nil {
		return true
	}
	v, hit := r.seen[c.SHA]
	if !hit {
		v = r.confirmed(c.SHA)
		r.seen[c.SHA] = v
	}
	return v
}

// check turns a record an id or SHA named into the answer.
func (r *resolver) check(c ckpt.Record) (ckpt.Record, error) {
	switch {
	case c.Pruned():
		return ckpt.Record{}, &UnusableError{Checkpoint: c, Reason: PrunedReason(c)}
	case !c.Usable():
		return ckpt.Record{}, &UnusableError{Checkpoint: c, Reason: "its seal failed; it holds no commit"}
	case !r.ok(c):
		return ckpt.Record{}, &UnusableError{Checkpoint: c, Reason: "its commit " + c.Short() + " is not in the store"}
	}
	return c, nil
}

// PrunedReason says when a pruned checkpoint was dropped and by which rule.
func PrunedReason(c ckpt.Record) string {
	msg := "it was pruned"
	if c.PrunedAt != nil {
		msg += " at " + c.PrunedAt.UTC().Format(time.RFC3339)
	}
	if c.PrunedBy != "" {
		msg += " by " + c.PrunedBy
	}
	return msg
}

func (r *resolver) byID(t Target) (ckpt.Record, error) {
	id := strings.ToLower(strings.TrimSpace(t.ID))
	for i := len(r.cps) - 1; i >= 0; i-- {
		if r.cps[i].ID == id {
			return r.check(r.cps[i])
		}
	}
	// c1234 is hex too: an id that names no record may be a SHA prefix.
	if p, err := shaPrefix(id); err == nil {
		st := t
		st.Kind, st.SHA = TargetSHA, p
		c, err := r.bySHA(st)
		if _, miss := err.(*NotFoundError); !miss {
			return c, err
		}
	}
	return ckpt.Record{}, &NotFoundError{Input: input(t, t.ID), Detail: "no checkpoint " + id + " in the ledger"}
}

// bySHA matches the prefix against the current run's checkpoints, then
// against every run's, as the runtime does: the ledger's, the runtime's and
// the store's other commits. Records of one commit count once.
func (r *resolver) bySHA(t Target) (ckpt.Record, error) {
	p, err := shaPrefix(strings.TrimSpace(t.SHA))
	if err != nil {
		return ckpt.Record{}, &InvalidTargetError{Input: input(t, t.SHA), Reason: err.Error()}
	}
	var all []ckpt.Record
	for _, c := range r.cps {
		// A pruned checkpoint still matches, so the answer says it was pruned.
		if (c.Usable() || c.Pruned()) && strings.HasPrefix(strings.ToLower(c.SHA), p) {
			all = append(all, c)
		}
	}
	all = append(all, r.outside(p, all)...)
	run := t.Run
	if run == "" {
		run = r.currentRun()
	}
	scopes := [][]ckpt.Record{all}
	if run != "" {
		var cur []ckpt.Record
		for _, c := range all {
			if c.RunID == run {
				cur = append(cur, c)
			}
		}
		scopes = [][]ckpt.Record{cur, all}
	}
	for _, m := range scopes {
		m = distinctSHA(m)
		switch {
		case len(m) == 1:
			return r.check(m[0])
		case len(m) > 1:
			sort.SliceStable(m, func(i, j int) bool { return older(m[j], m[i]) }) // newest first
			return ckpt.Record{}, &AmbiguousError{Prefix: input(t, t.SHA), Matches: m}
		}
	}
	in := input(t, t.SHA)
	return ckpt.Record{}, &NotFoundError{Input: in,
		Detail: "Checkpoint " + in + " not found in any run (current or historical)"}
}

// outside is what matches prefix p among the runtime's checkpoints and
// git's commits, leaving out commits the ledger matches already hold.
func (r *resolver) outside(p string, ledger []ckpt.Record) []ckpt.Record {
	have := map[string]bool{}
	for _, c := range ledger {
		have[strings.ToLower(c.SHA)] = true
	}
	var out []ckpt.Record
	for _, c := range order(r.src.Runtime) {
		k := strings.ToLower(c.SHA)
		if c.Usable() && strings.HasPrefix(k, p) && !have[k] && r.ok(c) {
			have[k] = true
			out = append(out, c)
		}
	}
	if r.src.Commits != nil {
		for _, c := range r.src.Commits(p) {
			k := strings.ToLower(c.SHA)
			if c.Usable() && strings.HasPrefix(k, p) && !have[k] {
				have[k] = true
				r.seen[c.SHA] = true // git listed it: a commit of the store
				out = append(out, c)
			}
		}
	}
	return out
}

// currentRun is the run of the newest record that has one.
func (r *resolver) currentRun() string {
	for i := len(r.cps) - 1; i >= 0; i-- {
		if r.cps[i].RunID != "" {
			return r.cps[i].RunID
		}
	}
	return ""
}

// distinctSHA keeps the oldest record of each commit, in order.
func distinctSHA(cps []ckpt.Record) []ckpt.Record {
	seen := map[string]bool{}
	var out []ckpt.Record
	for _, c := range cps {
		k := strings.ToLower(c.SHA)
		if !seen[k] {
			seen[k] = true
			out = append(out, c)
		}
	}
	return out
}

func reverse(cps []ckpt.Record) {
	for i, j := 0, len(cps)-1; i < j; i, j = i+1, j-1 {
		cps[i], cps[j] = cps[j], cps[i]
	}
}

// Preference orders (docs/runtime-formats.md, rollback): start takes the
// first available of startOrder, end the first of endOrder.
var (
	startOrder = []ckpt.Kind{ckpt.KindRigSetup, ckpt.KindCompleted, ckpt.KindError, ckpt.KindSkipped}
	endOrder   = []ckpt.Kind{ckpt.KindCompleted, ckpt.KindError, ckpt.KindSkipped, ckpt.KindRigSetup}
	// Last success, second pass: a codon's preferred checkpoint.
	successOrder = []ckpt.Kind{ckpt.KindCompleted, ckpt.KindError, ckpt.KindSkipped, ckpt.KindRigSetup}
	failedOrder  = []ckpt.Kind{ckpt.KindRigSetup, ckpt.KindCompleted, ckpt.KindError, ckpt.KindSkipped}
)

// attempt is one attempt of one codon in one run: its records, oldest first.
type attempt struct {
	recs []ckpt.Record
	last int // position of its newest record in the ordered ledger
}

// attempts groups the codon records (of one codon, or of all when codon is
// empty) by (run, codon, attempt), newest attempt first; an attempt is as new
// as its newest record.
func (r *resolver) attempts(codon string) []*attempt {
	type key struct {
		run, codon string
		n          int
	}
	idx := map[key]*attempt{}
	var out []*attempt
	for i, c := range r.cps {
		if c.CodonID == "" || (codon != "" && c.CodonID != codon) {
			continue
		}
		k := key{c.RunID, c.CodonID, c.Attempt}
		a := idx[k]
		if a == nil {
			a = &attempt{}
			idx[k] = a
			out = append(out, a)
		}
		a.recs = append(a.recs, c)
		a.last = i
	}
	sort.Slice(out, func(i, j int) bool { return out[i].last > out[j].last })
	return out
}

// pick returns the attempt's newest restorable record of the first kind in
// prefs that has one.
func (r *resolver) pick(a *attempt, prefs []ckpt.Kind) (ckpt.Record, bool) {
	for _, k := range prefs {
		for i := len(a.recs) - 1; i >= 0; i-- {
			if c := a.recs[i]; c.Kind == k && r.ok(c) {
				return c, true
			}
		}
	}
	return ckpt.Record{}, false
}

// byCodon takes the codon's newest attempt (docs/runtime-formats.md,
// rollback), whatever it holds, and picks from it by type.
func (r *resolver) byCodon(t Target) (ckpt.Record, error) {
	typ := t.Type
	if typ == "" {
		typ = TypeEnd
	}
	if !validCodonType(typ) {
		return ckpt.Record{}, &InvalidTargetError{Input: t.Raw,
			Reason: fmt.Sprintf("unknown checkpoint type %q (want one of %s)", typ, strings.Join(CodonTypes, ", "))}
	}
	if t.Codon == "" {
		return ckpt.Record{}, &InvalidTargetError{Input: t.Raw, Reason: "no codon id"}
	}
	as := r.attempts(t.Codon)
	if len(as) == 0 {
		return ckpt.Record{}, &CodonNotFoundError{CodonID: t.Codon}
	}
	prefs := []ckpt.Kind{ckpt.Kind(typ)}
	switch typ {
	case TypeStart:
		prefs = startOrder
	case TypeEnd:
		prefs = endOrder
	}
	if c, ok := r.pick(as[0], prefs); ok {
		return c, nil
	}
	return ckpt.Record{}, &TypeNotFoundError{CodonID: t.Codon, Type: typ}
}

// lastSuccess: the newest completed codon whose checkpoint git confirms;
// otherwise the newest codon with any confirmed checkpoint, preferring
// completed > error > skipped > rig-setup, except that a failed codon (one
// with an error record) prefers its rig-setup checkpoint
// (docs/runtime-formats.md, rollback).
func (r *resolver) lastSuccess(t Target) (ckpt.Record, error) {
	for i := len(r.cps) - 1; i >= 0; i-- {
		if c := r.cps[i]; c.CodonID != "" && c.Kind == ckpt.KindCompleted && r.ok(c) {
			return c, nil
		}
	}
	for _, a := range r.attempts("") {
		prefs := successOrder
		for _, c := range a.recs {
			if c.Kind == ckpt.KindError {
				prefs = failedOrder
			}
		}
		if c, ok := r.pick(a, prefs); ok {
			return c, nil
		}
	}
	return ckpt.Record{}, &NotFoundError{Input: input(t, LastSuccess),
		Detail: "no codon has a checkpoint git confirms"}
}

// byTime: the newest restorable checkpoint at or before t.At (within its
// grain), of t.CheckpointKind when set.
func (r *resolver) byTime(t Target) (ckpt.Record, error) {
	if t.CheckpointKind != "" && !validKind(t.CheckpointKind) {
		return ckpt.Record{}, &InvalidTargetError{Input: t.Raw,
			Reason: fmt.Sprintf("unknown checkpoint kind %q", t.CheckpointKind)}
	}
	end := t.At.Add(t.Grain) // exclusive when Grain > 0
	var best ckpt.Record
	found := false
	for _, c := range r.cps { // oldest first: a later record wins a tie
		if t.CheckpointKind != "" && string(c.Kind) != t.CheckpointKind {
			continue
		}
		in := !c.Time.After(t.At)
		if t.Grain > 0 {
			in = c.Time.Before(end)
		}
		if !in || (found && c.Time.Before(best.Time)) || !r.ok(c) {
			continue
		}
		best, found = c, true
	}
	if found {
		return best, nil
	}
	what := "checkpoint"
	if t.CheckpointKind != "" {
		what = t.CheckpointKind + " checkpoint"
	}
	return ckpt.Record{}, &NotFoundError{Input: input(t, "@"+t.At.Format(time.RFC3339)),
		Detail: fmt.Sprintf("no %s at or before %s", what, t.At.Format(time.RFC3339))}
}

// input is what an error quotes back: the target as written, else fallback.
func input(t Target, fallback string) string {
	if t.Raw != "" {
		return strings.TrimSpace(t.Raw)
	}
	if t.Kind == TargetTime && t.CheckpointKind != "" {
		return t.CheckpointKind + fallback
	}
	return fallback
}

// order returns a copy of cps oldest first: by ledger number (c3 before
// c12), records without one by time, and the given order on ties.
func order(cps []ckpt.Record) []ckpt.Record {
	out := append([]ckpt.Record(nil), cps...)
	sort.SliceStable(out, func(i, j int) bool { return older(out[i], out[j]) })
	return out
}

func older(a, b ckpt.Record) bool {
	na, oka := ckpt.LedgerNum(a.ID)
	nb, okb := ckpt.LedgerNum(b.ID)
	if oka && okb && na != nb {
		return na < nb
	}
	return a.Time.Before(b.Time)
}
