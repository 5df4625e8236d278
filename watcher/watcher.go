package watcher

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/cairn-dev/cairn/platform"
)

// Options for one recursive watch.
type Options struct {
	// Root is the absolute folder watched recursively. If Root itself is a
	// symlink it is resolved once, at Start; nothing under it is followed.
	Root string

	// Skip says which entries are neither watched nor reported (the store,
	// .git folders, configured excludes). rel is slash-separated and relative
	// to Root. For Create events and walks isDir comes from lstat; for other
	// events the entry may be gone, so isDir is true only for watched folders.
	// Skip is called from one goroutine at a time. Nil skips nothing.
	Skip func(rel string, isDir bool) bool

	// MaxQueue bounds the changes held for a slow reader of Changes; past it
	// changes are dropped and Overflow fires. 0 means DefaultMaxQueue.
	MaxQueue int

	// MaxWatches, for tests only, makes the Watcher behave as if the inotify
	// watch limit were this many folders (ENOSPC past it). 0: the kernel's.
	MaxWatches int

	// Lag, for tests only, handles each inotify event this long after it is
	// read, so that a reader of Changes learns of changes late, as on a
	// loaded machine. 0: at once.
	Lag time.Duration

	// Marks is a folder outside Root, private to the caller, where Mark
	// makes its files: it is watched by the same inotify instance as the
	// tree, so a mark is reported after every change made to the tree before
	// it. Start creates it (0700) when missing. "": Mark fails.
	Marks string
}

// MaxUnwatchedNamed is how many unwatched folders Status names.
const MaxUnwatchedNamed = 20

// DefaultMaxQueue is the number of changes a Watcher holds for a slow reader
// before it drops them and asks for a rescan: about 4 MiB at most, allocated
// only while a burst lasts.
const DefaultMaxQueue = 1 << 16

// Op says what happened to a path; several may be set.
type Op uint8

const (
	Create Op = 1 << iota
	Write
	Remove
	Rename // the path was renamed away; the new name comes as a Create
	Chmod
	Mark // not a path of the tree: Path is the name Watcher.Mark returned
)

// Has reports whether op includes every bit of o.
func (op Op) Has(o Op) bool { return op&o == o }

func (op Op) String() string {
	var b strings.Builder
	for _, n := range []struct {
		op   Op
		name string
	}{{Create, "CREATE"}, {Write, "WRITE"}, {Remove, "REMOVE"}, {Rename, "RENAME"}, {Chmod, "CHMOD"}, {Mark, "MARK"}} {
		if op.Has(n.op) {
			if b.Len() > 0 {
				b.WriteByte('|')
			}
			b.WriteString(n.name)
		}
	}
	if b.Len() == 0 {
		return "[no events]"
	}
	return b.String()
}

func opOf(o fsnotify.Op) Op {
	var op Op
	if o.Has(fsnotify.Create) {
		op |= Create
	}
	if o.Has(fsnotify.Write) {
		op |= Write
	}
	if o.Has(fsnotify.Remove) {
		op |= Remove
	}
	if o.Has(fsnotify.Rename) {
		op |= Rename
	}
	if o.Has(fsnotify.Chmod) {
		op |= Chmod
	}
	return op
}

// Change is one path that changed under Root.
type Change struct {
	Path string // slash-separated, relative to Root; never ""
	Op   Op
	Time time.Time // when the event was read (or the entry found by a walk)
}

// Status is the health of a Watcher.
type Status struct {
	Watches int // folders watched now, Root included

	// LimitHit: the inotify watch limit (ENOSPC) or the instance/open-file
	// limit (EMFILE) was reached, so some folders are not watched. It stays set
	// for the Watcher's life: after raising the limit, Close and Start again.
	LimitHit bool

	// Unwatched counts folders (each with everything under it) that could not
	// be watched or read; UnwatchedDirs names the first of them (relative to
	// Root, "." for Root itself), at most MaxUnwatchedNamed.
	Unwatched     int
	UnwatchedDirs []string

	// Err says what went wrong last; when LimitHit, it is the first limit
	// error, naming the sysctl to raise.
	Err string
}

// Watcher watches one folder tree. Start it, read Changes and Overflow, Close it.
type Watcher struct {
	root     string // cleaned, symlinks resolved
	prefix   string // root with a trailing separator
	skip     func(rel string, isDir bool) bool
	add      func(*fsnotify.Watcher, string) error
	fw       *fsnotify.Watcher
	changes  chan Change
	overflow chan struct{}

	stop     chan struct{}
	stopOnce sync.Once
	closeErr error
	wg       sync.WaitGroup

	// Owned by Start's walk, then by the loop goroutine.
	dirs     map[string]*dir // watched folders by rel ("" is Root)
	queue    queue
	dropping bool // changes were dropped since the queue was last empty

	// Mark's folder (cleaned; "" when there is none), what names its files
	// (unique to this Watcher: a folder may be shared), their count, and why
	// the folder could not be watched.
	marks    string
	markTok  string
	markSeq  atomic.Uint64
	marksErr error

	lag     time.Duration // Options.Lag
	watches atomic.Int64
	mu      sync.Mutex
	status  Status // Watches is kept in watches
}

// dir is a watched folder; sub names its watched subfolders, so that a folder
// removed or renamed away drops its whole subtree without a scan of all watches.
type dir struct {
	sub map[string]struct{}
}

// addWatch is how a folder is watched; tests swap it through start to reach
// the kernel limits without exhausting them.
func addWatch(fw *fsnotify.Watcher, path string) error { return fw.Add(path) }

// Start watches opts.Root and every folder under it (walking, skipping Skip
// folders and symlinks) and returns once all of them are watched. ctx bounds
// the start and the Watcher's life; Close must still be called.
//
// Folders that cannot be watched do not fail Start: they show in Status and
// on Overflow. Start fails if Root itself cannot be watched.
func Start(ctx context.Context, opts Options) (*Watcher, error) {
	return start(ctx, opts, addWatch)
}

func start(ctx context.Context, opts Options, add func(*fsnotify.Watcher, string) error) (*Watcher, error) {
	if !filepath.IsAbs(opts.Root) {
		return nil, fmt.Errorf("watcher: root %q is not an absolute path", opts.Root)
	}
	root, err := filepath.EvalSymlinks(filepath.Clean(opts.Root))
	if err != nil {
		return nil, fmt.Errorf("watcher: resolve root: %w", err)
	}
	if fi, err := os.Stat(root); err != nil {
		return nil, fmt.Errorf("watcher: %w", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("watcher: root %s is not a directory", root)
	}
	maxQueue := opts.MaxQueue
	if maxQueue <= 0 {
		maxQueue = DefaultMaxQueue
	}
	skip := opts.Skip
	if skip == nil {
		skip = func(string, bool) bool { return false }
	}

	// fsnotify advises an unbuffered Events channel: the kernel queue
	// (fs.inotify.max_queued_events) is the buffer, and our loop never waits
	// on the consumer.
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		if le := asLimit(root, err); le != nil {
			return nil, fmt.Errorf("watcher: start inotify: %w", le)
		}
		return nil, fmt.Errorf("watcher: start inotify for %s: %w", root, err)
	}
	w := &Watcher{
		root:     root,
		prefix:   strings.TrimSuffix(root, string(filepath.Separator)) + string(filepath.Separator),
		skip:     skip,
		add:      add,
		fw:       fw,
		changes:  make(chan Change, 64),
		overflow: make(chan struct{}, 1),
		stop:     make(chan struct{}),
		dirs:     make(map[string]*dir),
		queue:    queue{max: maxQueue},
		lag:      opts.Lag,
	}
	if opts.MaxWatches > 0 {
		w.add = func(fw *fsnotify.Watcher, p string) error {
			if w.watches.Load() >= int64(opts.MaxWatches) {
				return fmt.Errorf("watch %s: test limit of %d watches: %w", p, opts.MaxWatches, syscall.ENOSPC)
			}
			return add(fw, p)
		}
	}
	// fsnotify sends some errors while holding the lock Add and Remove take, so
	// its error channel is drained by a goroutine that never calls into it.
	w.wg.Add(1)
	go w.drainErrors()

	if err := w.add(fw, root); err != nil {
		w.Close()
		if le := asLimit(root, err); le != nil {
			err = le
		}
		return nil, fmt.Errorf("watcher: watch root %s: %w", root, err)
	}
	w.setDir("")
	w.watchMarks(opts.Marks)
	w.watchTree(ctx, "", false)
	if err := ctx.Err(); err != nil {
		w.Close()
		return nil, fmt.Errorf("watcher: start %s: %w", root, err)
	}

	w.wg.Add(1)
	go w.loop(ctx)
	return w, nil
}

// Changes delivers what changed, in order. It is closed when the Watcher
// stops. Reading it slowly costs changes, not blocking: past MaxQueue held
// changes they are dropped and Overflow fires.
func (w *Watcher) Changes() <-chan Change { return w.changes }

// Overflow holds a value (coalesced) when the Watcher can no longer vouch for
// having reported every change: the kernel dropped events, a folder could not
// be watched or read, Root went away, or Changes was read too slowly. The
// reader should rescan the whole tree.
func (w *Watcher) Overflow() <-chan struct{} { return w.overflow }

// watchMarks watches Mark's folder, made if missing: never a link, and
// never the tree's own. A folder it cannot watch makes Mark fail, not Start.
func (w *Watcher) watchMarks(dir string) {
	if dir == "" {
		w.marksErr = errors.New("watcher: no folder for marks")
		return
	}
	dir = filepath.Clean(dir)
	var tok [6]byte
	_, _ = rand.Read(tok[:])
	w.markTok = fmt.Sprintf("mark-%d-%x-", os.Getpid(), tok)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		w.marksErr = fmt.Errorf("watcher: marks folder: %w", err)
		return
	}
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
		w.marksErr = fmt.Errorf("watcher: marks folder %s is not a folder", dir)
		return
	}
	if real, err := filepath.EvalSymlinks(dir); err != nil {
		w.marksErr = fmt.Errorf("watcher: marks folder: %w", err)
		return
	} else if _, inTree := w.rel(real); inTree {
		w.marksErr = fmt.Errorf("watcher: marks folder %s is inside the watched tree", dir)
		return
	}
	sweepMarks(dir)
	if err := w.fw.Add(dir); err != nil {
		w.marksErr = fmt.Errorf("watcher: watch marks folder %s: %w", dir, err)
		return
	}
	w.marks = dir
}

// sweepMarks removes the marks a process now gone left in dir, killed
// between making one and removing it (Mark's two steps). A mark names its
// maker's pid; one of a process still running (another Watcher's, maybe)
// or any other file is left alone.
func sweepMarks(dir string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), "mark-")
		if !ok || !e.Type().IsRegular() {
			continue
		}
		ps, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(ps)
		if err != nil || pid <= 0 || pid == os.Getpid() || platform.ProcessRunning(pid) {
			continue
		}
		_ = os.Remove(filepath.Join(dir, e.Name())) // a name, never followed
	}
}

// Mark makes a file in the Marks folder and removes it, and returns its
// name. Its removal reaches Changes (Op Mark, Path the name) after every
// change made to the tree before Mark was called: inotify queues the events
// of all its watches in one queue, in the order they happen. Once the mark
// is read, so is every such change, unless Overflow fired meanwhile.
func (w *Watcher) Mark() (string, error) {
	if w.marks == "" {
		return "", w.marksErr
	}
	name := w.markTok + strconv.FormatUint(w.markSeq.Add(1), 10)
	p := filepath.Join(w.marks, name)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600) // O_EXCL: a link there is not followed
	if err != nil {
		return "", fmt.Errorf("watcher: mark: %w", err)
	}
	f.Close()
	if err := os.Remove(p); err != nil {
		return "", fmt.Errorf("watcher: mark: %w", err)
	}
	return name, nil
}

// Status reports the watch count and any limit or error hit so far.
func (w *Watcher) Status() Status {
	w.mu.Lock()
	s := w.status
	s.UnwatchedDirs = append([]string(nil), s.UnwatchedDirs...)
	w.mu.Unlock()
	s.Watches = int(w.watches.Load())
	return s
}

// Close stops the Watcher and waits for its goroutines. It is idempotent.
func (w *Watcher) Close() error {
	w.shutdown()
	w.wg.Wait()
	return w.closeErr
}

func (w *Watcher) shutdown() {
	w.stopOnce.Do(func() {
		close(w.stop)
		w.closeErr = w.fw.Close()
	})
}

func (w *Watcher) stopped() bool {
	select {
	case <-w.stop:
		return true
	default:
		return false
	}
}

func (w *Watcher) signalOverflow() {
	select {
	case w.overflow <- struct{}{}:
	default:
	}
}

func (w *Watcher) drainErrors() {
	defer w.wg.Done()
	for err := range w.fw.Errors {
		switch {
		case errors.Is(err, fsnotify.ErrEventOverflow):
			w.noteErr("inotify event queue overflowed (fs.inotify.max_queued_events): events were lost")
		case errors.Is(err, syscall.EINVAL):
			// fsnotify removing a watch the kernel had already dropped (a
			// folder renamed and then deleted): nothing is lost.
			continue
		default:
			w.noteErr(fmt.Sprintf("inotify: %v", err))
		}
		w.signalOverflow()
	}
}

// noteErr records msg as the last error, unless a limit error holds the spot.
func (w *Watcher) noteErr(msg string) {
	w.mu.Lock()
	if !w.status.LimitHit {
		w.status.Err = msg
	}
	w.mu.Unlock()
}

// fail records a folder that could not be watched or read, and asks for a rescan.
func (w *Watcher) fail(rel string, err error) {
	w.mu.Lock()
	w.status.Unwatched++
	if len(w.status.UnwatchedDirs) < MaxUnwatchedNamed {
		name := rel
		if name == "" {
			name = "."
		}
		w.status.UnwatchedDirs = append(w.status.UnwatchedDirs, name)
	}
	if !w.status.LimitHit {
		if le := asLimit(w.abs(rel), err); le != nil {
			w.status.LimitHit = true
			w.status.Err = le.Error()
		} else {
			w.status.Err = fmt.Sprintf("cannot watch %s: %v", w.abs(rel), err)
		}
	}
	w.mu.Unlock()
	w.signalOverflow()
}

func (w *Watcher) loop(ctx context.Context) {
	defer w.wg.Done()
	defer close(w.changes)
	for {
		var out chan<- Change
		next, ok := w.queue.peek()
		if ok {
			out = w.changes
		}
		select {
		case ev, ok := <-w.fw.Events:
			if !ok {
				return
			}
			if w.lag > 0 {
				time.Sleep(w.lag)
			}
			w.handle(ctx, ev, time.Now())
		case out <- next:
			w.queue.pop()
			if _, more := w.queue.peek(); !more {
				w.dropping = false
			}
		case <-w.stop:
			return
		case <-ctx.Done():
			w.shutdown()
			return
		}
	}
}

func (w *Watcher) handle(ctx context.Context, ev fsnotify.Event, now time.Time) {
	if w.marks != "" && filepath.Dir(ev.Name) == w.marks {
		// A mark is taken once its file is removed (Mark's last step);
		// another Watcher's marks sharing the folder are not this one's.
		if name := filepath.Base(ev.Name); ev.Op.Has(fsnotify.Remove) && strings.HasPrefix(name, w.markTok) {
			w.report(name, Mark, now)
		}
		return
	}
	rel, ok := w.rel(ev.Name)
	if !ok {
		return
	}
	op := opOf(ev.Op)
	if rel == "" {
		if op&(Remove|Rename) != 0 {
			w.rootGone()
		}
		return // Root's own attribute changes are nobody's business
	}
	_, isDir := w.dirs[rel]
	if isDir && op&(Remove|Rename) != 0 {
		// A renamed folder keeps its kernel watches under the new name while
		// fsnotify still maps them to the old one: drop the whole subtree now,
		// before the new name's Create re-adds them.
		w.unwatchTree(rel)
	}
	newDir := false
	if op.Has(Create) {
		if fi, err := os.Lstat(ev.Name); err == nil {
			isDir = fi.IsDir() // a symlink is not a folder: never followed
			newDir = isDir
		}
	}
	if w.skip(rel, isDir) {
		return
	}
	w.report(rel, op, now)
	if newDir && w.parentWatched(rel) {
		// Watch, then walk: whatever landed before the watch is found by the
		// walk, whatever lands after comes as events.
		w.watchTree(ctx, rel, true)
	}
}

func (w *Watcher) report(rel string, op Op, t time.Time) {
	if w.queue.push(Change{Path: rel, Op: op, Time: t}) {
		return
	}
	if !w.dropping { // once per burst: a storm of drops costs no more than the drops
		w.dropping = true
		w.noteErr(fmt.Sprintf("changes read too slowly: more than %d pending, some dropped", w.queue.max))
	}
	w.signalOverflow()
}

// watchTree watches top and every folder under it, each before it is read.
// top is watched already when it is Root. With report, every entry found under
// top is queued as a Create, since its own events may have come before its
// folder's watch. Folders watched already are not walked again: they were
// walked when their watch was added.
func (w *Watcher) watchTree(ctx context.Context, top string, report bool) {
	topAbs := w.abs(top)
	_ = filepath.WalkDir(topAbs, func(p string, d fs.DirEntry, err error) error {
		if w.stopped() || ctx.Err() != nil {
			return filepath.SkipAll
		}
		rel, _ := w.rel(p)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) { // gone: its parent's events say so
				w.fail(rel, fmt.Errorf("read: %w", err))
			}
			return nil
		}
		if p == topAbs {
			if top == "" || w.watchDir(top) {
				return nil
			}
			return filepath.SkipDir
		}
		isDir := d.IsDir()
		if w.skip(rel, isDir) {
			if isDir {
				return filepath.SkipDir
			}
			return nil
		}
		if report {
			w.report(rel, Create, time.Now())
		}
		if !isDir {
			return nil
		}
		if _, ok := w.dirs[rel]; ok || !w.watchDir(rel) {
			return filepath.SkipDir
		}
		return nil
	})
}

// watchDir adds a watch for the folder rel; false if it is not watched.
func (w *Watcher) watchDir(rel string) bool {
	abs := w.abs(rel)
	if err := w.add(w.fw, abs); err != nil {
		switch {
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
			// Gone or replaced since it was listed: its parent's events say so.
		case errors.Is(err, fsnotify.ErrClosed):
		default:
			w.fail(rel, err)
		}
		return false
	}
	// inotify follows symlinks: if the folder became one between listing and
	// watching, the watch is on its target, so take it back.
	if fi, err := os.Lstat(abs); err != nil || !fi.IsDir() {
		if _, ok := w.dirs[rel]; ok {
			w.unwatchTree(rel)
		} else {
			_ = w.fw.Remove(abs)
		}
		return false
	}
	w.setDir(rel)
	return true
}

func (w *Watcher) setDir(rel string) {
	if _, ok := w.dirs[rel]; ok {
		return
	}
	w.dirs[rel] = &dir{}
	w.watches.Store(int64(len(w.dirs)))
	if rel == "" {
		return
	}
	parent, name := path.Split(rel)
	if p := w.dirs[strings.TrimSuffix(parent, "/")]; p != nil {
		if p.sub == nil {
			p.sub = make(map[string]struct{})
		}
		p.sub[name] = struct{}{}
	}
}

// unwatchTree drops the watches of rel and everything under it. Errors are
// ignored: the kernel has usually dropped the watch of a deleted folder.
func (w *Watcher) unwatchTree(rel string) {
	d, ok := w.dirs[rel]
	if !ok {
		return
	}
	for name := range d.sub {
		w.unwatchTree(path.Join(rel, name))
	}
	_ = w.fw.Remove(w.abs(rel))
	delete(w.dirs, rel)
	w.watches.Store(int64(len(w.dirs)))
	if rel == "" {
		return
	}
	parent, name := path.Split(rel)
	if p := w.dirs[strings.TrimSuffix(parent, "/")]; p != nil {
		delete(p.sub, name)
	}
}

// parentWatched is false for events that fsnotify had queued from a watch
// dropped since (a folder renamed away): their paths are stale, so nothing
// is watched under them.
func (w *Watcher) parentWatched(rel string) bool {
	parent, _ := path.Split(rel)
	_, ok := w.dirs[strings.TrimSuffix(parent, "/")]
	return ok
}

func (w *Watcher) rootGone() {
	w.unwatchTree("")
	w.noteErr(fmt.Sprintf("root %s was removed or renamed: nothing is watched", w.root))
	w.signalOverflow()
}

func (w *Watcher) abs(rel string) string {
	if rel == "" {
		return w.root
	}
	return w.prefix + filepath.FromSlash(rel)
}

// rel turns an absolute path under Root into a slash-separated relative one.
func (w *Watcher) rel(abs string) (string, bool) {
	if abs == w.root {
		return "", true
	}
	r, ok := strings.CutPrefix(abs, w.prefix)
	if !ok {
		return "", false
	}
	return filepath.ToSlash(r), true
}

// queue holds changes the reader has not taken yet, up to max.
type queue struct {
	buf  []Change
	head int
	max  int
}

func (q *queue) push(c Change) bool {
	if len(q.buf)-q.head >= q.max {
		return false
	}
	if len(q.buf) == cap(q.buf) && q.head > 0 && q.head >= len(q.buf)/2 {
		n := copy(q.buf, q.buf[q.head:])
		clear(q.buf[n:])
		q.buf, q.head = q.buf[:n], 0
	}
	q.buf = append(q.buf, c)
	return true
}

func (q *queue) peek() (Change, bool) {
	if q.head == len(q.buf) {
		return Change{}, false
	}
	return q.buf[q.head], true
}

func (q *queue) pop() {
	q.buf[q.head] = Change{}
	q.head++
	if q.head == len(q.buf) {
		q.head = 0
		if cap(q.buf) > 1024 {
			q.buf = nil // a burst is over: give its memory back
		} else {
			q.buf = q.buf[:0]
		}
	}
}
