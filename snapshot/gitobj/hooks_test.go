//go:build cairnfault

package gitobj

// These tests set a hook only a build with -tags cairnfault has (hooks_on.go);
// without the tag, TestHooksUnderFaultTag runs them in such a build.

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A pack whose index cannot be written is removed: git never sees a pack
// without its index, so it would stay for good, one per retried seal.
func TestPackWithoutIndexRemoved(t *testing.T) {
	db := newDBIn(t)
	idxFault = func() error { return errors.New("no room for the index") }
	defer func() { idxFault = nil }()
	b := db.Batch()
	if _, err := b.Write("blob", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Flush(); err == nil {
		t.Fatal("the flush succeeded without its index")
	}
	left, _ := filepath.Glob(filepath.Join(db.Dir, "pack", "*"))
	if len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

// A pack already there without its index (one an earlier write or a crash
// left, which the store's open indexes again) is not removed by a write of
// the same objects whose index fails: only the pack this write made goes.
func TestPackWithoutIndexKeepsOneFoundThere(t *testing.T) {
	db := newDBIn(t)
	b := db.Batch()
	if _, err := b.Write("blob", []byte("x")); err != nil {
		t.Fatal(err)
	}
	pack, err := b.Flush()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(strings.TrimSuffix(pack, ".pack") + ".idx"); err != nil {
		t.Fatal(err)
	}
	idxFault = func() error { return errors.New("no room for the index") }
	defer func() { idxFault = nil }()
	b = db.Batch()
	if _, err := b.Write("blob", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Flush(); err == nil {
		t.Fatal("the flush succeeded without its index")
	}
	if _, err := os.Lstat(pack); err != nil {
		t.Errorf("the pack found there without its index was removed: %v", err)
	}
}
