package snapshot

import (
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/restore/ckpt"
	"github.com/cairn-dev/cairn/snapshot/retain"
)

// reachableBytes is what the store's refs reach on disk, as git counts it.
func reachableBytes(t *testing.T, st *Store) int64 {
	t.Helper()
	out := strings.TrimSpace(string(gitOut(t, st, nil, "rev-list", "--objects", "--disk-usage", "--all")))
	n, err := strconv.ParseInt(out, 10, 64)
	if err != nil {
		t.Fatalf("disk usage %q: %v", out, err)
	}
	return n
}

// TestDroppedAutosavesFreeTheirBytes: five autosaves, each holding 256 KiB
// nothing else holds; dropping the four oldest must leave only the newest
// one's bytes reachable. When a checkpoint outside runs had the position as
// its git parent, the kept autosave reached every older one and the drop
// freed nothing.
func TestDroppedAutosavesFreeTheirBytes(t *testing.T) {
	ctx := context.Background()
	dir, st := newTestStore(t, Options{})
	const size = 256 << 10
	var recs []ckpt.Record
	for i := range 5 {
		b := make([]byte, size)
		rand.Read(b)
		if err := os.WriteFile(filepath.Join(dir, "big.bin"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, mustSeal(t, st, SealRequest{Kind: ckpt.KindAutosave, Label: "a" + strconv.Itoa(i)}))
	}
	before := reachableBytes(t, st)
	if before < 5*size {
		t.Fatalf("five autosaves reach %d bytes, want at least %d", before, 5*size)
	}
	var drops []retain.Drop
	for _, r := range recs[:4] {
		drops = append(drops, retain.Drop{Unit: retain.UnitSingle, Ref: r.Ref, Records: []ckpt.Record{r}, Rule: "test"})
	}
	if res, err := st.Drop(ctx, drops, time.Now()); err != nil || len(res.Pruned) != 4 {
		t.Fatalf("drop: %+v %v", res, err)
	}
	after := reachableBytes(t, st)
	if after > 2*size {
		t.Errorf("after dropping 4 of 5 autosaves the store still reaches %d bytes (%d before); the newest autosave keeps the older ones", after, before)
	}
	plainGit(t, st.GitDir(), "fsck", "--no-dangling", "--strict")
	// The ledger still chains them, and the diff counts are against that parent.
	last := st.Records()[len(st.Records())-1]
	if last.Parent != recs[3].SHA || last.Changed != 1 {
		t.Errorf("newest autosave: parent %s changed %d, want %s and 1", last.Parent, last.Changed, recs[3].SHA)
	}
}

// TestLedgerRecoveryReadsTheParentTrailer: a lost ledger rebuilt from the
// commits keeps each root commit's logical parent, and Describe reads it too.
func TestLedgerRecoveryReadsTheParentTrailer(t *testing.T) {
	ctx := context.Background()
	dir, st := newTestStore(t, Options{})
	stateDir := filepath.Dir(filepath.Dir(st.home))
	writeFile(t, dir, "f.txt", "1", 0o644)
	a1 := mustSeal(t, st, SealRequest{Kind: ckpt.KindAutosave})
	writeFile(t, dir, "f.txt", "2", 0o644)
	writeFile(t, dir, "g.txt", "new", 0o644)
	a2 := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, Label: "two"})
	if a2.Parent != a1.SHA {
		t.Fatalf("parent %s, want %s", a2.Parent, a1.SHA)
	}
	if ps := strings.TrimSpace(string(gitOut(t, st, nil, "show", "-s", "--format=%P", a2.SHA))); ps != "" {
		t.Fatalf("checkpoint on its own ref has git parents %q", ps)
	}
	if err := os.Remove(st.LedgerPath()); err != nil {
		t.Fatal(err)
	}
	st2 := openTestStore(t, dir, Options{StateDir: stateDir})
	byID := map[string]ckpt.Record{}
	for _, r := range st2.Records() {
		byID[r.ID] = r
	}
	if r := byID[a2.ID]; r.SHA != a2.SHA || r.Parent != a1.SHA || !r.Recovered {
		t.Errorf("recovered %+v, want sha %s parent %s", r, a2.SHA, a1.SHA)
	}
	d, err := st2.Describe(ctx, ckpt.Record{SHA: a2.SHA})
	if err != nil || d.Parent != a1.SHA || d.Added != 1 || d.Changed != 1 {
		t.Errorf("describe %+v %v: want parent %s, 1 added, 1 changed", d, err, a1.SHA)
	}
}

// TestAbandonedFollowsLedgerParents: a restore from an autosave taken after
// a run back to the run's first checkpoint leaves behind the rest of the run
// and every autosave after it, though the autosaves are root commits.
func TestAbandonedFollowsLedgerParents(t *testing.T) {
	ctx := context.Background()
	dir, st := newTestStore(t, Options{})
	n := 0
	seal := func(req SealRequest) ckpt.Record {
		n++
		writeFile(t, dir, "f.txt", strconv.Itoa(n), 0o644)
		return mustSeal(t, st, req)
	}
	r1 := seal(SealRequest{Kind: ckpt.KindRigSetup, RunID: "r", CodonID: "k"})
	r2 := seal(SealRequest{Kind: ckpt.KindCompleted, RunID: "r", CodonID: "k"})
	a1 := seal(SealRequest{Kind: ckpt.KindAutosave})
	a2 := seal(SealRequest{Kind: ckpt.KindAutosave})
	if a1.Parent != r2.SHA || a2.Parent != a1.SHA {
		t.Fatalf("ledger parents: a1 %s (want %s), a2 %s (want %s)", a1.Parent, r2.SHA, a2.Parent, a1.SHA)
	}
	got, err := st.Abandoned(ctx, r1.SHA, a2.SHA)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{r2.SHA, a1.SHA, a2.SHA}
	slices.Sort(want)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("abandoned %v, want %v", got, want)
	}
	// Back to the first autosave: only the second is left behind.
	if got, _ := st.Abandoned(ctx, a1.SHA, a2.SHA); len(got) != 1 || got[0] != a2.SHA {
		t.Errorf("abandoned %v, want [%s]", got, a2.SHA)
	}
	// Forward (target descends from position): nothing.
	if got, _ := st.Abandoned(ctx, a2.SHA, r1.SHA); len(got) != 0 {
		t.Errorf("abandoned %v going forward, want none", got)
	}
}
