package snapshot

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

func sealN(t *testing.T, st *Store, ws string, n int) []ckpt.Record {
	t.Helper()
	var recs []ckpt.Record
	for i := 0; i < n; i++ {
		putFile(t, filepath.Join(ws, "f.txt"), strings.Repeat("x", i+1))
		rec, err := st.Seal(context.Background(), SealRequest{Kind: ckpt.KindManual, Label: "step"})
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	return recs
}

func TestLedgerRebuiltFromGit(t *testing.T) {
	ctx := context.Background()
	ws, state := t.TempDir(), t.TempDir()
	st, err := Open(ctx, ws, Options{StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	want := sealN(t, st, ws, 3)
	if err := os.Remove(st.LedgerPath()); err != nil {
		t.Fatal(err)
	}
	st2, err := Open(ctx, ws, Options{StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	got := st2.Records()
	if len(got) != len(want) {
		t.Fatalf("rebuilt %d records, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.ID != w.ID || g.SHA != w.SHA || g.Kind != w.Kind || g.Label != w.Label || g.Parent != w.Parent || !g.Recovered {
			t.Errorf("record %d: got %+v, want %+v", i, g, w)
		}
	}
	rec, err := st2.Seal(ctx, SealRequest{Kind: ckpt.KindManual})
	if err != nil || rec.ID != "c4" {
		t.Fatalf("after rebuild: %+v, %v", rec, err)
	}
}

func TestLedgerTornLineDropped(t *testing.T) {
	ctx := context.Background()
	ws, state := t.TempDir(), t.TempDir()
	st, err := Open(ctx, ws, Options{StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	sealN(t, st, ws, 2)
	b, _ := os.ReadFile(st.LedgerPath())
	// Tear the last record in half, as a crash during the append would.
	if err := os.WriteFile(st.LedgerPath(), b[:len(b)-20], 0o644); err != nil {
		t.Fatal(err)
	}
	st2, err := Open(ctx, ws, Options{StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	recs := st2.Records()
	if len(recs) != 2 || recs[1].ID != "c2" || !recs[1].Recovered {
		t.Fatalf("records after torn line: %+v", recs)
	}
	b, _ = os.ReadFile(st2.LedgerPath())
	if lines := strings.Count(string(b), "\n"); lines != 2 || !strings.HasSuffix(string(b), "\n") {
		t.Errorf("ledger has %d lines: %q", lines, b)
	}
}
