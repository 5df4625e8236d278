//go:build unix

package platform

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// within runs f and fails the test if it has not returned in 5 s: an open
// that blocks (a FIFO without a writer) would hang the daemon for good.
func within[T any](t *testing.T, f func() (T, error)) (T, error) {
	t.Helper()
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := f()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-time.After(5 * time.Second):
		t.Fatal("still blocked after 5 s")
		panic("unreachable")
	}
}

func TestOpenRegular(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("root only"), 0o600); err != nil {
		t.Fatal(err)
	}
	regular := filepath.Join(dir, "regular")
	if err := os.WriteFile(regular, []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	dangling := filepath.Join(dir, "dangling")
	fifo := filepath.Join(dir, "fifo")
	sub := filepath.Join(dir, "sub")
	devlink := filepath.Join(dir, "devlink")
	must(t, os.Symlink(secret, link))
	must(t, os.Symlink("/dev/zero", devlink))
	must(t, os.Symlink(filepath.Join(dir, "nowhere"), dangling))
	must(t, syscall.Mkfifo(fifo, 0o644))
	must(t, os.Mkdir(sub, 0o755))

	f, err := OpenRegular(regular)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadCapped(f, 100)
	f.Close()
	if err != nil || string(got) != "data" {
		t.Fatalf("regular: %q, %v", got, err)
	}

	for _, tc := range []struct {
		name string
		path string
		want error
	}{
		{"symlink", link, ErrSymlink},
		{"dangling symlink", dangling, ErrSymlink},
		{"fifo", fifo, ErrNotRegular},
		{"directory", sub, ErrNotRegular},
		{"device through a link", devlink, ErrSymlink},
		{"missing", filepath.Join(dir, "missing"), fs.ErrNotExist},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, want := tc.path, tc.want
			f, err := within(t, func() (*os.File, error) { return OpenRegular(path) })
			if err == nil {
				f.Close()
				t.Fatal("opened")
			}
			if !errors.Is(err, want) {
				t.Fatalf("err = %v, want %v", err, want)
			}
			var pe *fs.PathError
			if !errors.As(err, &pe) || pe.Path != path {
				t.Fatalf("error %v does not name %s", err, path)
			}
		})
	}
	if b, _ := os.ReadFile(secret); string(b) != "root only" {
		t.Fatalf("secret changed: %q", b)
	}
}

// A device node planted in the folder (possible for root only, or through a
// bind mount) is refused after the open, which does not block.
func TestOpenRegularDevice(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mknod needs root")
	}
	path := filepath.Join(t.TempDir(), "zero")
	if err := syscall.Mknod(path, syscall.S_IFCHR|0o600, int(1<<8|5)); err != nil { // 1,5: /dev/zero on Linux
		t.Skipf("mknod: %v", err)
	}
	f, err := within(t, func() (*os.File, error) { return OpenRegular(path) })
	if err == nil {
		f.Close()
		t.Fatal("opened a device")
	}
	t.Logf("%v", err)
	// A nodev mount refuses the open itself (EACCES); either way nothing is read.
	if !errors.Is(err, ErrNotRegular) && !errors.Is(err, syscall.EACCES) {
		t.Fatalf("err = %v, want ErrNotRegular", err)
	}
}

// A FIFO that has a writer opens, and is still refused.
func TestOpenRegularFIFOWithWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fifo")
	must(t, syscall.Mkfifo(path, 0o644))
	r, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	w, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := within(t, func() (*os.File, error) { return OpenRegular(path) }); !errors.Is(err, ErrNotRegular) {
		t.Fatalf("err = %v, want ErrNotRegular", err)
	}
}

func TestReadFileCapped(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	must(t, os.WriteFile(path, bytes.Repeat([]byte("x"), 100), 0o644))
	if b, err := ReadFileCapped(path, 100); err != nil || len(b) != 100 {
		t.Fatalf("at the limit: %d bytes, %v", len(b), err)
	}
	_, err := ReadFileCapped(path, 99)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("over the limit: %v", err)
	}
	t.Logf("%v", err)
	empty := filepath.Join(dir, "empty")
	must(t, os.WriteFile(empty, nil, 0o644))
	if b, err := ReadFileCapped(empty, 0); err != nil || len(b) != 0 {
		t.Fatalf("empty: %q, %v", b, err)
	}
}

// A huge file is refused from its size, before anything is read: a sparse
// 200 MB file costs no disk, and reading it would cost 200 MB of memory.
func TestReadFileCappedHugeIsNotRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "huge")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	must(t, f.Truncate(200<<20))
	f.Close()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = ReadFileCapped(path, MaxRuntimeFile)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
	if d := after.TotalAlloc - before.TotalAlloc; d > 8<<20 {
		t.Fatalf("allocated %d bytes refusing it", d)
	}
}

// A file whose size says little (those in /proc say 0) is still cut at the limit.
func TestReadFileCappedReadsNoMoreThanTheLimit(t *testing.T) {
	const path = "/proc/self/status"
	if fi, err := os.Stat(path); err != nil || fi.Size() != 0 {
		t.Skip("no /proc with zero-sized files here")
	}
	_, err := ReadFileCapped(path, 16)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
	if b, err := ReadFileCapped(path, 1<<20); err != nil || len(b) == 0 {
		t.Fatalf("under the limit: %d bytes, %v", len(b), err)
	}
}

// WriteFileAtomic replaces a link (or hard link) at the path; its target is untouched.
func TestWriteFileAtomicReplacesLinks(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(t.TempDir(), "victim")
	must(t, os.WriteFile(victim, []byte("victim"), 0o600))
	soft := filepath.Join(dir, "soft")
	hard := filepath.Join(dir, "hard")
	must(t, os.Symlink(victim, soft))
	if err := os.Link(victim, hard); err != nil {
		t.Logf("no hard link: %v", err)
		hard = ""
	}
	for _, p := range []string{soft, hard} {
		if p == "" {
			continue
		}
		must(t, WriteFileAtomic(p, []byte("new"), 0o644))
		fi, err := os.Lstat(p)
		if err != nil || !fi.Mode().IsRegular() {
			t.Fatalf("%s after the write: %v %v", p, fi, err)
		}
		if b, _ := os.ReadFile(p); string(b) != "new" {
			t.Fatalf("%s = %q", p, b)
		}
	}
	if b, _ := os.ReadFile(victim); string(b) != "victim" {
		t.Fatalf("victim written through a link: %q", b)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
