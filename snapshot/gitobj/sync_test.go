package gitobj

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestSyncCoversEveryFileWritten: every file a seal's writers add under
// objects/ (loose objects, a large blob, a batch's pack and index, a pack
// writer's, a roll-up's) is one Sync fsyncs, with its folder; a file
// already stored is too (freshened: an earlier write may not have been
// flushed). A new DB's first Sync, and one after SyncAll, is a syncfs.
func TestSyncCoversEveryFileWritten(t *testing.T) {
	gitDir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(gitDir, "objects", "pack"), 0o755); err != nil {
		t.Fatal(err)
	}
	d := NewDB(gitDir, SHA1)
	if !d.overrun {
		t.Fatal("a new DB's first Sync is not a syncfs")
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	list := func() map[string]bool {
		got := map[string]bool{}
		filepath.WalkDir(d.Dir, func(p string, e fs.DirEntry, err error) error {
			if err == nil && !e.IsDir() {
				got[p] = true
			}
			return nil
		})
		return got
	}
	before := list()

	loose, err := d.Write("blob", []byte("loose\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.WriteBlobFrom(bytes.NewReader(bytes.Repeat([]byte("big "), 1<<19)), 2<<20); err != nil {
		t.Fatal(err)
	}
	for i := range 4 { // enough small packs for a roll-up of 4
		b := d.Batch()
		if _, err := b.Write("blob", []byte(strings.Repeat("b", i+1))); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	pw := d.NewPackWriter(DefaultMaxPack, 1)
	if _, err := pw.Write("blob", []byte("packed by the writer\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := pw.Close(); err != nil {
		t.Fatal(err)
	}
	if merged, _, err := d.RollUp(4); err != nil || merged == "" {
		t.Fatalf("roll-up: %q, %v", merged, err)
	}
	if d.overrun {
		t.Fatal("tracking overran")
	}
	tracked := slices.Clone(d.written)
	for p := range list() {
		if !before[p] && !slices.Contains(tracked, p) {
			t.Errorf("%s was written but Sync would not flush it", p)
		}
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	if len(d.written) != 0 {
		t.Fatalf("%d files still to flush after Sync", len(d.written))
	}
	// Stored already: freshened, and flushed again.
	if _, err := d.Write("blob", []byte("loose\n")); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(d.written, d.Path(loose)) {
		t.Fatal("an object found stored is not flushed with the seal that names it")
	}
	d.SyncAll()
	if !d.overrun || len(d.written) != 0 {
		t.Fatal("SyncAll does not make the next Sync a syncfs")
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
}
