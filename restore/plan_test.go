package restore

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

func TestFormatPlan(t *testing.T) {
	target := ckpt.Record{ID: "c7", SHA: sha("abc1234f")}
	cases := []struct {
		name string
		plan ckpt.Plan
		want string
	}{
		{name: "mixed", plan: ckpt.Plan{Target: target, Kept: 40,
			Write: []ckpt.PlanFile{
				{Path: "src/main.go", Size: 1229, Action: ckpt.ActionModify},
				{Path: "README.md", Size: 12, Action: ckpt.ActionAdd},
				{Path: "big.bin", Size: 3 << 20},
			},
			Delete: []ckpt.PlanFile{{Path: "notes.tmp", Size: 312, Action: ckpt.ActionDelete}},
		}, want: "" +
			"write     12 B  README.md\n" +
			"write  3.0 MiB  big.bin\n" +
			"write  1.2 KiB  src/main.go\n" +
			"delete   312 B  notes.tmp\n" +
			"restore to c7 (abc1234): write 3 files (1 new, 2 changed, 3.0 MiB), delete 1 file (312 B), 40 unchanged\n"},
		{name: "deletes only", plan: ckpt.Plan{Target: target, Kept: 1,
			Delete: []ckpt.PlanFile{{Path: "b", Size: 2}, {Path: "a", Size: 1}}},
			want: "" +
				"delete 1 B  a\n" +
				"delete 2 B  b\n" +
				"restore to c7 (abc1234): delete 2 files (3 B), 1 unchanged\n"},
		{name: "empty", plan: ckpt.Plan{Target: target, Kept: 1},
			want: "restore to c7 (abc1234): nothing to change, 1 file already matches\n"},
		{name: "no target", plan: ckpt.Plan{Kept: 0},
			want: "restore to —: nothing to change, 0 files already match\n"},
		{name: "awkward names", plan: ckpt.Plan{Target: ckpt.Record{ID: "c1"},
			Write: []ckpt.PlanFile{{Path: "a\nb", Size: 1, Action: ckpt.ActionAdd}, {Path: "bad\xffname", Size: 1, Action: ckpt.ActionAdd}, {Path: "ünïcode name", Size: 1, Action: ckpt.ActionAdd},
				{Path: "rtl\u202egpj.exe", Size: 1, Action: ckpt.ActionAdd}}},
			want: "" +
				"write  1 B  a\\nb\n" +
				"write  1 B  bad\\xffname\n" +
				"write  1 B  rtl\\u202egpj.exe\n" +
				"write  1 B  ünïcode name\n" +
				"restore to c1: write 4 files (4 new, 0 changed, 4 B), 0 unchanged\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := FormatPlan(&b, tc.plan); err != nil {
				t.Fatal(err)
			}
			if b.String() != tc.want {
				t.Fatalf("got:\n%s\nwant:\n%s", b.String(), tc.want)
			}
		})
	}
}

func TestFormatPlanKeepsInput(t *testing.T) {
	p := ckpt.Plan{Write: []ckpt.PlanFile{{Path: "b"}, {Path: "a"}}}
	_ = FormatPlan(&bytes.Buffer{}, p)
	if p.Write[0].Path != "b" {
		t.Fatal("FormatPlan sorted the caller's slice")
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("closed") }

func TestFormatPlanWriteError(t *testing.T) {
	if err := FormatPlan(failWriter{}, ckpt.Plan{}); err == nil {
		t.Fatal("write error lost")
	}
}

func TestPlanCounts(t *testing.T) {
	p := ckpt.Plan{Write: []ckpt.PlanFile{{Size: 5, Action: ckpt.ActionAdd}, {Size: 7, Action: ckpt.ActionModify}, {Size: 1}},
		Delete: []ckpt.PlanFile{{Size: 100, Action: ckpt.ActionDelete}}}
	if p.Added() != 1 || p.Modified() != 2 || p.WriteBytes() != 13 || p.DeleteBytes() != 100 || p.Empty() {
		t.Fatalf("%d %d %d %d %v", p.Added(), p.Modified(), p.WriteBytes(), p.DeleteBytes(), p.Empty())
	}
	if !(ckpt.Plan{Kept: 3}).Empty() {
		t.Fatal("a plan with nothing to write or delete is empty")
	}
}

// TestFormatPlanBrief: a plan over PlanListed files is counted by top
// folder, biggest first, with how to list each file; a small one is listed.
func TestFormatPlanBrief(t *testing.T) {
	var p ckpt.Plan
	for i := range 250 {
		p.Write = append(p.Write, ckpt.PlanFile{Path: fmt.Sprintf("src/f%03d", i), Size: 1024, Action: ckpt.ActionAdd})
	}
	p.Write = append(p.Write, ckpt.PlanFile{Path: "README.md", Size: 10, Action: ckpt.ActionModify})
	p.Delete = []ckpt.PlanFile{{Path: "docs/old.md", Size: 5, Action: ckpt.ActionDelete}}
	var b strings.Builder
	if err := FormatPlanBrief(&b, p); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 5 || !strings.Contains(lines[0], "250.0 KiB") || !strings.Contains(lines[0], "write 250 files  src/") ||
		!strings.Contains(out, "delete 1 file  docs/") || !strings.Contains(out, "(252 files in all: --files lists each one)") {
		t.Errorf("brief plan:\n%s", out)
	}
	p.Write = p.Write[:3]
	b.Reset()
	if err := FormatPlanBrief(&b, p); err != nil || !strings.Contains(b.String(), "write  1.0 KiB  src/f000") {
		t.Errorf("small plan not listed:\n%s", b.String())
	}
}
