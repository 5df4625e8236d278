package restore

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

const (
	run1 = "1753110463686-yayna"
	run2 = "1753119999999-bcdef"
)

var base = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

// sha pads a prefix to a full 40-digit SHA.
func sha(prefix string) string { return prefix + strings.Repeat("0", 40-len(prefix)) }

func cp(id, s string, kind ckpt.Kind, codon, run string, attempt, minute int) ckpt.Record {
	c := ckpt.Record{ID: id, SHA: s, Kind: kind, CodonID: codon, RunID: run, Attempt: attempt,
		Time: base.Add(time.Duration(minute) * time.Minute), State: "ok"}
	if codon != "" {
		c.CodonName = strings.ToUpper(codon[:1]) + codon[1:] + " step"
		c.Label = string(kind) + ":" + codon
	} else {
		c.Label = string(kind) + " " + id
	}
	return c
}

// ledger is a run with a retried failing codon, an interrupted codon, an
// autosave, a restore, and a continuation run after a rollback.
func ledger() []ckpt.Record {
	failed := cp("c13", "", ckpt.KindCompleted, "gamma", run2, 0, 13)
	failed.State = ckpt.StateFailed
	return []ckpt.Record{
		cp("c1", sha("11110001"), ckpt.KindRigSetup, "alpha", run1, 0, 1),
		cp("c2", sha("beef0002"), ckpt.KindCompleted, "alpha", run1, 0, 2),
		cp("c3", sha("abcd0003"), ckpt.KindRigSetup, "beta", run1, 0, 3),
		cp("c4", sha("44440004"), ckpt.KindError, "beta", run1, 0, 4),
		cp("c5", sha("55550005"), ckpt.KindRigSetup, "beta", run1, 1, 5),
		cp("c6", sha("66660006"), ckpt.KindCompleted, "beta", run1, 1, 6),
		cp("c7", sha("abcd0007"), ckpt.KindAutosave, "", "", 0, 7),
		cp("c8", sha("88880008"), ckpt.KindRigSetup, "gamma", run1, 0, 8),
		cp("c9", sha("99990009"), ckpt.KindExit, "gamma", run1, 0, 9),
		cp("c10", sha("10100010"), ckpt.KindPreRestore, "", "", 0, 10),
		cp("c11", sha("beef0011"), ckpt.KindCompleted, "alpha", run2, 0, 11),
		cp("c12", sha("12120012"), ckpt.KindSkipped, "delta", run2, 0, 12),
		failed,
		cp("c14", sha("14140014"), ckpt.KindAutosave, "", "", 0, 14),
	}
}

func TestResolve(t *testing.T) {
	cases := []struct {
		name   string
		cps    []ckpt.Record
		target Target
		gone   []string // SHAs git does not confirm
		want   string   // checkpoint id, or "" when an error is expected
		err    string   // exact Error()
	}{
		{name: "id", target: ByID("c6"), want: "c6"},
		{name: "id upper", target: ByID("C6"), want: "c6"},
		{name: "id unknown", target: ByID("c99"), err: "unknown checkpoint: c99"},
		{name: "id raw quoted", target: Target{Kind: TargetID, ID: "c99", Raw: "c99"}, err: "unknown checkpoint: c99"},
		{name: "id failed seal", target: ByID("c13"), err: "checkpoint c13 cannot be restored: its seal failed; it holds no commit"},
		{name: "id not in git", target: ByID("c6"), gone: []string{sha("66660006")}, err: "checkpoint c6 cannot be restored: its commit 6666000 is not in the store"},
		{name: "id that is a sha", target: ByID("c1234"),
			cps: append(ledger(), cp("c15", sha("c1234f"), ckpt.KindManual, "", "", 0, 15)), want: "c15"},
		{name: "id wins over sha", target: ByID("c1"),
			cps: append(ledger(), cp("c15", sha("c1"), ckpt.KindManual, "", "", 0, 15)), want: "c1"},

		{name: "sha", target: BySHA("6666"), want: "c6"},
		{name: "sha upper", target: BySHA("BEEF0011"), want: "c11"},
		{name: "sha full", target: BySHA(sha("99990009")), want: "c9"},
		{name: "sha short", target: BySHA("666"), err: `invalid checkpoint target "666": checkpoint SHA prefix '666' is too short: give at least 4 hex digits`},
		{name: "sha not hex", target: BySHA("--output=/tmp/x"), err: `invalid checkpoint target "--output=/tmp/x": a checkpoint SHA is hexadecimal: "--output=/tmp/x" is not`},
		{name: "sha unknown", target: BySHA("fedc"), err: "unknown checkpoint: fedc"},
		{name: "sha current run first", target: BySHA("beef"), want: "c11"},
		{name: "sha current run given", target: Target{Kind: TargetSHA, SHA: "beef", Run: run1}, want: "c2"},
		{name: "sha ambiguous", target: BySHA("abcd"), err: "Ambiguous checkpoint SHA 'abcd'. Multiple checkpoints match:\n" +
			"  - " + sha("abcd0007") + " (autosave c7 - autosave) in run —\n" +
			"  - " + sha("abcd0003") + " (Beta step - rig-setup) in run " + run1 + "\n" +
			"Please provide more characters to uniquely identify the checkpoint."},
		{name: "sha ambiguous in current run", target: Target{Kind: TargetSHA, SHA: "beef", Run: run1},
			cps: append(ledger(), cp("c15", sha("beef0015"), ckpt.KindCompleted, "epsilon", run1, 0, 15)),
			err: "Ambiguous checkpoint SHA 'beef'. Multiple checkpoints match:\n" +
				"  - " + sha("beef0015") + " (Epsilon step - completed) in run " + run1 + "\n" +
				"  - " + sha("beef0002") + " (Alpha step - completed) in run " + run1 + "\n" +
				"Please provide more characters to uniquely identify the checkpoint."},
		{name: "sha two records one commit", target: BySHA("abcd0003"),
			cps: append(ledger(), cp("c15", sha("abcd0003"), ckpt.KindManual, "", "", 0, 15)), want: "c3"},
		{name: "sha not in git", target: BySHA("6666"), gone: []string{sha("66660006")}, err: "checkpoint c6 cannot be restored: its commit 6666000 is not in the store"},

		{name: "codon start prefers rig-setup", target: ByCodon("beta", "start"), want: "c5"},
		{name: "codon end prefers completed", target: ByCodon("beta", "end"), want: "c6"},
		{name: "codon default end", target: ByCodon("beta", ""), want: "c6"},
		{name: "codon newest attempt only", target: ByCodon("beta", "error"), err: "No error checkpoint found for codon beta"},
		{name: "codon newest run", target: ByCodon("alpha", "completed"), want: "c11"},
		{name: "codon newest run lacks rig-setup", target: ByCodon("alpha", "rig-setup"), err: "No rig-setup checkpoint found for codon alpha"},
		{name: "codon start falls to completed", target: ByCodon("alpha", "start"), want: "c11"},
		{name: "codon end falls to rig-setup", target: ByCodon("gamma", "end"),
			cps: ledger()[:10], want: "c8"},
		{name: "codon newest attempt failed seal", target: ByCodon("gamma", "end"), err: "No end checkpoint found for codon gamma"},
		{name: "codon newer run beats higher attempt", target: ByCodon("beta", "end"),
			cps: append(ledger(), cp("c15", sha("15150015"), ckpt.KindRigSetup, "beta", run2, 0, 15)), want: "c15"},
		{name: "codon skipped", target: ByCodon("delta", "start"), want: "c12"},
		{name: "codon rig-setup not in git", target: ByCodon("beta", "start"), gone: []string{sha("55550005")}, want: "c6"},
		{name: "codon unknown", target: ByCodon("omega", "end"), err: "Codon omega not found in execution history"},
		{name: "codon bad type", target: ByCodon("beta", "middle"), err: `invalid checkpoint target: unknown checkpoint type "middle" (want one of start, end, rig-setup, completed, error, skipped)`},

		{name: "last success newest completed", target: ByLastSuccess(), want: "c11"},
		{name: "last success skips unconfirmed", target: ByLastSuccess(), gone: []string{sha("beef0011")}, want: "c6"},
		{name: "last success failed codon prefers rig-setup", target: ByLastSuccess(), cps: []ckpt.Record{
			cp("c1", sha("a1"), ckpt.KindRigSetup, "alpha", run1, 0, 1),
			cp("c2", sha("a2"), ckpt.KindSkipped, "alpha", run1, 0, 2),
			cp("c3", sha("b1"), ckpt.KindRigSetup, "beta", run1, 0, 3),
			cp("c4", sha("b2"), ckpt.KindError, "beta", run1, 0, 4),
		}, want: "c3"},
		{name: "last success failed codon without rig-setup", target: ByLastSuccess(), cps: []ckpt.Record{
			cp("c1", sha("a1"), ckpt.KindRigSetup, "alpha", run1, 0, 1),
			cp("c3", sha("b1"), ckpt.KindAutosave, "", "", 0, 3),
			cp("c4", sha("b2"), ckpt.KindError, "beta", run1, 0, 4),
		}, want: "c4"},
		{name: "last success prefers skipped over rig-setup", target: ByLastSuccess(), cps: []ckpt.Record{
			cp("c1", sha("a1"), ckpt.KindRigSetup, "alpha", run1, 0, 1),
			cp("c2", sha("a2"), ckpt.KindSkipped, "alpha", run1, 0, 2),
			cp("c3", sha("b1"), ckpt.KindAutosave, "", "", 0, 3),
		}, want: "c2"},
		{name: "last success newest codon with any", target: ByLastSuccess(), cps: []ckpt.Record{
			cp("c1", sha("a1"), ckpt.KindRigSetup, "alpha", run1, 0, 1),
			cp("c2", sha("a2"), ckpt.KindError, "alpha", run1, 0, 2),
			cp("c3", sha("b1"), ckpt.KindRigSetup, "beta", run1, 0, 3),
			cp("c4", sha("b2"), ckpt.KindExit, "beta", run1, 0, 4),
		}, want: "c3"},
		{name: "last success failed codon rig-setup lost", target: ByLastSuccess(), gone: []string{sha("b1")}, cps: []ckpt.Record{
			cp("c1", sha("a1"), ckpt.KindRigSetup, "alpha", run1, 0, 1),
			cp("c3", sha("b1"), ckpt.KindRigSetup, "beta", run1, 0, 3),
			cp("c4", sha("b2"), ckpt.KindError, "beta", run1, 0, 4),
		}, want: "c4"},
		{name: "last success none", target: ByLastSuccess(), cps: []ckpt.Record{
			cp("c1", sha("a1"), ckpt.KindAutosave, "", "", 0, 1),
		}, err: "unknown checkpoint: last-success"},

		{name: "time exact", target: ByTime(base.Add(7*time.Minute), ""), want: "c7"},
		{name: "time between", target: ByTime(base.Add(7*time.Minute+30*time.Second), ""), want: "c7"},
		{name: "time skips failed", target: ByTime(base.Add(13*time.Minute), ""), want: "c12"},
		{name: "time kind", target: ByTime(base.Add(13*time.Minute), string(ckpt.KindAutosave)), want: "c7"},
		{name: "time grain holds the minute", target: Target{Kind: TargetTime, At: base.Add(6 * time.Minute), Grain: time.Minute,
			Raw: "@10:06"}, cps: append(ledger(), cp("c15", sha("15"), ckpt.KindManual, "", "", 0, 0)), want: "c6"},
		{name: "time grain edge", target: Target{Kind: TargetTime, At: base.Add(5 * time.Minute), Grain: time.Minute},
			cps: []ckpt.Record{cp("c1", sha("a1"), ckpt.KindManual, "", "", 0, 5), cp("c2", sha("a2"), ckpt.KindManual, "", "", 0, 6)}, want: "c1"},
		{name: "time before all", target: ByTime(base, ""), err: "unknown checkpoint: @2026-03-01T10:00:00Z"},
		{name: "time kind before all", target: Target{Kind: TargetTime, At: base.Add(5 * time.Minute), CheckpointKind: string(ckpt.KindAutosave), Raw: "autosave@10:05"},
			err: "unknown checkpoint: autosave@10:05"},
		{name: "time ties go to the later record", target: ByTime(base.Add(time.Minute), ""),
			cps: []ckpt.Record{cp("c2", sha("a2"), ckpt.KindManual, "", "", 0, 1), cp("c1", sha("a1"), ckpt.KindManual, "", "", 0, 1)}, want: "c2"},
		{name: "time skips unconfirmed", target: ByTime(base.Add(7*time.Minute), ""), gone: []string{sha("abcd0007")}, want: "c6"},
		{name: "time bad kind", target: ByTime(base, "nap"), err: `invalid checkpoint target: unknown checkpoint kind "nap"`},

		{name: "no kind", target: Target{}, err: "invalid checkpoint target: no target kind"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cps := tc.cps
			if cps == nil {
				cps = ledger()
			}
			calls := map[string]int{}
			confirmed := func(s string) bool {
				calls[s]++
				if calls[s] > 1 {
					t.Errorf("confirmed(%s) asked twice", s)
				}
				for _, g := range tc.gone {
					if s == g {
						return false
					}
				}
				return true
			}
			got, err := Resolve(cps, tc.target, confirmed)
			if tc.err != "" {
				if err == nil {
					t.Fatalf("got %s, want error %q", got.ID, tc.err)
				}
				if err.Error() != tc.err {
					t.Fatalf("error\n got: %q\nwant: %q", err.Error(), tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("error: %v", err)
			}
			if got.ID != tc.want {
				t.Fatalf("got %s (%s %s), want %s", got.ID, got.Kind, got.CodonID, tc.want)
			}
		})
	}
}

func TestResolveNilConfirmedAndInputOrder(t *testing.T) {
	cps := ledger()
	// Shuffled ledger: the answer does not depend on the order given.
	rev := append([]ckpt.Record(nil), cps...)
	reverse(rev)
	for _, l := range [][]ckpt.Record{cps, rev} {
		got, err := Resolve(l, ByCodon("beta", "start"), nil)
		if err != nil || got.ID != "c5" {
			t.Fatalf("got %s, %v; want c5", got.ID, err)
		}
		got, err = Resolve(l, BySHA("beef"), nil)
		if err != nil || got.ID != "c11" {
			t.Fatalf("got %s, %v; want c11", got.ID, err)
		}
	}
	// Resolve does not reorder the caller's slice.
	if cps[0].ID != "c1" || rev[0].ID != "c14" {
		t.Fatal("Resolve changed its input")
	}
}

func TestErrorTypes(t *testing.T) {
	cps := ledger()
	check := func(target Target, is func(error) bool, notFound bool) {
		t.Helper()
		_, err := Resolve(cps, target, nil)
		if err == nil || !is(err) {
			t.Fatalf("%v: got %T %v", target, err, err)
		}
		if IsNotFound(err) != notFound {
			t.Fatalf("%v: IsNotFound = %v", target, !notFound)
		}
	}
	as := func(target any) func(error) bool { return func(err error) bool { return errors.As(err, target) } }
	var nf *NotFoundError
	var cnf *CodonNotFoundError
	var tnf *TypeNotFoundError
	var amb *AmbiguousError
	var inv *InvalidTargetError
	var un *UnusableError
	check(ByID("c99"), as(&nf), true)
	check(BySHA("fedc"), as(&nf), true)
	if nf.Detail != "Checkpoint fedc not found in any run (current or historical)" {
		t.Fatalf("detail %q", nf.Detail)
	}
	check(ByCodon("omega", "end"), as(&cnf), true)
	check(ByCodon("beta", "error"), as(&tnf), true)
	check(BySHA("abcd"), as(&amb), false)
	if len(amb.Matches) != 2 || amb.Matches[0].ID != "c7" || amb.Matches[1].ID != "c3" {
		t.Fatalf("matches %+v", amb.Matches)
	}
	check(BySHA("ab"), as(&inv), false)
	check(ByID("c13"), as(&un), false)
	if un.Checkpoint.ID != "c13" {
		t.Fatalf("unusable %+v", un.Checkpoint)
	}
}

func TestMessages(t *testing.T) {
	if ErrCodonRunning.Error() != "Cannot rollback while codon is running. Use 'codon.forceStop' first." {
		t.Fatal(ErrCodonRunning)
	}
	if ErrRollbackInProgress.Error() != "Rollback already in progress" {
		t.Fatal(ErrRollbackInProgress)
	}
	b := RollbackBlocked("rollback.toCodon")
	want := Blocked{Message: "Cannot execute state-modifying commands while rollback is in progress",
		Context: "Attempted command: rollback.toCodon", Fatal: false, Severity: "operation", Code: "ROLLBACK_IN_PROGRESS"}
	if b != want {
		t.Fatalf("%+v", b)
	}
}

// TestResolveOutsideLedger: a SHA prefix also reaches the checkpoints the
// runtime recorded and the store's other commits (main's first commit), as
// the runtime's rollback.toCheckpoint does; a commit counts once, as its
// ledger record when it has one; an ambiguity across the sources lists
// every match.
func TestResolveOutsideLedger(t *testing.T) {
	rt := func(s string, kind ckpt.Kind, codon, run string, minute int) ckpt.Record {
		c := cp("", s, kind, codon, run, 0, minute)
		c.Label = ""
		return c
	}
	runtime := []ckpt.Record{
		rt(sha("7e570001"), ckpt.KindRigSetup, "alpha", run1, 0),
		rt(sha("beef0002"), ckpt.KindCompleted, "alpha", run1, 2), // c2's commit
		rt(sha("f00d0003"), ckpt.KindCompleted, "omega", run1, 20),
		rt(sha("dead0004"), ckpt.KindError, "omega", run1, 21), // git does not confirm it
		rt(sha("c1230005"), ckpt.KindSkipped, "omega", run1, 22),
	}
	root := ckpt.Record{SHA: sha("f00d5eed"), Label: "Initial checkpoint setup", Time: base.Add(-time.Hour), State: "ok"}
	commits := []ckpt.Record{root, {SHA: sha("7e570001"), Label: "rig-setup:alpha", Time: base, State: "ok"}}
	asked := 0
	src := Sources{
		Confirmed: func(s string) bool { return s != sha("dead0004") },
		Runtime:   runtime,
		Commits: func(p string) []ckpt.Record {
			asked++
			var out []ckpt.Record
			for _, c := range commits {
				if strings.HasPrefix(c.SHA, p) {
					out = append(out, c)
				}
			}
			return out
		},
	}
	for _, tc := range []struct {
		name   string
		target Target
		want   string // SHA of the answer
		kind   ckpt.Kind
		err    string
	}{
		{name: "runtime only", target: BySHA("7e570001"), want: sha("7e570001"), kind: ckpt.KindRigSetup},
		{name: "ledger wins over runtime", target: BySHA("beef0002"), want: sha("beef0002"), kind: ckpt.KindCompleted},
		{name: "main's first commit", target: BySHA("f00d5ee"), want: root.SHA},
		{name: "id that is a runtime sha", target: ByID("c1230"), want: sha("c1230005"), kind: ckpt.KindSkipped},
		{name: "unconfirmed runtime sha", target: BySHA("dead0004"), err: "unknown checkpoint: dead0004"},
		{name: "ambiguous across sources", target: BySHA("f00d"), err: "Ambiguous checkpoint SHA 'f00d'. Multiple checkpoints match:\n" +
			"  - " + sha("f00d0003") + " (Omega step - completed) in run " + run1 + "\n" +
			"  - " + sha("f00d5eed") + " (Initial checkpoint setup - commit) in run —\n" +
			"Please provide more characters to uniquely identify the checkpoint."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ResolveIn(ledger(), tc.target, src)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("got %+v, %v\nwant error %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got.SHA != tc.want || got.Kind != tc.kind {
				t.Fatalf("got %+v, %v; want %s (%s)", got, err, tc.want, tc.kind)
			}
			if tc.name == "ledger wins over runtime" && got.ID != "c2" {
				t.Fatalf("got %+v, want the ledger's c2", got)
			}
		})
	}
	// Targets other than a SHA never ask git for commits.
	asked = 0
	if _, err := ResolveIn(ledger(), ByCodon("beta", "end"), src); err != nil || asked != 0 {
		t.Fatalf("codon target: %v, git asked %d times", err, asked)
	}
}
