//go:build unix

package platform

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestMkdirAllNoFollow(t *testing.T) {
	base := t.TempDir()
	if err := MkdirAllNoFollow(filepath.Join(base, "a", "b", "c"), 0o755); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(base, "a", "b", "c")); err != nil || !fi.IsDir() {
		t.Fatalf("not created: %v", err)
	}
	if err := MkdirAllNoFollow(filepath.Join(base, "a", "b"), 0o755); err != nil {
		t.Errorf("existing folder: %v", err)
	}
	outside := filepath.Join(base, "outside")
	if err := os.Mkdir(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{link, filepath.Join(link, "x", "y")} {
		if err := MkdirAllNoFollow(p, 0o755); !errors.Is(err, ErrSymlink) {
			t.Errorf("%s: %v, want ErrSymlink", p, err)
		}
	}
	if ents, _ := os.ReadDir(outside); len(ents) > 0 {
		t.Errorf("created through the link: %v", ents)
	}
	f := filepath.Join(base, "file")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := MkdirAllNoFollow(filepath.Join(f, "x"), 0o755); err == nil {
		t.Errorf("mkdir below a file succeeded")
	}
}
