//go:build unix

package platform

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestTreeScanDir: a folder of more entries than one getdents buffer
// holds, each described as lstat describes it; a link is described, not
// followed (it points out of the tree), a FIFO is stat'ed, not opened; a
// folder reached through a link is refused.
func TestTreeScanDir(t *testing.T) {
	eachResolver(t, func(t *testing.T) {
		ws := t.TempDir()
		outside := t.TempDir()
		dir := filepath.Join(ws, "d")
		must(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
		long := strings.Repeat("n", 200)
		for i := range 600 { // ~130 KiB of records: several getdents calls
			must(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s%d", long, i)), []byte(strings.Repeat("x", i)), 0o644))
		}
		must(t, os.Symlink(outside, filepath.Join(dir, "link")))
		must(t, unix.Mkfifo(filepath.Join(dir, "fifo"), 0o600))
		must(t, os.Symlink(dir, filepath.Join(ws, "via")))
		tree, err := OpenTree(ws)
		if err != nil {
			t.Fatal(err)
		}
		defer tree.Close()
		type entry struct {
			Name string
			Stat unix.Stat_t
			Err  error
		}
		var got []entry
		if err := tree.ScanDir("d", func(name string, st *unix.Stat_t, err error) {
			got = append(got, entry{name, *st, err})
		}); err != nil {
			t.Fatal(err)
		}
		if len(got) != 603 {
			t.Fatalf("%d entries, want 603", len(got))
		}
		seen := map[string]bool{}
		for _, e := range got {
			if seen[e.Name] {
				t.Fatalf("%q listed twice", e.Name)
			}
			seen[e.Name] = true
			if e.Err != nil {
				t.Fatalf("%s: %v", e.Name, e.Err)
			}
			want := &unix.Stat_t{}
			must(t, unix.Lstat(filepath.Join(dir, e.Name), want))
			if e.Stat.Mode&unix.S_IFMT != want.Mode&unix.S_IFMT {
				t.Fatalf("%s: type %o, want %o", e.Name, e.Stat.Mode&unix.S_IFMT, want.Mode&unix.S_IFMT)
			}
			switch want.Mode & unix.S_IFMT {
			case unix.S_IFDIR, unix.S_IFLNK: // the type alone, on Linux
			default:
				if e.Stat.Size != want.Size || e.Stat.Ino != want.Ino || e.Stat.Mtim != want.Mtim || e.Stat.Mode != want.Mode {
					t.Fatalf("%s: stat %+v, want %+v", e.Name, e.Stat, *want)
				}
			}
		}
		none := func(string, *unix.Stat_t, error) { t.Fatal("an entry through a link") }
		if err := tree.ScanDir("via", none); err == nil {
			t.Fatal("listed a folder through a link")
		}
		if err := tree.ScanDir("d/link", none); err == nil {
			t.Fatal("listed a folder out of the tree through a link")
		}
	})
}

// TestTreeEachEntry: every entry of a folder of more entries than one batch
// is given once, with its type from the listing (a link is a link); a folder
// reached through a link is refused.
func TestTreeEachEntry(t *testing.T) {
	eachResolver(t, func(t *testing.T) {
		ws := t.TempDir()
		dir := filepath.Join(ws, "d")
		must(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
		for i := range 2500 {
			must(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d", i)), nil, 0o644))
		}
		must(t, os.Symlink(t.TempDir(), filepath.Join(dir, "link")))
		must(t, os.Symlink(dir, filepath.Join(ws, "via")))
		tree, err := OpenTree(ws)
		if err != nil {
			t.Fatal(err)
		}
		defer tree.Close()
		seen := map[string]os.FileMode{}
		if err := tree.EachEntry("d", func(e os.DirEntry) {
			if _, dup := seen[e.Name()]; dup {
				t.Fatalf("%q given twice", e.Name())
			}
			seen[e.Name()] = e.Type()
		}); err != nil {
			t.Fatal(err)
		}
		if len(seen) != 2502 || seen["link"] != os.ModeSymlink || seen["sub"] != os.ModeDir || seen["f2499"] != 0 {
			t.Fatalf("%d entries (link %v, sub %v), want 2502", len(seen), seen["link"], seen["sub"])
		}
		for _, rel := range []string{"via", "d/link"} {
			if err := tree.EachEntry(rel, func(os.DirEntry) { t.Fatal("an entry through a link") }); err == nil {
				t.Fatalf("listed %s, a folder through a link", rel)
			}
		}
	})
}
