//go:build unix

package gitobj

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestSyncDoesNotWaitOnAFIFO: a FIFO put where a file Sync must flush was
// (another program in the store) neither blocks the flush nor is followed.
func TestSyncDoesNotWaitOnAFIFO(t *testing.T) {
	gitDir := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(gitDir, "objects", "pack"), 0o755))
	d := NewDB(gitDir, SHA1)
	must(t, d.Sync()) // the first is a syncfs
	id, err := d.Write("blob", []byte("swapped\n"))
	must(t, err)
	p := d.Path(id)
	must(t, os.Remove(p))
	must(t, syscall.Mkfifo(p, 0o644))
	done := make(chan error, 1)
	go func() { done <- d.Sync() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Sync blocked on a FIFO")
	}
}
