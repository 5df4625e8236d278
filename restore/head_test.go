package restore

import (
	"testing"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

func TestHeadMarker(t *testing.T) {
	cps := ledger()
	cases := []struct {
		name     string
		cps      []ckpt.Record
		position string
		want     string
	}{
		{name: "sealed from", position: sha("14140014"), want: "c14"},
		{name: "restored to", position: sha("66660006"), want: "c6"},
		{name: "upper case", position: "  " + sha("BEEF0011") + "\n", want: "c11"},
		{name: "no position", position: "", want: ""},
		{name: "unknown commit", position: sha("fedc"), want: ""},
		{name: "prefix is not a position", position: "6666", want: ""},
		{name: "newest record of the commit", position: sha("66660006"),
			cps: append(ledger(), cp("c15", sha("66660006"), ckpt.KindManual, "", "", 0, 15)), want: "c15"},
		{name: "failed records never marked", position: "",
			cps: []ckpt.Record{{ID: "c1", State: ckpt.StateFailed}}, want: ""},
		{name: "empty ledger", position: sha("66660006"), cps: []ckpt.Record{}, want: ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := tc.cps
			if l == nil {
				l = cps
			}
			if got := HeadMarker(l, tc.position); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
	if HeadMark != "← HEAD" {
		t.Fatal(HeadMark)
	}
}
