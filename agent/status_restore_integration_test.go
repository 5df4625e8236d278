//go:build linux

package agent_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/client"
)

// TestStatusLastCheckpointAfterRestore: the pre-restore checkpoint a restore
// (and an undo) seals is the workspace's newest, and its status says so at
// once, as it does after any other seal: the panel's workspace card and
// `cairn status` show it as the last checkpoint.
func TestStatusLastCheckpointAfterRestore(t *testing.T) {
	ws := t.TempDir()
	write(t, filepath.Join(ws, "a.txt"), "one\n")
	d := startDaemon(t, "", "--config", configFile(t, noAutosave), "--watch", ws)
	var base api.WorkspaceStatus
	waitFor(t, 30*time.Second, "a baseline", func() bool {
		var ok bool
		base, ok = d.workspace(ws)
		return ok && base.Last != "" && base.State == "watching"
	})
	ctx := context.Background()
	c := client.New(d.socket)
	defer c.Close()
	write(t, filepath.Join(ws, "a.txt"), "two\n")
	waitPending(t, d, ws)
	two, err := c.Checkpoint(ctx, api.CheckpointRequest{Workspace: ws, Label: "two"})
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := d.workspace(ws); st.Last != two.ID {
		t.Fatalf("after the checkpoint %s, status says last %q", two.ID, st.Last)
	}
	write(t, filepath.Join(ws, "a.txt"), "three, not sealed\n")
	waitPending(t, d, ws)

	check := func(what string, res api.RestoreResult) {
		t.Helper()
		p := res.PreRestore
		if p == nil || p.ID == "" {
			t.Fatalf("%s sealed no pre-restore checkpoint: %+v", what, res)
		}
		st, _ := d.workspace(ws)
		if st.Last != p.ID || st.LastState != string(p.State) || !st.LastTime.Equal(p.Time) {
			t.Errorf("after %s, status says last %s (%s, %v); want the pre-restore %s (%s, %v)",
				what, st.Last, st.LastState, st.LastTime, p.ID, p.State, p.Time)
		}
	}
	res, err := c.Restore(ctx, api.RestoreRequest{Workspace: ws, Target: base.Last})
	if err != nil {
		t.Fatal(err)
	}
	check("a restore to "+base.Last, res)
	fileIs(t, filepath.Join(ws, "a.txt"), "one\n")

	res, err = c.Undo(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	check("the undo", res)
	fileIs(t, filepath.Join(ws, "a.txt"), "three, not sealed\n")

	// A dry run seals nothing and leaves the status as it was.
	before, _ := d.workspace(ws)
	if _, err := c.Restore(ctx, api.RestoreRequest{Workspace: ws, Target: two.ID, DryRun: true}); err != nil {
		t.Fatal(err)
	}
	if st, _ := d.workspace(ws); st.Last != before.Last || !st.LastTime.Equal(before.LastTime) {
		t.Errorf("a dry run moved the last checkpoint: %s → %s", before.Last, st.Last)
	}
}

// waitPending waits until the daemon has seen a change in dir it has not
// sealed yet: a checkpoint or restore asked for earlier may be served before
// the watch delivers the change.
func waitPending(t *testing.T, d *daemon, dir string) {
	t.Helper()
	waitFor(t, 20*time.Second, "a pending change in "+dir, func() bool {
		st, _ := d.workspace(dir)
		return st.Pending > 0
	})
}
