package restore

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// TargetKind says how a Target names its checkpoint.
type TargetKind int

const (
	TargetID          TargetKind = iota + 1 // a ledger id: c7
	TargetSHA                               // a SHA prefix of at least MinSHAPrefix hex digits
	TargetCodon                             // a codon and a checkpoint type (or the start/end alias)
	TargetLastSuccess                       // the runtime's "last success"
	TargetTime                              // the newest checkpoint at or before a time
)

// MinSHAPrefix is the fewest hex digits a SHA prefix may have.
const MinSHAPrefix = 4

// maxSHA is the longest SHA (sha256 object format).
const maxSHA = 64

// Codon checkpoint types a rollback.toCodon may ask for.
const (
	TypeStart = "start" // alias: first of rig-setup, completed, error, skipped
	TypeEnd   = "end"   // alias: last, i.e. first of completed, error, skipped, rig-setup
)

// CodonTypes lists the checkpointType values rollback.toCodon accepts.
var CodonTypes = []string{TypeStart, TypeEnd, string(ckpt.KindRigSetup), string(ckpt.KindCompleted), string(ckpt.KindError), string(ckpt.KindSkipped)}

// LastSuccess is the positional spelling of TargetLastSuccess.
const LastSuccess = "last-success"

// Target names the checkpoint a restore goes to. Build one with ByID, BySHA,
// ByCodon, ByLastSuccess, ByTime or ParseTarget.
type Target struct {
	Kind TargetKind

	ID  string // TargetID: ledger id
	SHA string // TargetSHA: lowercase hex prefix

	Codon string // TargetCodon: codon id
	Type  string // TargetCodon: one of CodonTypes; empty means "end"

	At time.Time // TargetTime
	// Grain widens At to the precision it was written with: checkpoints
	// before At+Grain count as "at" At, so "@10:42" holds 10:42:59.
	Grain time.Duration
	// CheckpointKind restricts TargetTime to one kind ("autosave@10:42").
	CheckpointKind string

	// Run is the current run, searched first for a SHA prefix
	// (docs/runtime-formats.md).
	// Empty: the run of the newest ledger record that has one.
	Run string

	// Raw is the target as the user wrote it, quoted back in errors.
	Raw string
}

// ByID targets a ledger id.
func ByID(id string) Target { return Target{Kind: TargetID, ID: id} }

// BySHA targets a SHA prefix.
func BySHA(prefix string) Target { return Target{Kind: TargetSHA, SHA: prefix} }

// ByCodon targets a codon's checkpoint of the given type ("" means "end").
func ByCodon(codonID, typ string) Target { return Target{Kind: TargetCodon, Codon: codonID, Type: typ} }

// ByLastSuccess targets the runtime's last success.
func ByLastSuccess() Target { return Target{Kind: TargetLastSuccess} }

// ByTime targets the newest checkpoint at or before at, of the given kind
// when kind is not empty.
func ByTime(at time.Time, kind string) Target {
	return Target{Kind: TargetTime, At: at, CheckpointKind: kind}
}

// String is the target as ParseTarget reads it (Raw when set).
func (t Target) String() string {
	if t.Raw != "" {
		return t.Raw
	}
	switch t.Kind {
	case TargetID:
		return t.ID
	case TargetSHA:
		return t.SHA
	case TargetCodon:
		typ := t.Type
		if typ == "" {
			typ = TypeEnd
		}
		return "codon:" + t.Codon + ":" + typ
	case TargetLastSuccess:
		return LastSuccess
	case TargetTime:
		return t.CheckpointKind + "@" + t.At.Format(time.RFC3339Nano)
	}
	return "?"
}

// ParseTarget reads the positional target of `cairn restore`:
//
//	c12                 ledger id (c followed by digits; see below)
//	last-success        the runtime's last success
//	@<time>             newest checkpoint at or before <time> (see ParseTime)
//	<kind>@<time>       the same, of one kind only: autosave@10:42
//	codon:<id>[:<type>] a codon's checkpoint; <type> in CodonTypes, default end
//	sha:<hex>           a SHA prefix, explicitly
//	<hex>               a SHA prefix of at least 4 hex digits
//
// `c` followed only by digits is also valid hex (c1234): it reads as a ledger
// id, and Resolve falls back to it as a SHA prefix when no such id exists;
// write sha:c1234 to mean the prefix. Relative and clock times are taken
// against time.Now; see ParseTargetAt.
func ParseTarget(s string) (Target, error) { return ParseTargetAt(s, time.Now()) }

// ParseTargetAt is ParseTarget with "now" given, for relative and clock times.
func ParseTargetAt(s string, now time.Time) (Target, error) {
	raw := s
	s = strings.TrimSpace(s)
	bad := func(reason string) (Target, error) {
		return Target{}, &InvalidTargetError{Input: raw, Reason: reason}
	}
	switch {
	case s == "":
		return bad("empty")
	case strings.EqualFold(s, LastSuccess):
		return Target{Kind: TargetLastSuccess, Raw: raw}, nil
	case isLedgerID(strings.ToLower(s)):
		return Target{Kind: TargetID, ID: strings.ToLower(s), Raw: raw}, nil
	case strings.HasPrefix(s, "sha:"):
		p, err := shaPrefix(s[len("sha:"):])
		if err != nil {
			return bad(err.Error())
		}
		return Target{Kind: TargetSHA, SHA: p, Raw: raw}, nil
	case strings.HasPrefix(s, "codon:"):
		id, typ := s[len("codon:"):], TypeEnd
		if i := strings.LastIndexByte(id, ':'); i >= 0 && validCodonType(id[i+1:]) {
			id, typ = id[:i], id[i+1:]
		}
		if id == "" {
			return bad("no codon id after codon:")
		}
		return Target{Kind: TargetCodon, Codon: id, Type: typ, Raw: raw}, nil
	case strings.Contains(s, "@"):
		kind, spec, _ := strings.Cut(s, "@")
		if kind != "" && !validKind(kind) {
			return bad(fmt.Sprintf("unknown checkpoint kind %q (want one of %s)", kind, strings.Join(kindNames(), ", ")))
		}
		at, grain, err := parseTime(spec, now)
		if err != nil {
			return bad(err.Error())
		}
		return Target{Kind: TargetTime, At: at, Grain: grain, CheckpointKind: kind, Raw: raw}, nil
	case isHex(s):
		p, err := shaPrefix(s)
		if err != nil {
			return bad(err.Error())
		}
		return Target{Kind: TargetSHA, SHA: p, Raw: raw}, nil
	}
	return bad("want a ledger id (c7), a SHA prefix of at least 4 hex digits, @<time>, <kind>@<time>, codon:<id>[:<type>] or last-success")
}

// ParseTime reads a time for a time target (and the CLI's --at flag):
//
//	2026-01-02T15:04:05Z07:00  RFC 3339, fractional seconds allowed
//	2026-01-02T15:04[:05]      local time (a space may stand for the T)
//	15:04, 15:04:05            today, local time (in now's location)
//	10m, 1h30m, 2d, "10m ago"  that long before now
//	-10m, -2d                  the same (as in @-5m)
func ParseTime(s string, now time.Time) (time.Time, error) {
	t, _, err := parseTime(s, now)
	return t, err
}

// parseTime also returns the precision the time was written with.
func parseTime(s string, now time.Time) (time.Time, time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, 0, fmt.Errorf("no time given")
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		grain := time.Duration(0)
		if !strings.Contains(s, ".") {
			grain = time.Second
		}
		return t, grain, nil
	}
	loc := now.Location()
	for _, f := range []struct {
		layout string
		grain  time.Duration
	}{
		{"2006-01-02T15:04:05", time.Second}, {"2006-01-02 15:04:05", time.Second},
		{"2006-01-02T15:04", time.Minute}, {"2006-01-02 15:04", time.Minute},
	} {
		if t, err := time.ParseInLocation(f.layout, s, loc); err == nil {
			return t, f.grain, nil
		}
	}
	for _, f := range []struct {
		layout string
		grain  time.Duration
	}{{"15:04:05", time.Second}, {"15:04", time.Minute}} {
		if c, err := time.Parse(f.layout, s); err == nil {
			y, m, d := now.Date()
			return time.Date(y, m, d, c.Hour(), c.Minute(), c.Second(), 0, loc), f.grain, nil
		}
	}
	if d, ok := parseAgo(s); ok {
		return now.Add(-d), 0, nil
	}
	return time.Time{}, 0, fmt.Errorf("cannot read time %q: want RFC 3339, 2006-01-02 15:04[:05], 15:04[:05] (today) or a duration ago like 10m, 2h, 1d", s)
}

// parseAgo reads a non-negative Go duration, or whole days "2d", optionally
// followed by " ago".
func parseAgo(s string) (time.Duration, bool) {
	s = strings.TrimSpace(strings.TrimSuffix(s, "ago"))
	// "-5m" (as in @-5m) is the same as "5m ago".
	if rest, ok := strings.CutPrefix(s, "-"); ok && !strings.HasPrefix(rest, "-") {
		s = rest
	}
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil || days < 0 || days > 100000 {
			return 0, false
		}
		return time.Duration(days) * 24 * time.Hour, true
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, false
	}
	return d, true
}

// isLedgerID reports whether s reads as a ledger id: c and one or more digits.
func isLedgerID(s string) bool {
	if len(s) < 2 || s[0] != 'c' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func isHex(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// shaPrefix validates and lowercases a SHA prefix.
func shaPrefix(s string) (string, error) {
	if !isHex(s) {
		return "", fmt.Errorf("a checkpoint SHA is hexadecimal: %q is not", s)
	}
	if len(s) < MinSHAPrefix {
		return "", fmt.Errorf("checkpoint SHA prefix '%s' is too short: give at least %d hex digits", s, MinSHAPrefix)
	}
	if len(s) > maxSHA {
		return "", fmt.Errorf("checkpoint SHA is longer than %d hex digits", maxSHA)
	}
	return strings.ToLower(s), nil
}

func validCodonType(t string) bool { return contains(CodonTypes, t) }
func validKind(k string) bool      { return contains(kindNames(), k) }

// kindNames is every checkpoint kind, as written in a target.
func kindNames() []string {
	out := make([]string, len(ckpt.Kinds))
	for i, k := range ckpt.Kinds {
		out[i] = string(k)
	}
	return out
}

func contains(v []string, s string) bool {
	for _, x := range v {
		if x == s {
			return true
		}
	}
	return false
}
