package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestUsageAndExitCodes(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		out  string
	}{
		{nil, exitOK, "usage: cairn-bench seal"},
		{[]string{"--help"}, exitOK, "usage: cairn-bench seal"},
		{[]string{"seal", "--help"}, exitOK, "-sizes"},
		{[]string{"replicate", "-h"}, exitOK, "-samples"},
		{[]string{"bogus"}, exitUsage, `unknown benchmark "bogus"`},
		{[]string{"restore", "extra"}, exitUsage, "restore takes no arguments"},
		{[]string{"seal", "--sizes", "x"}, exitUsage, "--sizes"},
		{[]string{"replicate", "--parts", "nope"}, exitUsage, `unknown part "nope"`},
	} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), c.args, &out, &errOut); code != c.code {
			t.Errorf("%v: exit %d, want %d (%s)", c.args, code, c.code, errOut.String())
		}
		if got := out.String() + errOut.String(); !strings.Contains(got, c.out) {
			t.Errorf("%v: output %q lacks %q", c.args, got, c.out)
		}
	}
}

func TestParseCount(t *testing.T) {
	for in, want := range map[string]int{"1000": 1000, "1k": 1000, "100K": 100000} {
		if n, err := parseCount(in); err != nil || n != want {
			t.Errorf("parseCount(%q) = %d, %v; want %d", in, n, err, want)
		}
	}
	for _, in := range []string{"", "k", "-1", "0", "1m"} {
		if _, err := parseCount(in); err == nil {
			t.Errorf("parseCount(%q): no error", in)
		}
	}
}
