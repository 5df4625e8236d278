package restore

import (
	"testing"
	"time"
)

func TestParseTarget(t *testing.T) {
	loc := time.FixedZone("X", 2*3600)
	now := time.Date(2026, 3, 1, 12, 30, 15, 500, loc)
	cases := []struct {
		in   string
		want Target // Raw is filled in from in
		err  string
	}{
		{in: "c12", want: Target{Kind: TargetID, ID: "c12"}},
		{in: "C12", want: Target{Kind: TargetID, ID: "c12"}},
		{in: " c7 ", want: Target{Kind: TargetID, ID: "c7"}},
		{in: "c1234", want: Target{Kind: TargetID, ID: "c1234"}},
		{in: "sha:c1234", want: Target{Kind: TargetSHA, SHA: "c1234"}},
		{in: "abcd", want: Target{Kind: TargetSHA, SHA: "abcd"}},
		{in: "ABCDEF0123", want: Target{Kind: TargetSHA, SHA: "abcdef0123"}},
		{in: "1234", want: Target{Kind: TargetSHA, SHA: "1234"}},
		{in: "c0ffee", want: Target{Kind: TargetSHA, SHA: "c0ffee"}},
		{in: "abc", err: `invalid checkpoint target "abc": checkpoint SHA prefix 'abc' is too short: give at least 4 hex digits`},
		{in: "sha:ab", err: `invalid checkpoint target "sha:ab": checkpoint SHA prefix 'ab' is too short: give at least 4 hex digits`},
		{in: "sha:xyz1", err: `invalid checkpoint target "sha:xyz1": a checkpoint SHA is hexadecimal: "xyz1" is not`},
		{in: "last-success", want: Target{Kind: TargetLastSuccess}},
		{in: "Last-Success", want: Target{Kind: TargetLastSuccess}},
		{in: "codon:review#2", want: Target{Kind: TargetCodon, Codon: "review#2", Type: "end"}},
		{in: "codon:review#2:start", want: Target{Kind: TargetCodon, Codon: "review#2", Type: "start"}},
		{in: "codon:a:b:rig-setup", want: Target{Kind: TargetCodon, Codon: "a:b", Type: "rig-setup"}},
		{in: "codon:a:b", want: Target{Kind: TargetCodon, Codon: "a:b", Type: "end"}},
		{in: "codon:", err: `invalid checkpoint target "codon:": no codon id after codon:`},
		{in: "@10:42", want: Target{Kind: TargetTime, At: time.Date(2026, 3, 1, 10, 42, 0, 0, loc), Grain: time.Minute}},
		{in: "@10:42:07", want: Target{Kind: TargetTime, At: time.Date(2026, 3, 1, 10, 42, 7, 0, loc), Grain: time.Second}},
		{in: "autosave@10:42", want: Target{Kind: TargetTime, At: time.Date(2026, 3, 1, 10, 42, 0, 0, loc), Grain: time.Minute, CheckpointKind: "autosave"}},
		{in: "@10m", want: Target{Kind: TargetTime, At: now.Add(-10 * time.Minute)}},
		{in: "@10m ago", want: Target{Kind: TargetTime, At: now.Add(-10 * time.Minute)}},
		{in: "@2d", want: Target{Kind: TargetTime, At: now.Add(-48 * time.Hour)}},
		{in: "@1h30m", want: Target{Kind: TargetTime, At: now.Add(-90 * time.Minute)}},
		{in: "@2026-02-27T08:00:00Z", want: Target{Kind: TargetTime, At: time.Date(2026, 2, 27, 8, 0, 0, 0, time.UTC), Grain: time.Second}},
		{in: "@2026-02-27T08:00:00.25+01:00", want: Target{Kind: TargetTime, At: time.Date(2026, 2, 27, 7, 0, 0, 250e6, time.UTC)}},
		{in: "@2026-02-27 08:00", want: Target{Kind: TargetTime, At: time.Date(2026, 2, 27, 8, 0, 0, 0, loc), Grain: time.Minute}},
		{in: "@2026-02-27T08:00:09", want: Target{Kind: TargetTime, At: time.Date(2026, 2, 27, 8, 0, 9, 0, loc), Grain: time.Second}},
		{in: "nap@10:42", err: `invalid checkpoint target "nap@10:42": unknown checkpoint kind "nap" (want one of rig-setup, completed, error, skipped, exit, autosave, manual, pre-restore, baseline)`},
		{in: "@", err: `invalid checkpoint target "@": no time given`},
		{in: "@-10m", want: Target{Kind: TargetTime, At: now.Add(-10 * time.Minute)}}, // README's @-5m form
		{in: "autosave@-2d", want: Target{Kind: TargetTime, At: now.Add(-48 * time.Hour), CheckpointKind: "autosave"}},
		{in: "@--10m", err: `invalid checkpoint target "@--10m": cannot read time "--10m": want RFC 3339, 2006-01-02 15:04[:05], 15:04[:05] (today) or a duration ago like 10m, 2h, 1d`},
		{in: "@25:00", err: `invalid checkpoint target "@25:00": cannot read time "25:00": want RFC 3339, 2006-01-02 15:04[:05], 15:04[:05] (today) or a duration ago like 10m, 2h, 1d`},
		{in: "", err: `invalid checkpoint target: empty`},
		{in: "  ", err: `invalid checkpoint target "  ": empty`},
		{in: "--output=/tmp/x", err: `invalid checkpoint target "--output=/tmp/x": want a ledger id (c7), a SHA prefix of at least 4 hex digits, @<time>, <kind>@<time>, codon:<id>[:<type>] or last-success`},
		{in: "HEAD~1", err: `invalid checkpoint target "HEAD~1": want a ledger id (c7), a SHA prefix of at least 4 hex digits, @<time>, <kind>@<time>, codon:<id>[:<type>] or last-success`},
		{in: "sha:" + sha("ab") + "00000000000000000000000000", err: `invalid checkpoint target "sha:` + sha("ab") + `00000000000000000000000000": checkpoint SHA is longer than 64 hex digits`},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseTargetAt(tc.in, now)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("error\n got: %v\nwant: %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want
			want.Raw = tc.in
			if !got.At.Equal(want.At) {
				t.Fatalf("At %v, want %v", got.At, want.At)
			}
			got.At, want.At = time.Time{}, time.Time{}
			if got != want {
				t.Fatalf("got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestTargetString(t *testing.T) {
	at := time.Date(2026, 3, 1, 10, 42, 0, 0, time.UTC)
	cases := []struct {
		t    Target
		want string
	}{
		{ByID("c7"), "c7"},
		{BySHA("abcd"), "abcd"},
		{ByCodon("beta", ""), "codon:beta:end"},
		{ByCodon("beta", "start"), "codon:beta:start"},
		{ByLastSuccess(), "last-success"},
		{ByTime(at, ""), "@2026-03-01T10:42:00Z"},
		{ByTime(at, "autosave"), "autosave@2026-03-01T10:42:00Z"},
		{Target{Kind: TargetID, ID: "c7", Raw: "C7"}, "C7"},
	}
	for _, tc := range cases {
		if got := tc.t.String(); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
		// Every String() without Raw reads back as the same target.
		if tc.t.Raw == "" {
			back, err := ParseTargetAt(tc.t.String(), at)
			if err != nil {
				t.Errorf("%q: %v", tc.want, err)
				continue
			}
			if back.Kind != tc.t.Kind || back.String() != tc.want {
				t.Errorf("%q read back as %+v", tc.want, back)
			}
		}
	}
}

func TestParseTime(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.Local)
	got, err := ParseTime("15:04", now)
	if err != nil || !got.Equal(time.Date(2026, 3, 1, 15, 4, 0, 0, time.Local)) {
		t.Fatalf("%v %v", got, err)
	}
	if _, err := ParseTime("yesterday", now); err == nil {
		t.Fatal("yesterday read as a time")
	}
}
