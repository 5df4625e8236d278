package cli

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

func TestColourPatchAndStat(t *testing.T) {
	patch := "diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-one\n+two\n context\n"
	if got := colourPatch(false, patch); got != patch {
		t.Errorf("no palette changed the text: %q", got)
	}
	got := colourPatch(true, patch)
	for _, want := range []string{"\x1b[1mdiff --git a/a.txt b/a.txt\x1b[0m\n", "\x1b[36m@@ -1 +1 @@\x1b[0m\n", "\x1b[31m-one\x1b[0m\n", "\x1b[32m+two\x1b[0m\n", "\n context\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("coloured patch lacks %q:\n%q", want, got)
		}
	}
	stat := " a.txt | 3 ++-\n 1 file changed, 2 insertions(+), 1 deletion(-)\n"
	if got := colourStat(true, stat); !strings.Contains(got, "| 3 \x1b[32m++\x1b[0m\x1b[31m-\x1b[0m\n") || !strings.HasSuffix(got, "1 deletion(-)\n") {
		t.Errorf("coloured stat: %q", got)
	}
}

// The pager runs only on a terminal; it gets the text on stdin.
func TestPager(t *testing.T) {
	var b bytes.Buffer
	if p := pagerCommand(&b); p != "" {
		t.Errorf("a buffer is paged through %q", p)
	}
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if p := pagerCommand(f); p != "" {
		t.Errorf("a file is paged through %q", p)
	}
	if err := page(&b, "sed 's/^/paged: /'", "one\ntwo\n"); err != nil || b.String() != "paged: one\npaged: two\n" {
		t.Errorf("page: %v, %q", err, b.String())
	}
	b.Reset()
	if err := page(&b, "", "plain\n"); err != nil || b.String() != "plain\n" {
		t.Errorf("no pager: %v, %q", err, b.String())
	}
	if err := page(&b, "exit 3", "x\n"); err == nil || !strings.Contains(err.Error(), `pager "exit 3"`) {
		t.Errorf("a failing pager: %v", err)
	}
}
