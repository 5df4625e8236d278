package snapshot

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// TestReadersDoNotWaitForTheLock: what a listing or a show reads (the
// ledger, the position, the pins, a diff of two checkpoints) answers while a long locked operation (a maintenance
// step: prune, expire) holds the store's lock, and what it answers is the
// store as the last locked operation left it.
func TestReadersDoNotWaitForTheLock(t *testing.T) {
	dir, st := newTestStore(t, Options{})
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	first := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
	if err := st.Pin(context.Background(), first.SHA); err != nil {
		t.Fatal(err)
	}

	held, release := make(chan struct{}), make(chan struct{})
	locked := make(chan error, 1)
	go func() {
		locked <- st.withLock(context.Background(), func() error {
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	defer func() {
		close(release)
		if err := <-locked; err != nil {
			t.Error(err)
		}
	}()

	type answer struct {
		recs  []ckpt.Record
		pos   string
		pins  []string
		files []ckpt.FileChange
		err   error
	}
	got := make(chan answer, 1)
	go func() {
		pins, _ := st.Pins()
		d, err := st.DiffWith(context.Background(), "", first.SHA, DiffOptions{Files: true})
		got <- answer{st.Records(), st.Position(), pins, d.Files, err}
	}()
	select {
	case a := <-got:
		if len(a.recs) != 1 || a.recs[0].SHA != first.SHA {
			t.Errorf("Records() = %+v, want the one checkpoint %s", a.recs, first.SHA)
		}
		if a.pos != first.SHA {
			t.Errorf("Position() = %q, want %s", a.pos, first.SHA)
		}
		if len(a.pins) != 1 || a.pins[0] != first.SHA {
			t.Errorf("Pins() = %v, want [%s]", a.pins, first.SHA)
		}
		if a.err != nil || len(a.files) != 1 || a.files[0].Path != "a.txt" {
			t.Errorf("DiffWith(empty, first) = %+v, %v; want a.txt added", a.files, a.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Records, Position, Pins or DiffWith waited for the store's lock")
	}
}
