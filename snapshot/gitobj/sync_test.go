package gitobj

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
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

// TestWatchForeignSeesLooseObjectsOthersWrote: with WatchForeign, a Sync
// after another program stored a loose object (in a fan-out folder there
// already, or in a new one) is a syncfs; one after nothing changed is not,
// unless the folders changed too recently to vouch for it.
func TestWatchForeignSeesLooseObjectsOthersWrote(t *testing.T) {
	gitDir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(gitDir, "objects", "ab"), 0o755); err != nil {
		t.Fatal(err)
	}
	// An hour old: the write below changes its time whatever the clock's tick.
	old := time.Now().Add(-time.Hour)
	must(t, os.Chtimes(filepath.Join(gitDir, "objects", "ab"), old, old))
	d := NewDB(gitDir, SHA1)
	if d.foreignWrote() {
		t.Fatal("a DB that does not watch saw a foreign write")
	}
	d.WatchForeign()
	was := fanSettle
	fanSettle = 0
	defer func() { fanSettle = was }()
	steps := []struct {
		what string
		do   func()
		want bool
	}{
		{"first look", func() {}, true},
		{"nothing changed", func() {}, false},
		{"a loose object in a folder there", func() {
			must(t, os.WriteFile(filepath.Join(d.Dir, "ab", strings.Repeat("1", 38)), []byte("x"), 0o444))
		}, true},
		{"nothing changed again", func() {}, false},
		{"a loose object in a new folder", func() {
			must(t, os.MkdirAll(filepath.Join(d.Dir, "cd"), 0o755))
			must(t, os.WriteFile(filepath.Join(d.Dir, "cd", strings.Repeat("2", 38)), []byte("x"), 0o444))
		}, true},
		{"settled", func() {}, false},
		{"young folders (the tick could hide a write)", func() { fanSettle = time.Hour }, true},
	}
	for _, s := range steps {
		s.do()
		if got := d.foreignWrote(); got != s.want {
			t.Fatalf("%s: foreign write %v, want %v", s.what, got, s.want)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
