package watcher

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/fsnotify/fsnotify"
)

// benchTree builds dirs folders (a two-level fan-out) holding files files.
func benchTree(b *testing.B, dirs, files int) string {
	b.Helper()
	root := b.TempDir()
	for i := range dirs {
		d := filepath.Join(root, fmt.Sprintf("p%02d", i%50), fmt.Sprintf("d%04d", i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
		for j := range files / dirs {
			if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%03d", j)), nil, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	return root
}

// BenchmarkStart is the time to be ready on a 5k-folder, 100k-file tree;
// compare it with BenchmarkWalkAndAdd, the floor: walking the same tree and
// adding its watches, nothing else.
func BenchmarkStart(b *testing.B) {
	root := benchTree(b, 5000, 100000)
	b.ResetTimer()
	for range b.N {
		w, err := Start(context.Background(), Options{Root: root})
		if err != nil {
			b.Fatal(err)
		}
		if got := w.Status().Watches; got != 5051 {
			b.Fatalf("Watches = %d", got)
		}
		b.StopTimer()
		w.Close()
		b.StartTimer()
	}
}

func BenchmarkWalkAndAdd(b *testing.B) {
	root := benchTree(b, 5000, 100000)
	b.ResetTimer()
	for range b.N {
		fw, err := fsnotify.NewWatcher()
		if err != nil {
			b.Fatal(err)
		}
		err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return err
			}
			return fw.Add(p)
		})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		fw.Close()
		b.StartTimer()
	}
}
