package autodev_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/agent/autodev"
	"github.com/cairn-dev/cairn/restore"
)

// TestAutodevStoreRunAndUndo: restore.Run and restore.Undo over the
// repository (autodev.Store) restore as Repo.Restore does (park a dirty
// tree, reset, a pre-restore checkpoint that undoes it), and refuse in the
// layout's words and order: a dry run, a partial restore, a live run before
// an unknown target, an unknown target, a folder that is no repository.
func TestAutodevStoreRunAndUndo(t *testing.T) {
	ctx := context.Background()
	dir, r, es := restoreFixture(t)
	run := func(t restore.Target, dry bool, paths ...string) (restore.Result, error) {
		return restore.Run(ctx, autodev.NewStore(ctx, r), nil, restore.Op{Target: t, DryRun: dry, Paths: paths})
	}
	id := func(s string) restore.Target { tg, _ := restore.ParseTarget(s); return tg }

	head := userGit(t, dir, "rev-parse", "HEAD")
	if _, err := run(id("c1"), true); !errors.Is(err, autodev.ErrNoDryRun) {
		t.Errorf("dry run: %v", err)
	}
	if _, err := run(id("c1"), false, "a.txt"); !errors.Is(err, autodev.ErrNoPaths) {
		t.Errorf("partial restore: %v", err)
	}
	if _, err := restore.Undo(ctx, autodev.NewStore(ctx, r), nil, restore.Op{DryRun: true}); !errors.Is(err, autodev.ErrNoDryRun) {
		t.Errorf("dry undo: %v", err)
	}
	if _, err := restore.Undo(ctx, autodev.NewStore(ctx, r), nil, restore.Op{}); !errors.Is(err, restore.ErrNothingToUndo) {
		t.Errorf("undo with no restore yet: %v", err)
	}
	var re *autodev.RestoreError
	if _, err := run(id("c99"), false); !errors.As(err, &re) || !re.Unknown || err.Error() != "Restore failed: unknown checkpoint: c99" {
		t.Errorf("unknown: %v", err)
	}
	if _, err := run(id("last-success"), false); !errors.As(err, &re) || !re.Unknown || err.Error() != "Restore failed: unknown checkpoint: last-success" {
		t.Errorf("a target that is neither an id nor a commit: %v", err)
	}
	lock := filepath.Join(dir, ".hankweave", "runtime.lock")
	now := time.Now().UTC().Format(time.RFC3339Nano)
	write(t, lock, fmt.Sprintf(`{"pid":%d,"lockId":"x","runId":"r","startTime":%q,"lastHeartbeat":%q,"port":1}`, os.Getpid(), now, now))
	if _, err := run(id("c99"), false); !errors.As(err, &re) || !re.Live {
		t.Errorf("a live run, an unknown target: %v, want the live run refused first", err)
	}
	if err := os.Remove(lock); err != nil {
		t.Fatal(err)
	}
	if userGit(t, dir, "rev-parse", "HEAD") != head {
		t.Fatal("a refusal moved HEAD")
	}

	// A dirty tree, restored by the short commit: parked, then reset.
	write(t, filepath.Join(dir, "a.txt"), "work in progress\n")
	res, err := run(id(es[0].Commit[:7]), false)
	if err != nil {
		t.Fatal(err)
	}
	oc := res.Outcome
	if res.Target.ID != "c1" || oc.Target != es[0].Commit || !strings.HasPrefix(oc.SavedOn, autodev.ParkPrefix) ||
		oc.PreRestore == nil || oc.PreRestore.ID != "c3" || oc.PreRestore.Ref != oc.SavedOn || oc.From != oc.PreRestore.SHA {
		t.Fatalf("restore: %+v, outcome %+v", res.Target, oc)
	}
	if got, want := autodev.Message(res.Target, oc.SavedOn), fmt.Sprintf("Restored to %q (%s); saved on %s.", autodev.BaselineLabel, es[0].Commit[:7], oc.SavedOn); got != want {
		t.Errorf("message %q, want %q", got, want)
	}
	if read(t, filepath.Join(dir, "a.txt")) != "two\n" {
		t.Fatal("not restored")
	}

	// Undo: the newest pre-restore checkpoint, the parked work back.
	res, err = restore.Undo(ctx, autodev.NewStore(ctx, r), nil, restore.Op{})
	if err != nil || res.Target.ID != "c3" || res.Outcome.SavedOn != "" {
		t.Fatalf("undo: %+v %v", res, err)
	}
	if read(t, filepath.Join(dir, "a.txt")) != "work in progress\n" {
		t.Fatal("undo did not bring the work back")
	}

	// No repository: a restore says checkpoints are off, an undo has nothing to undo.
	if err := os.RemoveAll(filepath.Join(dir, ".git")); err != nil {
		t.Fatal(err)
	}
	if _, err := run(id("c1"), false); !errors.Is(err, autodev.ErrNotRepo) || err.Error() != "Restore failed: "+autodev.MsgNotRepo {
		t.Errorf("no repository: %v", err)
	}
	if _, err := restore.Undo(ctx, autodev.NewStore(ctx, r), nil, restore.Op{}); !errors.Is(err, restore.ErrNothingToUndo) {
		t.Errorf("undo with no repository: %v", err)
	}
}
