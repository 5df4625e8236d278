package workspace

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/agent/config"

	"github.com/cairn-dev/cairn/restore/ckpt"
	"github.com/cairn-dev/cairn/snapshot"
)

// budgetStore seals a baseline, then autosaves, a pre-restore and a run, each
// with 64 KiB of incompressible data of its own (one file, rewritten), an hour apart.
func budgetStore(t *testing.T) (*snapshot.Store, map[string]ckpt.Record) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := snapshot.Open(ctx, dir, snapshot.Options{Layout: snapshot.LayoutPlain, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	at := time.Now().Add(-48 * time.Hour)
	recs := map[string]ckpt.Record{}
	seal := func(name string, req snapshot.SealRequest) {
		b := make([]byte, 64<<10)
		rand.Read(b)
		if err := os.WriteFile(filepath.Join(dir, "data.bin"), []byte(hex.EncodeToString(b)), 0o644); err != nil {
			t.Fatal(err)
		}
		req.Time, at = at, at.Add(time.Hour)
		rec, err := st.Seal(ctx, req)
		if err != nil || rec.State != ckpt.StateOK {
			t.Fatalf("seal %s: %v %+v", name, err, rec)
		}
		recs[name] = rec
	}
	seal("base", snapshot.SealRequest{Kind: ckpt.KindBaseline})
	seal("a1", snapshot.SealRequest{Kind: ckpt.KindAutosave})
	seal("r1", snapshot.SealRequest{Kind: ckpt.KindCompleted, RunID: "old", CodonID: "k"})
	seal("p1", snapshot.SealRequest{Kind: ckpt.KindPreRestore})
	seal("a2", snapshot.SealRequest{Kind: ckpt.KindAutosave})
	seal("p2", snapshot.SealRequest{Kind: ckpt.KindPreRestore})
	seal("r2", snapshot.SealRequest{Kind: ckpt.KindCompleted, RunID: "new", CodonID: "k"})
	seal("a3", snapshot.SealRequest{Kind: ckpt.KindAutosave})
	return st, recs
}

// TestBudgetOrderAndProtected: a budget a little under the store drops the
// oldest autosave only; a lower one goes on in the fixed order (autosaves,
// pre-restore, whole runs) and never drops the protected (newest of each
// kind, the current run, the baseline); a budget under what is protected
// drops every candidate, says so, and keeps the rest. Maintenance then
// brings the store to its projection.
func TestBudgetOrderAndProtected(t *testing.T) {
	ctx := context.Background()
	st, recs := budgetStore(t)
	stats, err := st.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	full, err := st.ProjectedBytes(ctx, stats, nil)
	if err != nil {
		t.Fatal(err)
	}
	ids := func(max int64) ([]string, BudgetPlan) {
		p, err := PlanBudget(ctx, st, max, nil)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, d := range p.Drops {
			for _, r := range d.Records {
				out = append(out, r.ID)
			}
		}
		return out, p
	}
	if got, p := ids(full + 1); len(got) != 0 || p.ProtectedOver != "" {
		t.Fatalf("under budget dropped %v", got)
	}
	if got, _ := ids(full - 10<<10); strings.Join(got, ",") != recs["a1"].ID {
		t.Fatalf("a little over: dropped %v, want the oldest autosave %s", got, recs["a1"].ID)
	}
	want := []string{recs["a1"].ID, recs["a2"].ID, recs["p1"].ID, recs["r1"].ID}
	got, p := ids(1)
	if strings.Join(got, ",") != strings.Join(want, ",") || p.ProtectedOver == "" {
		t.Fatalf("tiny budget: dropped %v (want %v), protectedOver %q", got, want, p.ProtectedOver)
	}
	// The real thing, then maintenance: the store meets the projection.
	res, err := Prune(ctx, st, PruneOptions{BudgetOnly: true, MaxStoreSize: 1, PruneGrace: snapshot.PruneNow}, time.Now(), true)
	if err != nil {
		t.Fatal(err)
	}
	if res.ProtectedOver == "" || len(res.Drops) != 4 || res.BytesAfter > res.Projected*11/10 {
		t.Fatalf("prune: %+v", res)
	}
	now := map[string]ckpt.Record{}
	for _, r := range st.Records() {
		now[r.ID] = r
	}
	for _, name := range []string{"base", "p2", "r2", "a3"} {
		if r := now[recs[name].ID]; r.Pruned() {
			t.Fatalf("%s (protected) pruned: %+v", name, r)
		}
	}
	if !now[recs["a1"].ID].Pruned() || !now[recs["r1"].ID].Pruned() {
		t.Fatal("budget drops not marked pruned")
	}
}

// TestDiskFloor: under the floor autosaves pause with a reason; the default
// floor is the smaller of 5 % and 1 GiB; config keys round-trip to workers.
func TestDiskFloor(t *testing.T) {
	defer func(f func(string) (uint64, uint64, error)) { freeSpace = f }(freeSpace)
	freeSpace = func(string) (uint64, uint64, error) { return 400 << 20, 100 << 30, nil }
	if why := diskFull(t.TempDir(), config.DiskFloor{}); !strings.HasPrefix(why, "disk almost full: 400.0 MiB free, floor 1.0 GiB") {
		t.Fatalf("default floor on 100 GiB: %q", why)
	}
	freeSpace = func(string) (uint64, uint64, error) { return 600 << 20, 10 << 30, nil }
	if why := diskFull(t.TempDir(), config.DiskFloor{}); why != "" { // 5 % of 10 GiB = 512 MiB
		t.Fatalf("600 MiB free of 10 GiB paused: %q", why)
	}
	if why := diskFull(t.TempDir(), config.DiskFloor{Percent: 10}); why == "" {
		t.Fatal("10% floor not applied")
	}
	c, err := config.Parse("c.toml", "max_total_size = \"2GiB\"\ndisk_floor = \"2%\"\n[defaults]\nmax_store_size = \"500MiB\"\n[[watch]]\npath = \"/srv/*\"\nmax_store_size = \"1GiB\"\n")
	if err != nil {
		t.Fatal(err)
	}
	s := c.Watch[0].Settings.Merge(c.Defaults)
	if s.MaxStoreSize != 1<<30 || s.MaxTotalSize != 2<<30 || s.DiskFloor.Percent != 2 {
		t.Fatalf("settings %+v", s)
	}
	raw, _ := json.Marshal(s)
	var back config.Settings
	if err := json.Unmarshal(raw, &back); err != nil || back.MaxStoreSize != s.MaxStoreSize || back.DiskFloor != s.DiskFloor || back.MaxTotalSize != s.MaxTotalSize {
		t.Fatalf("round trip %s: %+v %v", raw, back, err)
	}
	if _, err := config.Parse("c.toml", "disk_floor = \"lots\"\n"); err == nil {
		t.Fatal("bad disk_floor accepted")
	}
	// "off" never pauses, and survives the trip to a worker.
	off, err := config.Parse("c.toml", "disk_floor = \"off\"\n")
	if err != nil || !off.Defaults.Merge(config.DefaultSettings()).DiskFloor.Off {
		t.Fatalf("disk_floor off: %+v %v", off, err)
	}
	if why := diskFull(t.TempDir(), config.DiskFloor{Off: true}); why != "" {
		t.Fatalf("floor off paused: %q", why)
	}
	raw, _ = json.Marshal(config.Settings{DiskFloor: config.DiskFloor{Off: true}})
	if err := json.Unmarshal(raw, &back); err != nil || !back.DiskFloor.Off {
		t.Fatalf("off through JSON %s: %+v %v", raw, back, err)
	}
}
