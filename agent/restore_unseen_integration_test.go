//go:build linux

package agent_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/client"
)

// TestRestoreRightAfterWritesLosesNothing: files rewritten an instant before
// a restore, before the watch has reported them, are in the pre-restore
// checkpoint, so the undo brings every one back. The pre-restore checkpoint
// once staged only what the watch had reported: the restore then overwrote
// the unreported writes with no checkpoint holding them. A plain folder has
// its barrier too (a mark in the state folder), so its pre-restore
// checkpoints seal the dirty set, not the whole tree.
func TestRestoreRightAfterWritesLosesNothing(t *testing.T) {
	ws := t.TempDir()
	const n = 200
	name := func(i int) string { return filepath.Join(ws, "d"+fmt.Sprint(i%20), fmt.Sprintf("f%04d.txt", i)) }
	for i := range n {
		if err := os.MkdirAll(filepath.Dir(name(i)), 0o755); err != nil {
			t.Fatal(err)
		}
		write(t, name(i), "old\n")
	}
	d := startDaemon(t, "", "--config", configFile(t, noAutosave), "--watch", ws)
	var base api.WorkspaceStatus
	waitFor(t, 60*time.Second, "a baseline", func() bool {
		var ok bool
		base, ok = d.workspace(ws)
		return ok && base.Last != "" && base.State == "watching"
	})
	ctx := context.Background()
	c := client.New(d.socket)
	defer c.Close()

	// A checkpoint first: the next pre-restore stages only what the watch
	// reports (nothing sealed since the daemon started: it reconciles).
	if _, err := c.Checkpoint(ctx, api.CheckpointRequest{Workspace: ws}); err != nil {
		t.Fatal(err)
	}
	// Rewrite every file and ask for the restore at once: the watch cannot
	// have reported 200 writes yet.
	for i := range n {
		write(t, name(i), "new, never sealed\n")
	}
	if _, err := c.Restore(ctx, api.RestoreRequest{Workspace: ws, Target: base.Last}); err != nil {
		t.Fatal(err)
	}
	fileIs(t, name(0), "old\n")
	if _, err := c.Undo(ctx, ws); err != nil {
		t.Fatal(err)
	}
	lost := 0
	for i := range n {
		if b, err := os.ReadFile(name(i)); err != nil || string(b) != "new, never sealed\n" {
			lost++
		}
	}
	if lost > 0 {
		t.Fatalf("after the undo %d of %d files written just before the restore are not as they were", lost, n)
	}

	// One file written and the restore asked for within microseconds, many
	// times: the window between the write and the watch reporting it.
	for round := range 30 {
		if _, err := c.Checkpoint(ctx, api.CheckpointRequest{Workspace: ws}); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("round %d, never sealed\n", round)
		write(t, name(7), want)
		if _, err := c.Restore(ctx, api.RestoreRequest{Workspace: ws, Target: base.Last}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Undo(ctx, ws); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(name(7)); string(b) != want {
			t.Fatalf("round %d: after the undo the file written just before the restore reads %q, want %q", round, b, want)
		}
	}
	// 31 restores, each followed by an undo: a restore right after another
	// seals its pre-restore checkpoint from the dirty set too (the store
	// adds what the restore before it left). They all reconciled the whole
	// tree before, the undos always.
	if told := strings.Count(d.log.String(), "the pre-restore checkpoint seals what the watch saw change"); told <= 31 {
		t.Errorf("%d of 62 restores and undos sealed their pre-restore checkpoint from the watch's dirty set; want more than the 31 restores", told)
	}
}

// TestRestoreRightAfterWritesWatched: in an execution directory (whose
// .hankweave folder holds the watch's barrier) served by its owner's worker,
// a restore's pre-restore checkpoint seals what the watch saw change, once
// the barrier has taken in every change made before the restore was asked
// for, instead of reconciling the whole tree. Files rewritten an instant
// before the restore are in it all the same: the undo brings every one back.
func TestRestoreRightAfterWritesWatched(t *testing.T) {
	alice := newUser(t)
	base := openBase(t)
	ws := filepath.Join(base, "exec")
	const n = 200
	rel := func(i int) string { return filepath.Join("d"+fmt.Sprint(i%20), fmt.Sprintf("f%04d.txt", i)) }
	files := map[string]string{".hankweave/.keep": ""}
	for i := range n {
		files[rel(i)] = "old\n"
	}
	ownedDir(t, alice, ws, files)
	name := func(i int) string { return filepath.Join(ws, rel(i)) }
	d := startDaemon(t, filepath.Join(base, "state"), "--config", configFile(t, noAutosave), "--watch", ws)
	var first api.WorkspaceStatus
	waitFor(t, 60*time.Second, "a baseline", func() bool {
		var ok bool
		first, ok = d.workspace(ws)
		return ok && first.Last != "" && first.State == "watching"
	})
	ctx := context.Background()
	c := client.New(d.socket)
	defer c.Close()
	for round := range 20 {
		// A checkpoint first: a restore makes the next seal reconcile
		// everything, and the next restore's pre-restore with it.
		if _, err := c.Checkpoint(ctx, api.CheckpointRequest{Workspace: ws}); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("round %d, never sealed\n", round)
		for i := range n { // in place: the files stay alice's
			if err := os.WriteFile(name(i), []byte(want), 0); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.Restore(ctx, api.RestoreRequest{Workspace: ws, Target: first.Last}); err != nil {
			t.Fatal(err)
		}
		fileIs(t, name(0), "old\n")
		if _, err := c.Undo(ctx, ws); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if b, err := os.ReadFile(name(i)); err != nil || string(b) != want {
				t.Fatalf("round %d: after the undo %s reads %q (%v), want %q", round, rel(i), b, err, want)
			}
		}
	}
	if !strings.Contains(d.log.String(), "the pre-restore checkpoint seals what the watch saw change") {
		t.Errorf("no restore sealed its pre-restore checkpoint from the watch's dirty set")
	}
}
