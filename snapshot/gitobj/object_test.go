//go:build unix

package gitobj

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestWriteKeepsStoredObject writes an object that is already stored, with
// and without renames that refuse to replace: the stored file is kept (same
// inode, as git keeps it), made young again, and no temporary file is left.
func TestWriteKeepsStoredObject(t *testing.T) {
	for _, noRepl := range []bool{true, false} {
		name := "look-first"
		if noRepl {
			name = "rename-no-replace"
		}
		t.Run(name, func(t *testing.T) {
			old := noReplace.Load()
			noReplace.Store(noRepl)
			t.Cleanup(func() { noReplace.Store(old) })
			gitDir := t.TempDir()
			if err := os.MkdirAll(filepath.Join(gitDir, "objects"), 0o755); err != nil {
				t.Fatal(err)
			}
			db := NewDB(gitDir, SHA1)
			data := []byte("tree contents, or a blob's\n")
			id, err := db.Write("blob", data)
			if err != nil {
				t.Fatal(err)
			}
			if want := SHA1.Hash("blob", data); id != want {
				t.Fatalf("id %s, want %s", id, want)
			}
			long := time.Now().Add(-48 * time.Hour)
			if err := os.Chtimes(db.Path(id), long, long); err != nil {
				t.Fatal(err)
			}
			before := inode(t, db.Path(id))

			if err := db.WriteAll([]Object{{ID: id, Type: "blob", Data: data}}); err != nil {
				t.Fatal(err)
			}
			if got := inode(t, db.Path(id)); got != before {
				t.Errorf("the stored object was replaced (inode %d, was %d)", got, before)
			}
			fi, err := os.Stat(db.Path(id))
			if err != nil {
				t.Fatal(err)
			}
			if time.Since(fi.ModTime()) > time.Hour {
				t.Errorf("the stored object was not made young: mtime %s", fi.ModTime())
			}
			typ, got, err := db.Read(id)
			if err != nil || typ != "blob" || string(got) != string(data) {
				t.Errorf("read back %q %q %v", typ, got, err)
			}
			entries, err := os.ReadDir(filepath.Dir(db.Path(id)))
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				if strings.HasPrefix(e.Name(), "tmp_obj_") {
					t.Errorf("temporary file left: %s", e.Name())
				}
			}
		})
	}
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}
