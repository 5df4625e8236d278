//go:build unix

package platform

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// eachResolver runs fn with openat2 (where the kernel has it) and with the
// component-by-component walk that stands in for it without.
func eachResolver(t *testing.T, fn func(t *testing.T)) {
	t.Run("openat2", func(t *testing.T) {
		if runtime.GOOS != "linux" {
			t.Skip("no openat2 here")
		}
		fn(t)
	})
	t.Run("walk", func(t *testing.T) {
		was := openat2Off.Load()
		openat2Off.Store(true)
		defer openat2Off.Store(was)
		fn(t)
	})
}

// beneathFixture is a workspace with a folder and, outside it, a folder
// standing for someone else's (an "outside" secret).
func beneathFixture(t *testing.T) (ws, outside string, tree *Tree) {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws, outside = filepath.Join(root, "ws"), filepath.Join(root, "outside")
	for _, d := range []string{filepath.Join(ws, "real/sub"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for p, body := range map[string]string{
		filepath.Join(ws, "real/sub/f"): "inside\n",
		filepath.Join(outside, "f"):     "SECRET\n",
	} {
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"l":        outside,           // a folder swapped for a link out
		"inlink":   "real",            // a link that stays inside (os.Root follows it)
		"real/up":  "../real",         // relative, inside
		"lf":       "real/sub/f",      // a link as the last component
		"real/out": "../../outside/f", // relative, out
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(ws, name)); err != nil {
			t.Fatal(err)
		}
	}
	tree, err = OpenTree(ws)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tree.Close() })
	return ws, outside, tree
}

func TestTreeResolvesBeneathWithoutLinks(t *testing.T) {
	eachResolver(t, func(t *testing.T) {
		ws, outside, tree := beneathFixture(t)
		if b, err := tree.ReadFile("real/sub/f", 1<<20); err != nil || string(b) != "inside\n" {
			t.Fatalf("plain path: %q %v", b, err)
		}
		for _, rel := range []string{"l/f", "inlink/sub/f", "real/up/sub/f", "lf", "real/out", "l", "inlink"} {
			f, err := tree.OpenRegular(rel)
			if err == nil {
				f.Close()
				t.Errorf("%s: opened, want it refused", rel)
				continue
			}
			if !errors.Is(err, ErrThroughLink) || !errors.Is(err, ErrLinkInPath) {
				t.Errorf("%s: %v, want ErrThroughLink", rel, err)
			}
		}
		if _, err := tree.Sub("inlink"); !errors.Is(err, ErrThroughLink) {
			t.Errorf("Sub through a link: %v", err)
		}
		for _, rel := range []string{"../outside/f", "real/../../outside/f", "real/../real/sub/f", "/etc/passwd", outside + "/f", "", "real/sub/", "./real"} {
			f, err := tree.OpenRegular(rel)
			if err == nil {
				f.Close()
				t.Errorf("%q: opened, want ErrNotBeneath", rel)
			} else if !errors.Is(err, ErrNotBeneath) {
				t.Errorf("%q: %v, want ErrNotBeneath", rel, err)
			}
		}
		if _, err := tree.OpenRegular("missing/f"); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("missing: %v", err)
		}

		// Lstat describes a final link itself, refuses one on the way.
		if fi, err := tree.Lstat("lf"); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			t.Errorf("Lstat of a link: %v %v", fi, err)
		}
		if fi, err := tree.Lstat("real/sub/f"); err != nil || !fi.Mode().IsRegular() || fi.Size() != 7 || fi.Name() != "f" {
			t.Errorf("Lstat of a file: %v %v", fi, err)
		} else if _, ok := fi.Sys().(*syscall.Stat_t); !ok {
			t.Errorf("Lstat's Sys is %T", fi.Sys())
		}
		if _, err := tree.Lstat("l/f"); !errors.Is(err, ErrThroughLink) {
			t.Errorf("Lstat through a link: %v", err)
		}
		if fi, err := tree.Lstat("."); err != nil || !fi.IsDir() {
			t.Errorf("Lstat of the tree: %v %v", fi, err)
		}

		// Nothing is removed, moved, made or written through a link.
		if err := tree.Remove("l/f"); !errors.Is(err, ErrThroughLink) {
			t.Errorf("Remove through a link: %v", err)
		}
		if err := tree.Rename("l/f", "stolen"); !errors.Is(err, ErrThroughLink) {
			t.Errorf("Rename out through a link: %v", err)
		}
		if err := tree.Rename("real/sub/f", "l/planted"); !errors.Is(err, ErrThroughLink) {
			t.Errorf("Rename in through a link: %v", err)
		}
		if err := tree.MkdirAll("l/new/dir", 0o755, -1, -1); !errors.Is(err, ErrThroughLink) {
			t.Errorf("MkdirAll through a link: %v", err)
		}
		if err := tree.WriteFileAtomic("l/f", []byte("owned"), 0o644, -1, -1); !errors.Is(err, ErrThroughLink) {
			t.Errorf("WriteFileAtomic through a link: %v", err)
		}
		if f, err := tree.OpenFile("l/g", os.O_WRONLY|os.O_CREATE, 0o644); !errors.Is(err, ErrThroughLink) {
			if f != nil {
				f.Close()
			}
			t.Errorf("OpenFile(O_CREATE) through a link: %v", err)
		}
		if b, err := os.ReadFile(filepath.Join(outside, "f")); err != nil || string(b) != "SECRET\n" {
			t.Errorf("outside file: %q %v", b, err)
		}
		if ents, _ := os.ReadDir(outside); len(ents) != 1 {
			t.Errorf("outside folder holds %d entries", len(ents))
		}

		// A final link is itself removed or replaced, its target untouched.
		if err := tree.WriteFileAtomic("lf", []byte("new\n"), 0o640, -1, -1); err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Lstat(filepath.Join(ws, "lf")); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o640 {
			t.Errorf("lf after WriteFileAtomic: %v %v", fi, err)
		}
		if b, _ := os.ReadFile(filepath.Join(ws, "real/sub/f")); string(b) != "inside\n" {
			t.Errorf("the link's target was written: %q", b)
		}
		if err := tree.Remove("real/out"); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(outside, "f")); err != nil {
			t.Errorf("removing a link removed its target: %v", err)
		}

		// What works beneath: folders made, files moved, an existing
		// destination refused by Move.
		if err := tree.MkdirAll("a/b/c", 0o750, -1, -1); err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Lstat(filepath.Join(ws, "a/b/c")); err != nil || !fi.IsDir() {
			t.Fatalf("MkdirAll: %v", err)
		}
		sub, err := tree.Sub("a")
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		if err := tree.Move("real/sub/f", sub, "b/c/f"); err != nil {
			t.Fatal(err)
		}
		if err := tree.Move("lf", sub, "b/c/f"); !errors.Is(err, fs.ErrExist) {
			t.Errorf("Move onto an existing file: %v", err)
		}
		if b, _ := os.ReadFile(filepath.Join(ws, "a/b/c/f")); string(b) != "inside\n" {
			t.Errorf("moved file: %q", b)
		}
		if err := tree.Remove("a/b/c/f"); err != nil {
			t.Fatal(err)
		}
		if err := tree.Remove("a/b/c"); err != nil {
			t.Fatal(err)
		}
		if rel, err := tree.Rel(filepath.Join(ws, "a/b")); err != nil || rel != "a/b" {
			t.Errorf("Rel: %q %v", rel, err)
		}
		if _, err := tree.Rel(outside); !errors.Is(err, ErrNotBeneath) {
			t.Errorf("Rel outside: %v", err)
		}
	})
}

// TestTreeFIFO: a FIFO is refused as not regular, without waiting for a writer.
func TestTreeFIFO(t *testing.T) {
	eachResolver(t, func(t *testing.T) {
		ws, _, tree := beneathFixture(t)
		if err := unix.Mkfifo(filepath.Join(ws, "real/fifo"), 0o644); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			_, err := tree.ReadFile("real/fifo", 1<<20)
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, ErrNotRegular) {
				t.Errorf("FIFO: %v, want ErrNotRegular", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("opening a FIFO blocked")
		}
	})
}

// TestTreeRace: another user swaps a folder of the tree with a link out of
// it (renameat2 RENAME_EXCHANGE) in a loop; nothing read, written, removed
// or made through the tree ever lands outside.
func TestTreeRace(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("renameat2 exchange is Linux's")
	}
	eachResolver(t, func(t *testing.T) {
		ws, outside, tree := beneathFixture(t)
		if err := os.MkdirAll(filepath.Join(ws, "tmp/sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, "tmp/sub/f"), []byte("mine\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(outside, filepath.Join(ws, "tmp/link")); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				_ = unix.Renameat2(unix.AT_FDCWD, filepath.Join(ws, "tmp/sub"), unix.AT_FDCWD, filepath.Join(ws, "tmp/link"), unix.RENAME_EXCHANGE)
			}
		}()
		refused := 0
		for end := time.Now().Add(time.Second); time.Now().Before(end); {
			b, err := tree.ReadFile("tmp/sub/f", 1<<20)
			if err == nil && string(b) != "mine\n" {
				t.Fatalf("read %q through the link", b)
			}
			if errors.Is(err, ErrThroughLink) {
				refused++
			}
			_ = tree.Remove("tmp/sub/f")
			_ = tree.WriteFileAtomic("tmp/sub/f", []byte("mine\n"), 0o644, -1, -1)
			_ = tree.MkdirAll("tmp/sub/d", 0o755, -1, -1)
			_ = tree.Remove("tmp/sub/d")
		}
		close(done)
		wg.Wait()
		t.Logf("%d reads refused as through a link", refused)
		if b, err := os.ReadFile(filepath.Join(outside, "f")); err != nil || string(b) != "SECRET\n" {
			t.Errorf("outside file: %q %v", b, err)
		}
		if ents, _ := os.ReadDir(outside); len(ents) != 1 {
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			t.Errorf("outside folder now holds %v", names)
		}
	})
}

// TestTreeRemoveDir: RemoveDir removes an empty folder and nothing else: a
// file, a folder holding one, a link (to a folder or out of the tree) and a
// path through a link stay.
func TestTreeRemoveDir(t *testing.T) {
	eachResolver(t, func(t *testing.T) {
		ws, outside, tree := beneathFixture(t)
		if err := os.Mkdir(filepath.Join(ws, "empty"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := tree.RemoveDir("empty"); err != nil {
			t.Fatalf("empty folder: %v", err)
		}
		if _, err := os.Lstat(filepath.Join(ws, "empty")); !os.IsNotExist(err) {
			t.Fatalf("empty folder still there: %v", err)
		}
		for _, rel := range []string{"real/sub/f", "real/sub", "l", "inlink", "lf", "l/f", "inlink/sub"} {
			if err := tree.RemoveDir(rel); err == nil {
				t.Errorf("%s: removed, want it kept", rel)
			}
		}
		for _, p := range []string{filepath.Join(ws, "real/sub/f"), filepath.Join(ws, "l"), filepath.Join(ws, "inlink"), filepath.Join(ws, "lf"), filepath.Join(outside, "f")} {
			if _, err := os.Lstat(p); err != nil {
				t.Errorf("%s: %v, want it kept", p, err)
			}
		}
	})
}
