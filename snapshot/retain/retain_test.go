package retain

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

var t0 = time.Date(2026, 3, 29, 0, 30, 0, 0, time.UTC) // the night Europe moves its clocks: buckets are UTC

func rec(id int, kind ckpt.Kind, at time.Time) ckpt.Record {
	r := ckpt.Record{ID: fmt.Sprintf("c%d", id), SHA: fmt.Sprintf("%040x", id), Kind: kind, Time: at, State: ckpt.StateOK}
	r.Ref = "refs/cairn/" + string(kind) + "/" + r.ID
	if kind == ckpt.KindPreRestore {
		r.Ref = "refs/heads/recovery/x-" + r.ID
	}
	return r
}

func ids(m map[string]string) string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return idNum(out[i]) < idNum(out[j]) })
	return strings.Join(out, " ")
}

func TestKept(t *testing.T) {
	h := time.Hour
	// c1..c6 one every 20 minutes from t0; c7, c8 a day and two later;
	// c9 a week later; c10 in the next month.
	var recs []ckpt.Record
	for i := 0; i < 6; i++ {
		recs = append(recs, rec(i+1, ckpt.KindAutosave, t0.Add(time.Duration(i)*20*time.Minute)))
	}
	recs = append(recs, rec(7, ckpt.KindAutosave, t0.Add(24*h)), rec(8, ckpt.KindAutosave, t0.Add(48*h)),
		rec(9, ckpt.KindAutosave, t0.Add(8*24*h)), rec(10, ckpt.KindAutosave, time.Date(2026, 4, 30, 23, 59, 59, 0, time.UTC)))
	for _, tc := range []struct {
		name string
		p    Policy
		want string
	}{
		{"last 3", Policy{KeepLast: 3}, "c8 c9 c10"},
		{"last more than there are", Policy{KeepLast: 50}, "c1 c2 c3 c4 c5 c6 c7 c8 c9 c10"},
		// c10 is the newest: within counts back from it, not from now.
		{"within 30d", Policy{KeepWithin: 30 * 24 * h}, "c9 c10"},
		{"within exact edge", Policy{KeepWithin: recs[9].Time.Sub(recs[8].Time)}, "c9 c10"},
		// Hours with a checkpoint: 00h (c1 00:30, c2 00:50 → c2), 01h (c3 c4 c5 → c5), 02h (c6), then c7…c10 each alone.
		{"hourly 6", Policy{KeepHourly: 6}, "c5 c6 c7 c8 c9 c10"},
		{"hourly 10", Policy{KeepHourly: 10}, "c2 c5 c6 c7 c8 c9 c10"},
		{"daily 2", Policy{KeepDaily: 2}, "c9 c10"},
		{"daily 5", Policy{KeepDaily: 5}, "c6 c7 c8 c9 c10"},
		// ISO weeks: t0 is a Sunday (W13), c7 and c8 Monday/Tuesday (W14), c9 W15, c10 W18.
		{"weekly 3", Policy{KeepWeekly: 3}, "c8 c9 c10"},
		{"weekly 4", Policy{KeepWeekly: 4}, "c6 c8 c9 c10"},
		// Months: March's newest is c8 (31st), April's c10.
		{"monthly 2", Policy{KeepMonthly: 2}, "c8 c10"},
		{"union", Policy{KeepLast: 1, KeepMonthly: 2, KeepDaily: 2}, "c8 c9 c10"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ids(Kept(recs, tc.p)); got != tc.want {
				t.Errorf("kept %s, want %s", got, tc.want)
			}
		})
	}
	// Bucket boundaries are UTC: 23:59:59 and 00:00:00 are two days, in any zone.
	cet := time.FixedZone("CET", 3600)
	a := rec(1, ckpt.KindAutosave, time.Date(2026, 1, 1, 23, 59, 59, 0, time.UTC).In(cet))
	b := rec(2, ckpt.KindAutosave, time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC).In(cet))
	if got := ids(Kept([]ckpt.Record{a, b}, Policy{KeepDaily: 2})); got != "c1 c2" {
		t.Errorf("daily across midnight UTC: %s", got)
	}
	c := rec(3, ckpt.KindAutosave, time.Date(2026, 1, 1, 23, 0, 0, 0, time.UTC))
	if got := ids(Kept([]ckpt.Record{a, c}, Policy{KeepDaily: 2})); got != "c1" {
		t.Errorf("same UTC day keeps the newest only: %s", got)
	}
}

func TestPolicyValidate(t *testing.T) {
	if err := (Policy{}).Validate(); err == nil || !strings.Contains(err.Error(), "keeps nothing") {
		t.Errorf("empty policy: %v", err)
	}
	if err := (Policy{KeepLast: -1, KeepDaily: 3}).Validate(); err == nil {
		t.Error("negative count accepted")
	}
	if err := Defaults().Validate(); err != nil {
		t.Error(err)
	}
	if got := Defaults().Autosave.String(); got != "keep_within=1d keep_hourly=168 keep_daily=30" {
		t.Errorf("String: %s", got)
	}
	for in, want := range map[string]time.Duration{"24h": 24 * time.Hour, "30d": 30 * 24 * time.Hour,
		"1w2d12h": 9*24*time.Hour + 12*time.Hour, "90m": 90 * time.Minute} {
		if got, err := ParseSpan(in); err != nil || got != want {
			t.Errorf("ParseSpan(%q) = %v, %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "d", "5", "5y", "-1d", "1.5d"} {
		if _, err := ParseSpan(bad); err == nil {
			t.Errorf("ParseSpan(%q) accepted", bad)
		}
	}
}

func TestPlan(t *testing.T) {
	h := time.Hour
	ps := Policies{Autosave: Policy{KeepLast: 1}, PreRestore: Policy{KeepLast: 1}, Checkpoints: Policy{KeepWithin: 24 * h}}
	life := func(id int, run string, kind ckpt.Kind, at time.Time) ckpt.Record {
		r := rec(id, kind, at)
		r.RunID, r.CodonID, r.Ref = run, "k", "refs/heads/run-"+run
		return r
	}
	recs := []ckpt.Record{
		rec(1, ckpt.KindBaseline, t0),
		life(2, "A", ckpt.KindRigSetup, t0.Add(h)),
		life(3, "A", ckpt.KindCompleted, t0.Add(2*h)),
		rec(4, ckpt.KindAutosave, t0.Add(3*h)),
		rec(5, ckpt.KindAutosave, t0.Add(4*h)),
		rec(6, ckpt.KindPreRestore, t0.Add(5*h)),
		life(7, "B", ckpt.KindRigSetup, t0.Add(6*h)),
		life(8, "B", ckpt.KindError, t0.Add(7*h)),
		rec(9, ckpt.KindAutosave, t0.Add(8*h)),
		life(10, "C", ckpt.KindRigSetup, t0.Add(72*h)),
		life(11, "C", ckpt.KindCompleted, t0.Add(73*h)),
		rec(12, ckpt.KindAutosave, t0.Add(74*h)),
		rec(13, ckpt.KindPreRestore, t0.Add(75*h)),
		rec(14, ckpt.KindManual, t0.Add(2*h)),
		rec(15, ckpt.KindManual, t0.Add(76*h)),
		{ID: "c16", Kind: ckpt.KindAutosave, State: ckpt.StateFailed, Time: t0},
	}
	pruned := rec(17, ckpt.KindAutosave, t0)
	pruned.State = ckpt.StatePruned
	recs = append(recs, pruned)
	odd := rec(18, ckpt.KindManual, t0)
	odd.Ref = "refs/heads/elsewhere"
	recs = append(recs, odd)

	show := func(ds []Drop) string {
		var out []string
		for _, d := range ds {
			var rs []string
			for _, r := range d.Records {
				rs = append(rs, r.ID)
			}
			out = append(out, string(d.Unit)+":"+strings.Join(rs, ","))
		}
		return strings.Join(out, " ")
	}
	for _, tc := range []struct {
		name string
		prot Protected
		want string
	}{
		// Baseline c1 is the newest baseline; rig-setup c10, completed c11 and
		// error c8 are newest of their kinds, so runs B and C stay; run A
		// keeps nothing and goes whole. c14 is an older manual.
		{"plain", Protected{}, "run:c2,c3 single:c14 single:c4 single:c5 single:c6 single:c9"},
		{"pinned autosave and protected run", Protected{SHAs: map[string]bool{rec(5, "", t0).SHA: true}, Runs: map[string]bool{"A": true}},
			"single:c14 single:c4 single:c6 single:c9"},
		{"pin inside a run keeps the run", Protected{SHAs: map[string]bool{rec(2, "", t0).SHA: true}},
			"single:c14 single:c4 single:c5 single:c6 single:c9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds := Plan(recs, ps, tc.prot)
			if got := show(ds); got != tc.want {
				t.Errorf("plan %s\nwant %s", got, tc.want)
			}
			for _, d := range ds {
				if d.Rule == "" || !strings.HasPrefix(d.Rule, "retention.") {
					t.Errorf("drop %+v has rule %q", d, d.Rule)
				}
				if d.Unit == UnitRun && d.Ref != "refs/heads/run-"+d.RunID {
					t.Errorf("run drop ref %s", d.Ref)
				}
			}
		})
	}
	if ds := Plan(recs, ps, Protected{}); ds[0].Rule != "retention.checkpoints (keep_within=1d)" {
		t.Errorf("run rule %q", ds[0].Rule)
	}
}
