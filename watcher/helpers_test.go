package watcher

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/cairn-dev/cairn/platform/testsupport"
)

// waitTimeout bounds every wait for a condition; generous for -race on 2 cores.
const waitTimeout = 10 * time.Second

// checkNoLeaks fails the test if it ends with more goroutines than it began
// with. Call it first, so its cleanup runs after every other.
func checkNoLeaks(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		if !testsupport.Poll(waitTimeout, func() bool { return runtime.NumGoroutine() <= before }) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Errorf("%d goroutines before, %d after:\n%s", before, runtime.NumGoroutine(), buf)
		}
	})
}

// collector records every Change a Watcher reports.
type collector struct {
	mu   sync.Mutex
	ops  map[string]Op
	all  []Change
	done chan struct{}
}

func collect(w *Watcher) *collector {
	c := &collector{ops: make(map[string]Op), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for ch := range w.Changes() {
			c.mu.Lock()
			c.ops[ch.Path] |= ch.Op
			c.all = append(c.all, ch)
			c.mu.Unlock()
		}
	}()
	return c
}

func (c *collector) has(path string, op Op) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	got, ok := c.ops[path]
	return ok && got.Has(op)
}

// changes copies what has been reported so far.
func (c *collector) changes() []Change {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Change(nil), c.all...)
}

// waitFor waits until every path has been reported with op.
func (c *collector) waitFor(t *testing.T, op Op, paths ...string) {
	t.Helper()
	testsupport.WaitFor(t, waitTimeout, op.String()+" of "+strings.Join(paths, ", "), func() bool {
		for _, p := range paths {
			if !c.has(p, op) {
				return false
			}
		}
		return true
	})
}

// under lists the reported paths equal to or under prefix, sorted.
func (c *collector) under(prefix string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for p := range c.ops {
		if p == prefix || strings.HasPrefix(p, prefix+"/") {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// barrier writes a fresh file in dir and waits until it is reported. inotify
// queues the events of one instance in order, so anything that would have been
// reported before the barrier file has been by then.
func (c *collector) barrier(t *testing.T, root, relDir string) {
	t.Helper()
	f, err := os.CreateTemp(filepath.Join(root, relDir), "barrier-*")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	rel, _ := filepath.Rel(root, f.Name())
	c.waitFor(t, Create, filepath.ToSlash(rel))
}

// startWatcher starts a Watcher on root (with add as the watch hook, if not
// nil) and a collector on it; both stop at the end of the test.
func startWatcher(t *testing.T, opts Options, add func(*fsnotify.Watcher, string) error) (*Watcher, *collector) {
	t.Helper()
	if add == nil {
		add = addWatch
	}
	w, err := start(context.Background(), opts, add)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	c := collect(w)
	t.Cleanup(func() {
		if err := w.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		<-c.done
	})
	return w, c
}

func mkdirs(t *testing.T, root string, rels ...string) {
	t.Helper()
	for _, r := range rels {
		if err := os.MkdirAll(filepath.Join(root, r), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func writeFiles(t *testing.T, root string, rels ...string) {
	t.Helper()
	for _, r := range rels {
		if err := os.WriteFile(filepath.Join(root, r), []byte(r), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func overflowed(w *Watcher) bool {
	select {
	case <-w.Overflow():
		return true
	default:
		return false
	}
}
