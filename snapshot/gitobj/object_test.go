//go:build unix

package gitobj

import (
	"bytes"
	"compress/zlib"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// newDBIn returns a database in a new folder.
func newDBIn(t *testing.T) *DB {
	t.Helper()
	db := NewDB(t.TempDir(), SHA1)
	if err := os.MkdirAll(db.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return db
}

// TestWriteKeepsStoredObject writes an object that is already stored: the
// stored file is kept (same inode, as git keeps it), made young again, and no
// temporary file is left.
func TestWriteKeepsStoredObject(t *testing.T) {
	db := newDBIn(t)
	data := []byte("tree contents, or a blob's\n")
	id, err := db.Write("blob", data)
	if err != nil {
		t.Fatal(err)
	}
	if want := SHA1.Hash("blob", data); id != want {
		t.Fatalf("id %s, want %s", id, want)
	}
	if fi, err := os.Stat(db.Path(id)); err != nil || fi.Mode().Perm()&0o222 != 0 || !fi.Mode().IsRegular() {
		t.Fatalf("stored object: %v, %v; want a read-only regular file", fi.Mode(), err)
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
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// TestReadRefusesBadHeaders: a loose object whose header claims a huge size,
// has no end, or whose body is shorter than its header says is an error, and
// nothing of the claimed size is allocated (such a header used to panic in
// make, or exhaust memory).
func TestReadRefusesBadHeaders(t *testing.T) {
	gitDir := t.TempDir()
	db := NewDB(gitDir, SHA1)
	for name, c := range map[string]struct {
		raw  []byte
		want string // the check that must refuse it, not the hash's
	}{
		"huge size":  {[]byte("blob 9223372036854775000\x00abc"), "more than"},
		"no end":     {bytes.Repeat([]byte("b"), 4096), "bad header"},
		"short body": {[]byte("blob 10\x00abc"), "its header says 10"},
		"no size":    {[]byte("blob\x00abc"), "bad header"},
	} {
		raw := c.raw
		id := fmt.Sprintf("%040x", len(name))
		id = id[:38] + fmt.Sprintf("%02x", len(raw)%256)
		if err := os.MkdirAll(filepath.Dir(db.Path(id)), 0o755); err != nil {
			t.Fatal(err)
		}
		var z bytes.Buffer
		zw := zlib.NewWriter(&z)
		zw.Write(raw)
		zw.Close()
		if err := os.WriteFile(db.Path(id), z.Bytes(), 0o444); err != nil {
			t.Fatal(err)
		}
		if typ, data, err := db.Read(id); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: read as %s of %d bytes, %v; want an error saying %q", name, typ, len(data), err, c.want)
		}
	}
}

// TestWriteBlobFromLarge streams a blob over the whole-read size: its id is
// git's, a reader holding fewer or more bytes than said is ErrChanged, and
// no temporary file is left either way.
func TestWriteBlobFromLarge(t *testing.T) {
	db := newDBIn(t)
	data := bytes.Repeat([]byte("0123456789abcdef"), (smallBlob/16)+100)
	id, err := db.WriteBlobFrom(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if want := SHA1.Hash("blob", data); id != want {
		t.Fatalf("id %s, want %s", id, want)
	}
	if typ, got, err := db.Read(id); err != nil || typ != "blob" || !bytes.Equal(got, data) {
		t.Fatalf("read back: %s, %d bytes, %v", typ, len(got), err)
	}
	if _, err := db.WriteBlobFrom(bytes.NewReader(data[1:]), int64(len(data))); !errors.Is(err, ErrChanged) {
		t.Errorf("a shorter reader: %v, want ErrChanged", err)
	}
	if _, err := db.WriteBlobFrom(bytes.NewReader(append(data, 'x')), int64(len(data))); !errors.Is(err, ErrChanged) {
		t.Errorf("a longer reader: %v, want ErrChanged", err)
	}
	// Again, already stored: kept.
	if again, err := db.WriteBlobFrom(bytes.NewReader(data), int64(len(data))); err != nil || again != id {
		t.Errorf("stored again: %s, %v", again, err)
	}
	err = filepath.WalkDir(db.Dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), "tmp_obj_") {
			t.Errorf("temporary file left: %s", p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
