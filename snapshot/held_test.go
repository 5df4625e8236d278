//go:build unix

package snapshot

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// heldRequest is a rig-setup of codon b in run r1, by the engine mode names.
func heldRequest(mode sealMode, changed []string) SealRequest {
	req := SealRequest{Kind: ckpt.KindRigSetup, CodonID: "b", CodonName: "B", RunID: "r1"}
	switch mode {
	case modeIncremental:
		req.Changed, req.engine = nonNil(changed), EngineGit
	case modeInproc:
		req.Changed = nonNil(changed)
	}
	return req
}

// TestHeldPublishAfterAutosave: a captured checkpoint holds the files as
// they were at the capture, with no record, no branch move and no new
// position; an autosave sealed meanwhile holds the later files; Publish
// records the captured tree and time on the run's branch after it, under a
// later id, and every checkpoint after it is still exactly what is on disk.
func TestHeldPublishAfterAutosave(t *testing.T) {
	for _, mode := range sealModes {
		t.Run(string(mode), func(t *testing.T) {
			ctx := context.Background()
			dir, st := newTestStore(t, Options{})
			writeFile(t, dir, "a.txt", "a\n", 0o644)
			first := mustSeal(t, st, SealRequest{Kind: ckpt.KindCompleted, CodonID: "a", RunID: "r1", Changed: nonNil([]string{"a.txt"})})
			n := len(st.Records())

			writeFile(t, dir, "b.txt", "b\n", 0o644)
			h, err := st.Capture(ctx, heldRequest(mode, []string{"b.txt"}))
			if err != nil {
				t.Fatalf("Capture: %v", err)
			}
			if got := len(st.Records()); got != n {
				t.Errorf("a capture added %d records", got-n)
			}
			if tip, _ := st.Resolve(ctx, "refs/heads/run-r1"); tip != first.SHA {
				t.Errorf("a capture moved the branch to %s", tip)
			}
			if pos := st.Position(); pos != first.SHA {
				t.Errorf("a capture moved the position to %s", pos)
			}
			if tip, _ := st.Resolve(ctx, h.Ref); tip != h.Record.SHA || !strings.HasPrefix(h.Ref, heldPrefix) {
				t.Errorf("held ref %s at %s, want %s", h.Ref, tip, h.Record.SHA)
			}
			assertTreeMatchesDisk(t, st, h.Record.SHA, []string{"a.txt", "b.txt"})

			time.Sleep(5 * time.Millisecond) // the autosave's time follows the capture's
			writeFile(t, dir, "c.txt", "c\n", 0o644)
			auto := mustSeal(t, st, SealRequest{Kind: ckpt.KindAutosave, Changed: nonNil([]string{"c.txt"})})
			assertTreeMatchesDisk(t, st, auto.SHA, []string{"a.txt", "b.txt", "c.txt"})

			rec, err := st.Publish(ctx, h)
			if err != nil {
				t.Fatalf("Publish: %v", err)
			}
			if idNum(rec.ID) <= idNum(auto.ID) {
				t.Errorf("published as %s, not after the autosave %s", rec.ID, auto.ID)
			}
			if rec.Kind != ckpt.KindRigSetup || rec.Ref != "refs/heads/run-r1" || rec.Parent != first.SHA || rec.Adopted {
				t.Errorf("published record %+v", rec)
			}
			if !rec.Time.Equal(h.Record.Time) || !rec.Time.Before(auto.Time) {
				t.Errorf("published time %v, want the capture's %v (before the autosave's %v)", rec.Time, h.Record.Time, auto.Time)
			}
			assertTreeMatchesDisk(t, st, rec.SHA, []string{"a.txt", "b.txt"}) // c.txt is unchanged since: compared on disk
			if treeOf(t, st, rec.SHA) != treeOf(t, st, h.Record.SHA) {
				t.Errorf("published tree is not the captured one")
			}
			requireCounts(t, rec, 1, 0, 0)
			if tip, _ := st.Resolve(ctx, "refs/heads/run-r1"); tip != rec.SHA {
				t.Errorf("branch at %s, want the published %s", tip, rec.SHA)
			}
			if _, ok := st.Resolve(ctx, h.Ref); ok {
				t.Errorf("held ref %s left after publishing", h.Ref)
			}
			if pos := st.Position(); pos != auto.SHA {
				t.Errorf("publishing moved the position from the autosave to %s", pos)
			}
			if got := st.Records(); got[len(got)-1].ID != rec.ID {
				t.Errorf("ledger ends with %s, want %s", got[len(got)-1].ID, rec.ID)
			}

			writeFile(t, dir, "d.txt", "d\n", 0o644)
			done := mustSeal(t, st, SealRequest{Kind: ckpt.KindCompleted, CodonID: "b", RunID: "r1", Changed: nonNil([]string{"d.txt"})})
			if done.Parent != rec.SHA {
				t.Errorf("next checkpoint on %s, want the published %s", done.Parent, rec.SHA)
			}
			assertTreeMatchesDisk(t, st, done.SHA, []string{"a.txt", "b.txt", "c.txt", "d.txt"})
			if notes := st.TakeNotes(); len(notes) > 0 {
				t.Errorf("a capture left the store doubting its index: %q", notes)
			}
		})
	}
}

// TestHeldPublishAsCaptured: with nothing recorded since, the captured
// commit itself is published, and becomes the position.
func TestHeldPublishAsCaptured(t *testing.T) {
	ctx := context.Background()
	dir, st := newTestStore(t, Options{})
	writeFile(t, dir, "b.txt", "b\n", 0o644)
	h, err := st.Capture(ctx, heldRequest(modeInproc, []string{"b.txt"}))
	if err != nil {
		t.Fatalf("Capture: %v", err)
	}
	writeFile(t, dir, "late.txt", "late\n", 0o644)
	rec, err := st.Publish(ctx, h)
	if err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if rec.SHA != h.Record.SHA || rec.ID != h.Record.ID || rec.Ref != "refs/heads/run-r1" {
		t.Errorf("published %s %s on %s, want the captured %s %s", rec.ID, rec.SHA, rec.Ref, h.Record.ID, h.Record.SHA)
	}
	assertTreeMatchesDisk(t, st, rec.SHA, []string{"b.txt"})
	if pos := st.Position(); pos != rec.SHA {
		t.Errorf("position %s, want the published %s", pos, rec.SHA)
	}
	next := mustSeal(t, st, SealRequest{Kind: ckpt.KindCompleted, CodonID: "b", RunID: "r1", Changed: nonNil([]string{"late.txt"})})
	if st.lastEngine != EngineInproc {
		t.Errorf("the seal after a publish as captured was sealed by %s, want the in-process engine", st.lastEngine)
	}
	assertTreeMatchesDisk(t, st, next.SHA, []string{"b.txt", "late.txt"})
}

// TestHeldDiscard: a discarded capture leaves no ref, record or branch
// move; the next checkpoint is still exactly what is on disk. A capture
// left by an earlier process is neither recovered into the ledger by an
// open nor kept by DiscardHeld.
func TestHeldDiscard(t *testing.T) {
	ctx := context.Background()
	dir, st := newTestStore(t, Options{})
	writeFile(t, dir, "a.txt", "a\n", 0o644)
	first := mustSeal(t, st, SealRequest{Kind: ckpt.KindCompleted, CodonID: "a", RunID: "r1", Changed: nonNil([]string{"a.txt"})})
	writeFile(t, dir, "b.txt", "b\n", 0o644)
	h, err := st.Capture(ctx, heldRequest(modeInproc, []string{"b.txt"}))
	if err != nil {
		t.Fatalf("Capture: %v", err)
	}
	if err := st.Discard(ctx, h); err != nil {
		t.Fatalf("Discard: %v", err)
	}
	if _, ok := st.Resolve(ctx, h.Ref); ok {
		t.Errorf("held ref %s left after discarding", h.Ref)
	}
	if tip, _ := st.Resolve(ctx, "refs/heads/run-r1"); tip != first.SHA {
		t.Errorf("branch at %s after a discard, want %s", tip, first.SHA)
	}
	writeFile(t, dir, "a.txt", "a2\n", 0o644)
	next := mustSeal(t, st, SealRequest{Kind: ckpt.KindCompleted, CodonID: "b", RunID: "r1", Changed: nonNil([]string{"a.txt"})})
	if next.Parent != first.SHA || next.ID == h.Record.ID {
		t.Errorf("after a discard: %s on %s, want a new id on %s", next.ID, next.Parent, first.SHA)
	}
	assertTreeMatchesDisk(t, st, next.SHA, []string{"a.txt", "b.txt"})
	if notes := st.TakeNotes(); len(notes) > 0 {
		t.Errorf("a discarded capture left the store doubting its index: %q", notes)
	}

	// A capture a process ended with: no open recovers it; DiscardHeld drops it.
	left, err := st.Capture(ctx, heldRequest(modeInproc, []string{}))
	if err != nil {
		t.Fatalf("Capture: %v", err)
	}
	n := len(st.Records())
	st.Close()
	st = openTestStore(t, dir, Options{StateDir: st.opts.StateDir})
	if got := len(st.Records()); got != n {
		t.Errorf("reopening recovered %d records from a held ref: %+v", got-n, st.Records()[n:])
	}
	gone, err := st.DiscardHeld(ctx)
	if err != nil || len(gone) != 1 || gone[0] != left.Ref {
		t.Errorf("DiscardHeld = %q, %v; want [%s]", gone, err, left.Ref)
	}
	if _, ok := st.Resolve(ctx, left.Ref); ok {
		t.Errorf("held ref %s left after DiscardHeld", left.Ref)
	}
}

// TestRepublishedCaptureDoesNotVouchForTheIndex: a capture published after
// a later seal is committed again as the newest record, yet cairn's index
// stands for the later seal, whose in-process entries wait in the stat
// cache. A new store (as `cairn checkpoint` with no daemon) whose stat cache
// was cut must doubt the index (the ledger says the record was republished)
// and reconcile in full, not stage the told paths over an index that lacks
// the later seal's files.
func TestRepublishedCaptureDoesNotVouchForTheIndex(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	opts := Options{StateDir: t.TempDir()}
	st := openTestStore(t, dir, opts)
	writeFile(t, dir, "a.txt", "a\n", 0o644)
	mustSeal(t, st, SealRequest{Kind: ckpt.KindBaseline})

	writeFile(t, dir, "b.txt", "b\n", 0o644)
	h, err := st.Capture(ctx, heldRequest(modeIncremental, []string{"b.txt"})) // git's
	if err != nil {
		t.Fatalf("Capture: %v", err)
	}
	writeFile(t, dir, "c.txt", "c\n", 0o644)
	later := mustSeal(t, st, SealRequest{Kind: ckpt.KindAutosave, Changed: []string{"c.txt"}})
	if st.lastEngine != EngineInproc {
		t.Fatalf("the seal after the capture was %s's, want the in-process engine's", st.lastEngine)
	}
	rec, err := st.Publish(ctx, h)
	if err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if idNum(rec.ID) <= idNum(later.ID) || !rec.Republished {
		t.Fatalf("published as %s (republished %v), want a republished record after %s", rec.ID, rec.Republished, later.ID)
	}
	st.Close()

	p := st.statCachePath()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
	st2 := openTestStore(t, dir, opts)
	if got := st2.Records(); !got[len(got)-1].Republished {
		t.Fatalf("the ledger lost that %s was republished", got[len(got)-1].ID)
	}
	next := mustSeal(t, st2, SealRequest{Kind: ckpt.KindManual, Changed: []string{}})
	assertTreeMatchesDisk(t, st2, next.SHA, []string{"a.txt", "b.txt", "c.txt"})
}
