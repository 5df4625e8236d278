//go:build linux

package agent_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/client"
)

// TestRestoreDamagedTargetRefused: through the real daemon, a restore (the
// cairn command, its dry run, a rollback and the socket API) to a
// checkpoint whose blob the store lost is refused with TARGET_DAMAGED and
// the lost file and object named; the work tree is byte for byte as it was
// and no pre-restore checkpoint is sealed. A restore to an undamaged
// checkpoint of the same store still works.
func TestRestoreDamagedTargetRefused(t *testing.T) {
	ws := t.TempDir()
	gen := func(g string) {
		for i := range 30 {
			write(t, filepath.Join(ws, fmt.Sprintf("a/f%02d.txt", i)), fmt.Sprintf("%s %02d\n", g, i))
		}
	}
	gen("one")
	write(t, filepath.Join(ws, "b/old.txt"), "only in one\n")
	d := startDaemon(t, "", "--config", configFile(t, noAutosave+"engine = \"git\"\n"), "--watch", ws)
	var st api.WorkspaceStatus
	waitFor(t, 30*time.Second, "a baseline", func() bool {
		var ok bool
		st, ok = d.workspace(ws)
		return ok && st.Last != "" && st.State == "watching"
	})
	ctx := context.Background()
	c := client.New(d.socket)
	defer c.Close()
	one := ledger(t, ws, d.state)[0]
	seal := func(g string) api.Record {
		gen(g)
		waitPending(t, d, ws)
		rec, err := c.Checkpoint(ctx, api.CheckpointRequest{Workspace: ws, Label: g})
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	if err := os.RemoveAll(filepath.Join(ws, "b")); err != nil {
		t.Fatal(err)
	}
	two := seal("two")
	seal("three")

	blob := git(t, st.Store, "rev-parse", one.SHA+":a/f05.txt")
	loose := filepath.Join(st.Store, "objects", blob[:2], blob[2:])
	if err := os.Remove(loose); err != nil {
		t.Fatalf("the git engine should leave %s loose: %v", blob, err)
	}
	before := hashTree(t, ws)
	recs := len(ledger(t, ws, d.state))

	untouched := func(what string) {
		t.Helper()
		sameTree(t, what, hashTree(t, ws), before)
		if n := len(ledger(t, ws, d.state)); n != recs {
			t.Errorf("%s: the ledger grew by %d records", what, n-recs)
		}
	}
	for _, args := range [][]string{
		{"restore", ws, one.ID},
		{"restore", ws, one.ID, "--dry-run"},
		{"rollback", ws, "--sha", one.SHA[:10]},
	} {
		out, err := runCairn(t, append(args, "--socket", d.socket)...)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 5 {
			t.Errorf("cairn %s: %v, want exit 5 (refused)\n%s", strings.Join(args, " "), err, out)
		}
		for _, w := range []string{"damaged", "a/f05.txt", blob, "missing", "untouched"} {
			if !strings.Contains(out, w) {
				t.Errorf("cairn %s says nothing of %q:\n%s", strings.Join(args, " "), w, out)
			}
		}
		untouched("cairn " + strings.Join(args, " "))
	}

	_, err := c.Restore(ctx, api.RestoreRequest{Workspace: ws, Target: one.ID})
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Code != api.CodeTargetDamaged || ce.Status != 409 {
		t.Fatalf("API restore: %v, want 409 %s", err, api.CodeTargetDamaged)
	}
	if len(ce.Lost) != 1 || ce.Lost[0].Path != "a/f05.txt" || ce.Lost[0].SHA != blob || ce.Lost[0].Type != "blob" || ce.Lost[0].Problem != "missing" {
		t.Errorf("API lost %+v, want a/f05.txt's blob %s missing", ce.Lost, blob)
	}
	untouched("the API restore")

	if out, err := runCairn(t, "restore", ws, two.ID, "--socket", d.socket); err != nil {
		t.Fatalf("restore to the undamaged %s: %v\n%s", two.ID, err, out)
	}
	fileIs(t, filepath.Join(ws, "a/f05.txt"), "two 05\n")
}

// TestRestoreRefusedWhereFolderCannotBeHeld: through the real daemon, with
// the git engine, a restore whose target has a file where a folder holding
// a nested repository stands is refused with IN_THE_WAY (409), naming the
// folder; the work tree is as it was, the nested repository with it.
func TestRestoreRefusedWhereFolderCannotBeHeld(t *testing.T) {
	ws := t.TempDir()
	write(t, filepath.Join(ws, "a"), "a file\n")
	write(t, filepath.Join(ws, "k.txt"), "k\n")
	d := startDaemon(t, "", "--config", configFile(t, noAutosave+"engine = \"git\"\n"), "--watch", ws)
	waitFor(t, 30*time.Second, "a baseline", func() bool {
		st, ok := d.workspace(ws)
		return ok && st.Last != "" && st.State == "watching"
	})
	ctx := context.Background()
	c := client.New(d.socket)
	defer c.Close()
	one := ledger(t, ws, d.state)[0]
	if err := os.Remove(filepath.Join(ws, "a")); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(ws, "a/repo/.git/HEAD"), "ref: refs/heads/main\n")
	write(t, filepath.Join(ws, "a/repo/main.go"), "package main\n")
	if _, err := c.Checkpoint(ctx, api.CheckpointRequest{Workspace: ws, Label: "two"}); err != nil {
		t.Fatal(err)
	}
	before := hashTree(t, ws)
	_, err := c.Restore(ctx, api.RestoreRequest{Workspace: ws, Target: one.ID})
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Code != "IN_THE_WAY" || ce.Status != 409 || !strings.HasSuffix(ce.Message, ": a") {
		t.Fatalf("API restore: %v, want 409 IN_THE_WAY naming a", err)
	}
	sameTree(t, "the refused restore", hashTree(t, ws), before)
	out, err := runCairn(t, "restore", ws, one.ID, "--socket", d.socket)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 5 || !strings.Contains(out, "no checkpoint can hold") {
		t.Errorf("cairn restore: %v, want exit 5 (refused) saying why\n%s", err, out)
	}
	sameTree(t, "the refused cairn restore", hashTree(t, ws), before)
	if _, err := os.Stat(filepath.Join(ws, "a/repo/.git/HEAD")); err != nil {
		t.Errorf("the nested repository: %v", err)
	}
}
