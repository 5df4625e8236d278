package main

import (
	"bytes"
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/platform/testsupport"
	"github.com/cairn-dev/cairn/restore/ckpt"
	"github.com/cairn-dev/cairn/snapshot"
)

// TestDemoSealsTheScriptedRun runs the demo without pauses and sees the
// daemon seal the scripted run's checkpoints: the plan codon's completion
// in the store, each step and the final listing in the output.
func TestDemoSealsTheScriptedRun(t *testing.T) {
	dir := t.TempDir()
	exec := filepath.Join(dir, "exec")
	var out, errOut bytes.Buffer // written by run; read once it has returned
	var code int
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		code = run(context.Background(), []string{"--dir", dir, "--pace", "0"}, &out, &errOut)
	}()
	t.Cleanup(func() { <-finished }) // the demo writes in dir until it returns

	testsupport.WaitFor(t, time.Minute, "a sealed checkpoint of codon plan completed", func() bool {
		st, err := snapshot.Open(context.Background(), exec, snapshot.Options{NoCreate: true})
		if err != nil {
			return false // the daemon has not created the store yet
		}
		defer st.Close()
		return slices.ContainsFunc(st.Records(), func(r ckpt.Record) bool {
			return r.CodonID == "plan" && r.Kind == ckpt.KindCompleted && r.State == ckpt.StateOK
		})
	})
	<-finished // the demo's own waits are bounded
	if code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, errOut.String())
	}
	for _, want := range []string{"» codon plan completed", "sealed c1 baseline", "cairn list " + exec, "git --git-dir="} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"-h"}, exitOK, "usage: cairn-demo"},
		{[]string{"--pace", "soon"}, exitUsage, "invalid value"},
		{[]string{"extra"}, exitUsage, "takes no arguments"},
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
