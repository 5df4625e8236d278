package snapshot

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/restore/ckpt"
	"github.com/cairn-dev/cairn/snapshot/retain"
)

// TestDropAutosavesAndRun seals autosaves and two runs, plans with a policy
// that keeps the newest only, drops, and checks refs, ledger, fsck and a
// reopen.
func TestDropAutosavesAndRun(t *testing.T) {
	ctx := context.Background()
	dir, st := newTestStore(t, Options{})
	stateDir := filepath.Dir(filepath.Dir(st.home))
	at := time.Now().Add(-72 * time.Hour)
	seal := func(req SealRequest) ckpt.Record {
		writeFile(t, dir, "f.txt", req.Label+at.String(), 0o644)
		req.Time = at
		at = at.Add(time.Hour)
		return mustSeal(t, st, req)
	}
	base := seal(SealRequest{Kind: ckpt.KindBaseline})
	a1 := seal(SealRequest{Kind: ckpt.KindAutosave, Label: "a1"})
	r1 := seal(SealRequest{Kind: ckpt.KindRigSetup, RunID: "old", CodonID: "k"})
	r2 := seal(SealRequest{Kind: ckpt.KindCompleted, RunID: "old", CodonID: "k"})
	a2 := seal(SealRequest{Kind: ckpt.KindAutosave, Label: "a2"})
	pinned := seal(SealRequest{Kind: ckpt.KindAutosave, Label: "pinned"})
	n1 := seal(SealRequest{Kind: ckpt.KindRigSetup, RunID: "new", CodonID: "k"})
	n2 := seal(SealRequest{Kind: ckpt.KindCompleted, RunID: "new", CodonID: "k"})
	a3 := seal(SealRequest{Kind: ckpt.KindAutosave, Label: "a3"})

	if err := st.Pin(ctx, pinned.SHA); err != nil {
		t.Fatal(err)
	}
	if err := st.Pin(ctx, "deadbeef"); err == nil {
		t.Error("pinned a short sha")
	}
	pins, err := st.Pins()
	if err != nil || len(pins) != 1 || pins[0] != pinned.SHA {
		t.Fatalf("pins %v %v", pins, err)
	}

	keepNewest := retain.Policy{KeepLast: 1}
	ps := retain.Policies{Autosave: keepNewest, PreRestore: keepNewest, Checkpoints: keepNewest}
	prot := retain.Protected{SHAs: map[string]bool{st.Position(): true}, Runs: map[string]bool{}}
	for _, p := range pins {
		prot.SHAs[p] = true
	}
	drops := retain.Plan(st.Records(), ps, prot)
	var got []string
	for _, d := range drops {
		for _, r := range d.Records {
			got = append(got, r.ID)
		}
	}
	// base is the newest baseline; run "new" holds the newest rig-setup and
	// completed; a3 is the newest autosave and the position.
	want := []string{a1.ID, r1.ID, r2.ID, a2.ID}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("plan drops %v, want %v", got, want)
	}

	// A drop whose ref moved since the plan is skipped.
	stale := retain.Drop{Unit: retain.UnitSingle, Ref: a3.Ref, Records: []ckpt.Record{a3}, Rule: "test"}
	res, err := st.Drop(ctx, append(drops, stale), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Pruned) != 4 || len(res.Refs) != 3 || len(res.Skipped) != 1 || !strings.Contains(res.Skipped[0].Reason, "HEAD") {
		t.Fatalf("drop result %+v", res)
	}
	for _, ref := range []string{a1.Ref, a2.Ref, "refs/heads/run-old"} {
		if _, ok := st.refTip(ctx, ref); ok {
			t.Errorf("ref %s still there", ref)
		}
	}
	for _, ref := range []string{base.Ref, pinned.Ref, n2.Ref, a3.Ref} {
		if _, ok := st.refTip(ctx, ref); !ok {
			t.Errorf("ref %s gone", ref)
		}
	}
	plainGit(t, st.GitDir(), "fsck", "--no-dangling", "--strict")

	check := func(st *Store) {
		t.Helper()
		pruned := map[string]ckpt.Record{}
		for _, r := range st.Records() {
			if r.Pruned() {
				pruned[r.ID] = r
			}
		}
		if len(pruned) != 4 {
			t.Fatalf("pruned records %v", pruned)
		}
		for _, id := range want {
			r := pruned[id]
			if r.PrunedAt == nil || !strings.HasPrefix(r.PrunedBy, "retention.") || r.SHA == "" {
				t.Errorf("record %s: %+v", id, r)
			}
		}
		if len(st.Records()) != 9 {
			t.Errorf("ledger holds %d records, want 9", len(st.Records()))
		}
	}
	check(st)
	// Planning again drops nothing: pruned records are done.
	if again := retain.Plan(st.Records(), ps, prot); len(again) != 0 {
		t.Errorf("second plan %+v", again)
	}

	// A reopen (another process) folds the prune lines in again.
	st2 := openTestStore(t, dir, Options{StateDir: stateDir})
	check(st2)
	_ = n1
	// The ledger file: records intact, prune lines after them.
	b, err := os.ReadFile(st.LedgerPath())
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), `{"prune":"`); n != 4 {
		t.Errorf("ledger has %d prune lines:\n%s", n, b)
	}

	// A torn prune line is cut off at open, harmlessly: the record stays ok
	// until the next pass marks it again.
	f, _ := os.OpenFile(st.LedgerPath(), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"prune":"` + a3.ID + `","prunedAt":"2026-`)
	f.Close()
	st3 := openTestStore(t, dir, Options{StateDir: stateDir})
	check(st3)

	// A crash between deleting a ref and the append: the next drop of the
	// same plan finds the ref gone and only marks the record.
	plainGit(t, st.GitDir(), "update-ref", "-d", pinned.Ref)
	res, err = st3.Drop(ctx, []retain.Drop{{Unit: retain.UnitSingle, Ref: pinned.Ref, Records: []ckpt.Record{pinned}, Rule: "retention.autosave (keep_last=1)"}}, time.Now())
	if err != nil || len(res.Pruned) != 1 || len(res.Refs) != 0 {
		t.Fatalf("mark-only drop: %+v %v", res, err)
	}

	if had, err := st.Unpin(ctx, pinned.SHA); err != nil || !had {
		t.Errorf("unpin: %v %v", had, err)
	}
	if pins, _ := st.Pins(); len(pins) != 0 {
		t.Errorf("pins after unpin: %v", pins)
	}
}

// TestDropRefusesForeignTip: a run branch whose tip is a commit the plan does
// not name (the runtime's own) is not deleted.
func TestDropRefusesForeignTip(t *testing.T) {
	ctx := context.Background()
	dir, st := newTestStore(t, Options{})
	writeFile(t, dir, "f", "1", 0o644)
	r := mustSeal(t, st, SealRequest{Kind: ckpt.KindRigSetup, RunID: "x", CodonID: "k"})
	mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
	// Another writer moves the branch on by a commit cairn never recorded.
	tree := strings.TrimSpace(plainGit(t, st.GitDir(), "rev-parse", r.SHA+"^{tree}"))
	c := strings.TrimSpace(string(gitOut(t, st, strings.NewReader("foreign\n"), "commit-tree", tree, "-p", r.SHA)))
	plainGit(t, st.GitDir(), "update-ref", "refs/heads/run-x", c, r.SHA)
	res, err := st.Drop(ctx, []retain.Drop{{Unit: retain.UnitRun, Ref: "refs/heads/run-x", RunID: "x", Records: []ckpt.Record{r}, Rule: "t"}}, time.Now())
	if err != nil || len(res.Skipped) != 1 || len(res.Pruned) != 0 || !strings.Contains(res.Skipped[0].Reason, "does not name") {
		t.Fatalf("%+v %v", res, err)
	}
}
