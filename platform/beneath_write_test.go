//go:build unix

package platform

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestReplaceFileAndSymlink: a file or link made beneath the Tree replaces
// what is at its path (a file, a planted link: the link itself, never what
// it leads to; an empty folder), never goes through a link on the way, and
// leaves no temporary file behind when it fails.
func TestReplaceFileAndSymlink(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("outside\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(root, "f"), []byte("old\n"), 0o644))
	must(os.Symlink(secret, filepath.Join(root, "planted")))
	must(os.Mkdir(filepath.Join(root, "empty"), 0o755))
	must(os.MkdirAll(filepath.Join(root, "full", "x"), 0o755))
	must(os.Symlink(outside, filepath.Join(root, "linkdir")))
	tr, err := OpenTree(root)
	must(err)
	defer tr.Close()

	must(tr.ReplaceFile("f", []byte("new\n"), 0o777))
	if fi, err := os.Lstat(filepath.Join(root, "f")); err != nil || fi.Mode()&0o100 == 0 {
		t.Errorf("f after ReplaceFile 0777: %v %v", fi, err)
	}
	must(tr.ReplaceFile("planted", []byte("mine\n"), 0o666))
	if b, _ := os.ReadFile(secret); string(b) != "outside\n" {
		t.Errorf("written through a planted link: %q", b)
	}
	if fi, err := os.Lstat(filepath.Join(root, "planted")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("planted is not a file now: %v %v", fi, err)
	}
	must(tr.ReplaceSymlink("empty", "f"))
	if l, err := os.Readlink(filepath.Join(root, "empty")); err != nil || l != "f" {
		t.Errorf("empty folder not replaced by a link: %q %v", l, err)
	}
	if err := tr.ReplaceFile("full", []byte("x"), 0o666); err == nil {
		t.Error("a folder holding files was replaced")
	}
	if err := tr.ReplaceFile("linkdir/secret", []byte("x"), 0o666); !errors.Is(err, ErrThroughLink) {
		t.Errorf("through a linked folder: %v, want ErrThroughLink", err)
	}
	if b, _ := os.ReadFile(secret); string(b) != "outside\n" {
		t.Errorf("written through a linked folder: %q", b)
	}
	ents, err := os.ReadDir(root)
	must(err)
	for _, e := range ents {
		if len(e.Name()) > 7 && e.Name()[:7] == ".cairn-" {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
}
