package cli

import (
	"strings"
	"testing"
)

func TestHookLabelLine(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"\n\n  fix the bug  \nmore", "fix the bug"},
		{"tab\there", "tab here"},
		{"esc \x1b[31mred\x1b[0m and \u202ebidi", "esc [31mred[0m and bidi"},
		{"bad \xff byte", "bad  byte"},
		{strings.Repeat("é", 100), strings.Repeat("é", maxLabel-1) + "…"},
		{"", ""},
	} {
		if got := labelLine(c.in); got != c.want {
			t.Errorf("labelLine(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestHookSafeID(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"8c35adc1-4f0e-4a8b-9d61-2b7c0e5f1a93", "8c35adc1-4f0e-4a8b-9d61-2b7c0e5f1a93"},
		{"../../etc/passwd", "______etc_passwd"},
		{"a..b.lock", "a__b_lock"},
		{"", "nosession"},
		{strings.Repeat("x", 100), strings.Repeat("x", 64)},
		{"sé", "s__"},
	} {
		if got := safeID(c.in); got != c.want {
			t.Errorf("safeID(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
