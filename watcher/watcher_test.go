package watcher

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/fsnotify/fsnotify"

	"github.com/cairn-dev/cairn/platform/testsupport"
)

func TestCreateWriteRemoveFiles(t *testing.T) {
	checkNoLeaks(t)
	root := t.TempDir()
	mkdirs(t, root, "sub")
	w, c := startWatcher(t, Options{Root: root}, nil)
	if got := w.Status().Watches; got != 2 {
		t.Fatalf("Watches = %d, want 2 (root, sub)", got)
	}

	writeFiles(t, root, "a.txt", "sub/b.txt")
	c.waitFor(t, Create, "a.txt", "sub/b.txt")
	c.waitFor(t, Write, "a.txt", "sub/b.txt")

	if err := os.Remove(filepath.Join(root, "sub/b.txt")); err != nil {
		t.Fatal(err)
	}
	c.waitFor(t, Remove, "sub/b.txt")
	for _, ch := range c.changes() {
		if ch.Path == "" || strings.HasPrefix(ch.Path, "/") || ch.Time.IsZero() {
			t.Errorf("bad change %+v", ch)
		}
	}
	if s := w.Status(); s.LimitHit || s.Err != "" || s.Unwatched != 0 {
		t.Errorf("status = %+v, want healthy", s)
	}
}

// Files created in a new folder before its watch exists are found by the walk
// that follows the watch.
func TestNestedMkdirThenFilesQuickly(t *testing.T) {
	checkNoLeaks(t)
	root := t.TempDir()
	w, c := startWatcher(t, Options{Root: root}, nil)

	var want []string
	for i := range 20 {
		top := fmt.Sprintf("n%02d", i)
		mkdirs(t, root, top+"/a/b/c")
		files := []string{top + "/f", top + "/a/f", top + "/a/b/f", top + "/a/b/c/f"}
		writeFiles(t, root, files...)
		want = append(want, top, top+"/a", top+"/a/b", top+"/a/b/c")
		want = append(want, files...)
	}
	c.waitFor(t, Create, want...)
	testsupport.WaitFor(t, waitTimeout, "81 watches", func() bool { return w.Status().Watches == 1+20*4 })

	// Folders found by the walk are watched too: a later file deep down is seen.
	writeFiles(t, root, "n07/a/b/c/late")
	c.waitFor(t, Create, "n07/a/b/c/late")
}

func TestRemoveDirDropsWatches(t *testing.T) {
	checkNoLeaks(t)
	root := t.TempDir()
	mkdirs(t, root, "d/e/f", "keep")
	writeFiles(t, root, "d/x", "d/e/f/y")
	w, c := startWatcher(t, Options{Root: root}, nil)
	if got := w.Status().Watches; got != 5 {
		t.Fatalf("Watches = %d, want 5", got)
	}

	if err := os.RemoveAll(filepath.Join(root, "d")); err != nil {
		t.Fatal(err)
	}
	c.waitFor(t, Remove, "d", "d/x", "d/e/f/y")
	testsupport.WaitFor(t, waitTimeout, "2 watches", func() bool { return w.Status().Watches == 2 })

	// The same name again is a new folder, watched afresh.
	mkdirs(t, root, "d/e")
	writeFiles(t, root, "d/e/z")
	c.waitFor(t, Create, "d/e/z")
	testsupport.WaitFor(t, waitTimeout, "4 watches", func() bool { return w.Status().Watches == 4 })
	if s := w.Status(); s.Err != "" {
		t.Errorf("Err = %q", s.Err)
	}
}

func TestRenameDir(t *testing.T) {
	checkNoLeaks(t)
	root, outside := t.TempDir(), t.TempDir()
	mkdirs(t, root, "d/e")
	writeFiles(t, root, "d/e/x")
	w, c := startWatcher(t, Options{Root: root}, nil)
	if got := w.Status().Watches; got != 3 {
		t.Fatalf("Watches = %d, want 3", got)
	}

	t.Run("within the tree", func(t *testing.T) {
		if err := os.Rename(filepath.Join(root, "d"), filepath.Join(root, "g")); err != nil {
			t.Fatal(err)
		}
		c.waitFor(t, Rename, "d")
		c.waitFor(t, Create, "g", "g/e", "g/e/x")
		testsupport.WaitFor(t, waitTimeout, "3 watches", func() bool { return w.Status().Watches == 3 })

		// The moved subfolder's watch reports under its new name, never the old.
		writeFiles(t, root, "g/e/new")
		c.waitFor(t, Create, "g/e/new")
		if got := c.under("d/e"); len(got) != 0 {
			t.Errorf("changes under the old name: %v", got)
		}
	})

	t.Run("out of the tree", func(t *testing.T) {
		if err := os.Rename(filepath.Join(root, "g"), filepath.Join(outside, "g")); err != nil {
			t.Fatal(err)
		}
		c.waitFor(t, Rename, "g")
		testsupport.WaitFor(t, waitTimeout, "1 watch", func() bool { return w.Status().Watches == 1 })

		writeFiles(t, outside, "g/e/gone")
		c.barrier(t, root, "")
		if c.has("g/e/gone", Create) {
			t.Error("a folder moved out of the tree is still watched")
		}
	})

	t.Run("into the tree", func(t *testing.T) {
		mkdirs(t, outside, "in/deep")
		writeFiles(t, outside, "in/deep/z")
		if err := os.Rename(filepath.Join(outside, "in"), filepath.Join(root, "in")); err != nil {
			t.Fatal(err)
		}
		c.waitFor(t, Create, "in", "in/deep", "in/deep/z")
		testsupport.WaitFor(t, waitTimeout, "3 watches", func() bool { return w.Status().Watches == 3 })
		writeFiles(t, root, "in/deep/later")
		c.waitFor(t, Create, "in/deep/later")
	})

	t.Run("over an empty folder", func(t *testing.T) {
		mkdirs(t, root, "target", "src/sub")
		writeFiles(t, root, "src/sub/s")
		c.waitFor(t, Create, "target", "src/sub/s")
		// os.Rename refuses an existing folder as target; rename(2) replaces an empty one.
		if err := syscall.Rename(filepath.Join(root, "src"), filepath.Join(root, "target")); err != nil {
			t.Fatal(err)
		}
		c.waitFor(t, Create, "target/sub", "target/sub/s")
		writeFiles(t, root, "target/sub/after")
		c.waitFor(t, Create, "target/sub/after")
	})
	if s := w.Status(); s.Err != "" {
		t.Errorf("Err = %q", s.Err)
	}
}

func TestSkip(t *testing.T) {
	checkNoLeaks(t)
	root := t.TempDir()
	mkdirs(t, root, ".git/objects", "src")
	var calls []string
	skip := func(rel string, isDir bool) bool {
		calls = append(calls, rel) // called from one goroutine at a time
		base := path.Base(rel)
		return (isDir && base == ".git") || (!isDir && strings.HasSuffix(base, ".tmp"))
	}
	w, c := startWatcher(t, Options{Root: root, Skip: skip}, nil)
	if got := w.Status().Watches; got != 2 {
		t.Fatalf("Watches = %d, want 2 (root, src): .git must not be watched", got)
	}

	writeFiles(t, root, ".git/HEAD", ".git/objects/o", "src/x.tmp")
	mkdirs(t, root, "src/sub/.git/refs", "src/.git")
	writeFiles(t, root, "src/sub/.git/refs/r", "src/sub/kept")
	c.waitFor(t, Create, "src/sub", "src/sub/kept")
	c.barrier(t, root, "src")
	for _, p := range []string{".git", "src/.git", "src/sub/.git", "src/x.tmp"} {
		if got := c.under(p); len(got) != 0 {
			t.Errorf("skipped %s reported: %v", p, got)
		}
	}
	if got := w.Status().Watches; got != 3 {
		t.Errorf("Watches = %d, want 3 (root, src, src/sub)", got)
	}
	if slices.Contains(calls, "") {
		t.Error("Skip called with an empty path")
	}
}

func TestSymlinksNotFollowed(t *testing.T) {
	checkNoLeaks(t)
	root, outside := t.TempDir(), t.TempDir()
	mkdirs(t, outside, "inner")
	if err := os.Symlink(outside, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	w, c := startWatcher(t, Options{Root: root}, nil)
	if got := w.Status().Watches; got != 1 {
		t.Fatalf("Watches = %d, want 1: a symlinked folder must not be watched", got)
	}

	if err := os.Symlink(filepath.Join(outside, "inner"), filepath.Join(root, "link2")); err != nil {
		t.Fatal(err)
	}
	c.waitFor(t, Create, "link2") // the link itself is an entry of the tree
	writeFiles(t, outside, "f", "inner/g")
	c.barrier(t, root, "")
	if got := append(c.under("link"), c.under("link2/inner")...); len(got) != 0 {
		t.Errorf("changes through a symlink: %v", got)
	}
	if got := w.Status().Watches; got != 1 {
		t.Errorf("Watches = %d, want 1", got)
	}
}

// Root given as a symlink is resolved once; paths stay relative to it.
func TestRootSymlinkResolved(t *testing.T) {
	checkNoLeaks(t)
	real, links := t.TempDir(), t.TempDir()
	link := filepath.Join(links, "root")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	_, c := startWatcher(t, Options{Root: link}, nil)
	writeFiles(t, real, "a")
	c.waitFor(t, Create, "a")
}

// limitAfter returns a watch hook that adds n watches, then fails with errno.
func limitAfter(n int64, errno syscall.Errno) func(*fsnotify.Watcher, string) error {
	var added atomic.Int64
	return func(fw *fsnotify.Watcher, p string) error {
		if added.Add(1) > n {
			return errno
		}
		return fw.Add(p)
	}
}

func TestWatchLimit(t *testing.T) {
	for _, tc := range []struct {
		errno  syscall.Errno
		sysctl string
	}{
		{syscall.ENOSPC, "fs.inotify.max_user_watches"},
		{syscall.EMFILE, "fs.inotify.max_user_instances"},
	} {
		t.Run(tc.errno.Error(), func(t *testing.T) {
			checkNoLeaks(t)
			root := t.TempDir()
			mkdirs(t, root, "d1", "d2", "d3", "d4/deep")
			// Root, d1 and d2 are watched (the walk is in lexical order); d3
			// and d4 hit the limit.
			w, c := startWatcher(t, Options{Root: root}, limitAfter(3, tc.errno))

			s := w.Status()
			if !s.LimitHit || s.Watches != 3 || s.Unwatched != 2 {
				t.Fatalf("status = %+v, want LimitHit, 3 watches, 2 unwatched", s)
			}
			if !strings.Contains(s.Err, tc.sysctl) || !strings.Contains(s.Err, "sysctl -w") {
				t.Errorf("Err = %q, want the sysctl %s and how to raise it", s.Err, tc.sysctl)
			}
			if !overflowed(w) {
				t.Error("no Overflow after the limit was hit")
			}

			// Watched folders keep reporting.
			writeFiles(t, root, "d1/f", "d2/g")
			c.waitFor(t, Create, "d1/f", "d2/g")

			// A new folder is reported, cannot be watched, and asks for a rescan.
			mkdirs(t, root, "d5")
			c.waitFor(t, Create, "d5")
			testsupport.WaitFor(t, waitTimeout, "Overflow for d5", func() bool { return overflowed(w) })
			if s := w.Status(); s.Unwatched != 3 || s.Watches != 3 || s.Err == "" {
				t.Errorf("status = %+v, want 3 unwatched, 3 watches", s)
			}
			writeFiles(t, root, "d1/after")
			c.waitFor(t, Create, "d1/after")
		})
	}
}

func TestLimitErrorFormat(t *testing.T) {
	err := fmt.Errorf("watch: %w", asLimit("/w/a", syscall.ENOSPC))
	if !errors.Is(err, syscall.ENOSPC) {
		t.Error("LimitError does not unwrap to its errno")
	}
	var le *LimitError
	if !errors.As(err, &le) || le.Sysctl != sysctlWatches || le.Path != "/w/a" {
		t.Fatalf("LimitError = %+v", le)
	}
	for _, want := range []string{"inotify watch limit", "fs.inotify.max_user_watches", "/w/a", "sysctl -w"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
	if asLimit("/w", syscall.EACCES) != nil {
		t.Error("EACCES taken for a limit")
	}
}

func TestRootCannotBeWatched(t *testing.T) {
	checkNoLeaks(t)
	root := t.TempDir()
	_, err := start(context.Background(), Options{Root: root}, limitAfter(0, syscall.ENOSPC))
	var le *LimitError
	if !errors.As(err, &le) || !strings.Contains(err.Error(), "fs.inotify.max_user_watches") {
		t.Fatalf("err = %v, want a LimitError", err)
	}
}

func TestStartRejectsBadRoot(t *testing.T) {
	checkNoLeaks(t)
	dir := t.TempDir()
	writeFiles(t, dir, "file")
	for _, root := range []string{"relative/path", filepath.Join(dir, "missing"), filepath.Join(dir, "file")} {
		if w, err := Start(context.Background(), Options{Root: root}); err == nil {
			w.Close()
			t.Errorf("Start(%q) succeeded", root)
		}
	}
}

func TestUnreadableFolder(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads every folder")
	}
	checkNoLeaks(t)
	root := t.TempDir()
	mkdirs(t, root, "locked", "open")
	if err := os.Chmod(filepath.Join(root, "locked"), 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(filepath.Join(root, "locked"), 0o755) })
	w, c := startWatcher(t, Options{Root: root}, nil)
	if s := w.Status(); s.LimitHit || s.Unwatched != 1 || !strings.Contains(s.Err, "locked") {
		t.Errorf("status = %+v, want 1 unwatched naming locked", s)
	}
	if !overflowed(w) {
		t.Error("no Overflow for an unreadable folder")
	}
	writeFiles(t, root, "open/f")
	c.waitFor(t, Create, "open/f")
}

// A reader too slow for the queue costs changes and an Overflow, never a
// blocked watcher.
func TestSlowReaderOverflows(t *testing.T) {
	checkNoLeaks(t)
	root := t.TempDir()
	w, err := Start(context.Background(), Options{Root: root, MaxQueue: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	for i := range 300 {
		writeFiles(t, root, fmt.Sprintf("f%03d", i))
	}
	testsupport.WaitFor(t, waitTimeout, "Overflow", func() bool { return overflowed(w) })
	if s := w.Status(); !strings.Contains(s.Err, "too slowly") {
		t.Errorf("Err = %q", s.Err)
	}

	// Once read again, the watcher delivers: a new file is reported, unless
	// the backlog still overflowed the tiny queue, which Overflow then says.
	c := collect(w)
	for i := 0; ; i++ {
		p := fmt.Sprintf("after%d", i)
		writeFiles(t, root, p)
		testsupport.WaitFor(t, waitTimeout, p+" or another overflow", func() bool { return c.has(p, Create) || overflowed(w) })
		if c.has(p, Create) {
			break
		}
	}
	// The collector still appends until the watcher closes its channel.
	w.Close()
	<-c.done
	if got := len(c.changes()); got >= 600 {
		t.Errorf("%d changes delivered; expected some dropped", got)
	}
}

func TestRootRemoved(t *testing.T) {
	checkNoLeaks(t)
	root := filepath.Join(t.TempDir(), "root")
	mkdirs(t, root, "a")
	w, _ := startWatcher(t, Options{Root: root}, nil)
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	testsupport.WaitFor(t, waitTimeout, "root gone", func() bool {
		s := w.Status()
		return s.Watches == 0 && strings.Contains(s.Err, "removed")
	})
	if !overflowed(w) {
		t.Error("no Overflow when root went away")
	}
}

func TestCloseStopsEverything(t *testing.T) {
	checkNoLeaks(t)
	root := t.TempDir()
	mkdirs(t, root, "a/b")
	w, err := Start(context.Background(), Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, root, "a/b/f") // pending changes nobody reads
	if err := w.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	for range w.Changes() {
	}
}

func TestContextEndsWatcher(t *testing.T) {
	checkNoLeaks(t)
	root := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := Start(ctx, Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	for range w.Changes() { // closed once the watcher has stopped
	}
	if err := w.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	if _, err := Start(ctx, Options{Root: root}); !errors.Is(err, context.Canceled) {
		t.Errorf("Start with a done context: %v", err)
	}
}

func TestOpString(t *testing.T) {
	for op, want := range map[Op]string{
		0:               "[no events]",
		Create:          "CREATE",
		Create | Write:  "CREATE|WRITE",
		Remove | Rename: "REMOVE|RENAME",
		Chmod:           "CHMOD",
	} {
		if got := op.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", op, got, want)
		}
	}
}

func TestQueue(t *testing.T) {
	q := queue{max: 3}
	for i := range 3 {
		if !q.push(Change{Path: fmt.Sprint(i)}) {
			t.Fatalf("push %d refused", i)
		}
	}
	if q.push(Change{Path: "x"}) {
		t.Fatal("push past max accepted")
	}
	for round := range 100 { // steady state: one in, one out, no growth
		c, ok := q.peek()
		if !ok || c.Path != fmt.Sprint(round) {
			t.Fatalf("peek = %v %v, want %d", c, ok, round)
		}
		q.pop()
		q.push(Change{Path: fmt.Sprint(round + 3)})
	}
	if cap(q.buf) > 8 {
		t.Errorf("queue grew to %d", cap(q.buf))
	}
	for range 3 {
		q.pop()
	}
	if _, ok := q.peek(); ok {
		t.Error("queue not empty")
	}
}
