package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestCairnBesideOlderWarns: a cairn beside cairn-bench that is older than
// cairn-bench is still run (an installed pair), but with a warning: the
// daemon benchmark would otherwise measure old code without saying so.
func TestCairnBesideOlderWarns(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Skip("no path to this test binary")
	}
	name := "cairn"
	if runtime.GOOS == "windows" {
		name += ".exe"
	}
	beside := filepath.Join(filepath.Dir(exe), name)
	if _, err := os.Lstat(beside); err == nil {
		t.Skipf("%s exists already", beside)
	}
	if err := os.WriteFile(beside, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Skipf("cannot write beside the test binary: %v", err)
	}
	defer os.Remove(beside)
	for _, tc := range []struct {
		age  time.Duration
		warn bool
	}{{-time.Hour, true}, {time.Hour, false}} {
		self, err := os.Stat(exe)
		if err != nil {
			t.Fatal(err)
		}
		at := self.ModTime().Add(tc.age)
		if err := os.Chtimes(beside, at, at); err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		got, cleanup, err := cairnBinary(context.Background(), &env{stdout: &bytes.Buffer{}, stderr: &stderr}, "")
		if err != nil {
			t.Fatal(err)
		}
		cleanup()
		if got != beside {
			t.Errorf("cairnBinary = %s, want the cairn beside, %s", got, beside)
		}
		if warned := strings.Contains(stderr.String(), "older than this cairn-bench"); warned != tc.warn {
			t.Errorf("cairn %v older: warned %v, want %v (%q)", -tc.age, warned, tc.warn, stderr.String())
		}
	}
}
