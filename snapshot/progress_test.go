package snapshot

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// TestSealTellsProgress: a first seal of many files tells how far it has
// come, in order, ending at every file; an incremental one of a few files
// need not.
func TestSealTellsProgress(t *testing.T) {
	for _, engine := range []string{EngineGit, EngineInproc} {
		t.Run(engine, func(t *testing.T) {
			dir, st := newTestStore(t, Options{Engine: engine})
			n := 2*progressBatch + 17
			for i := range n {
				p := filepath.Join(dir, fmt.Sprintf("d%d", i%20), fmt.Sprintf("f%d", i))
				if i < 20 {
					if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
						t.Fatal(err)
					}
				}
				if err := os.WriteFile(p, []byte{byte(i)}, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var mu sync.Mutex
			var told []Progress
			mustSeal(t, st, SealRequest{Kind: ckpt.KindBaseline, Progress: func(p Progress) {
				mu.Lock()
				told = append(told, p)
				mu.Unlock()
			}})
			if len(told) < 2 {
				t.Fatalf("told %v: want several reports", told)
			}
			for i, p := range told {
				if p.Total != n || p.Done > n || i > 0 && p.Done < told[i-1].Done {
					t.Fatalf("report %d of %v: out of order or off the total %d", i, told, n)
				}
			}
			if last := told[len(told)-1]; last.Done != n {
				t.Errorf("last report %+v: want %d done", last, n)
			}
		})
	}
}
