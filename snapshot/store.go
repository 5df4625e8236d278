package snapshot

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-dev/cairn/platform"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// Exact names and contents (docs/runtime-formats.md, docs/cairn-formats.md).
const (
	hankStoreName   = ".hankweavecheckpoints"
	hankGitconfig   = "[user]\n  name = Hankweave Runtime\n  email = froggie@southbridge.ai\n[commit]\n  gpgsign = false\n"
	plainGitconfig  = "[user]\n  name = cairn\n  email = cairn@localhost\n[commit]\n  gpgsign = false\n"
	infoExclude     = "/read_only_data_source/\n/rigArchive/\n/.hankweave/\n/.hankweave.backup-*/\n"
	initialMessage  = "Initial checkpoint setup"
	zeroSHA         = "0000000000000000000000000000000000000000"
	defaultMaxSize  = 100 << 20
	cairnSubdir     = "cairn" // inside GIT_DIR: cairn's index, its meta and the lock
	hankLedgerName  = "cairn-ledger.jsonl"
	plainLedgerName = "ledger.jsonl"
)

// infoAttributes keeps blobs byte-exact: no in-tree .gitattributes may turn
// on eol conversion or filters for the store (info/attributes wins over them).
const infoAttributes = "* -text -filter -ident -working-tree-encoding\n"

// Options configure how a workspace's store is opened.
type Options struct {
	Layout      Layout   // default auto
	StateDir    string   // where plain-layout stores live; default platform.DefaultStateDir()
	MaxFileSize int64    // files larger are skipped and named; default 100 MiB
	Patterns    []string // default selection; default ["**"]
	// BatchSize bounds the paths of one pathspec-bearing git call (ls-files
	// of removed folders); default 100. Paths cairn stages go through stdin.
	BatchSize int
	// NoCreate opens only a store that exists, failing with ErrNoStore
	// otherwise: reading commands must never create one.
	NoCreate bool
	// Engine seals incremental checkpoints: EngineInproc or EngineGit;
	// default DefaultEngine (docs/cairn-formats.md, "The in-process engine").
	Engine string
}

// ErrNoStore is what Open with NoCreate returns for a workspace without a store.
var ErrNoStore = errors.New("no checkpoints")

// Store is one workspace's shadow repository and ledger. Its methods are safe
// for concurrent use; every write holds the store's file lock, so two processes
// never seal into the same store at once.
type Store struct {
	dir      string // the workspace, as given (absolute)
	layout   Layout
	workTree string
	home     string // folder holding .gitconfig (and, for Hankweave, the store)
	gitDir   string
	ledger   string
	opts     Options
	git      *Git
	// wt is the work tree opened for the operations under way
	// (useWorkTree), held by wtRefs of them; nil between them.
	wtMu   sync.Mutex
	wt     *platform.Tree
	wtRefs int

	mu   sync.Mutex
	held lockHolder // the store lock while withLock holds it
	// orphansOnce kills, before the store lock is first taken, what a
	// cairn that is gone left running on the store (killOrphans).
	orphansOnce sync.Once
	// locksSwept is set (under mu) once the ref locks in the store have
	// been looked at under the store lock, and cleared when a locked
	// operation fails (a git it ran may have been killed holding one).
	locksSwept bool
	// lockWaiters counts callers waiting for mu in withLock: maintenance
	// lets them go before its next locked step.
	lockWaiters atomic.Int32
	// repacking is set (under the lock) while a maintenance repack runs
	// beside seals: the in-process engine does not merge its packs then.
	repacking atomic.Bool
	records   []ckpt.Record // the ledger, plus unwritten
	// ledgerView is records as the last locked operation left them, for
	// readers that must not wait for the lock (Records: a listing while a
	// maintenance step holds it for minutes).
	ledgerView atomic.Pointer[[]ckpt.Record]
	ledgerSize int64
	// unwritten are records whose append failed (a full disk): kept in
	// records and written, in id order, before the next append.
	unwritten []ckpt.Record
	// unwrittenMarks are prune lines whose append failed: applied to
	// records at every load and written before the next append.
	unwrittenMarks []pruneLine
	// issued is the highest id this process handed out, so an id whose
	// record never reached the ledger is not handed out again.
	issued int
	// lastCapture is the newest checkpoint this process captured (held.go):
	// what cairn's index stands for, as lastSealed reads it.
	lastCapture ckpt.Record
	// gitEng seals with git's commands; inproc holds the in-process
	// engine's state, the engine made at its first seal (inprocstate.go).
	gitEng *gitEngine
	inproc *inprocState
	// lastEngine is the engine that sealed the last checkpoint (tests).
	lastEngine string
	// lastOnBase: the in-process engine's last full reconcile applied what
	// it found to a base tree known whole, rather than building every tree
	// (tests).
	lastOnBase bool
	// lastAsked is how many paths the in-process engine's last full
	// reconcile asked of check-ignore (tests).
	lastAsked int
	// lastRestore is the engine that wrote the last restore (tests).
	lastRestore string
	// reexamine names what the last restore left that cairn's index may
	// not describe (restore.go: afterRestore): every seal told what changed
	// looks at these too, until one seals. restoreUnsure: a restore began
	// writing and did not finish; until a seal, every seal reconciles the
	// whole work tree.
	reexamine []string
	// rejudge names, of those, the files cairn's index holds as the
	// target's that ignore rules may cover: a full seal asks check-ignore
	// about them too (restoreWork.forced; a restore of paths' writes).
	rejudge       []string
	restoreUnsure bool
	// notes are what the store repaired by itself, for the workspace's
	// status (TakeNotes).
	notes []string
	// leftOut are the folders seals and restores never enter (leftout.go).
	leftOut atomic.Pointer[LeftOut]
}

// Open finds or creates the store of the workspace at dir.
func Open(ctx context.Context, dir string, opts Options) (*Store, error) {
	gitPath, ver, err := FindGit(ctx)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("workspace %s is not a directory", abs)
	}
	if opts.MaxFileSize <= 0 {
		opts.MaxFileSize = defaultMaxSize
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = 100
	}
	if opts.Patterns == nil {
		opts.Patterns = []string{"**"}
	}
	switch opts.Engine {
	case "", EngineGit, EngineInproc:
	default:
		return nil, fmt.Errorf("unknown engine %q (want %s or %s)", opts.Engine, EngineInproc, EngineGit)
	}
	if _, err := NewSelector(opts.Patterns); err != nil {
		return nil, err
	}
	s := &Store{dir: abs, opts: opts, layout: opts.Layout}
	s.inproc = &inprocState{s: s}
	s.gitEng = &gitEngine{s: s, index: s.inproc}
	if s.layout == "" || s.layout == LayoutAuto {
		s.layout = LayoutPlain
		if fi, err := os.Stat(filepath.Join(abs, ".hankweave")); err == nil && fi.IsDir() {
			s.layout = LayoutHankweave
		}
	}
	switch s.layout {
	case LayoutHankweave:
		s.workTree = abs
		if fi, err := os.Stat(filepath.Join(abs, "agentRoot")); err == nil && fi.IsDir() {
			s.workTree = filepath.Join(abs, "agentRoot")
		}
		s.home = filepath.Join(abs, ".hankweave", "checkpoints")
		s.gitDir = filepath.Join(s.home, hankStoreName)
		s.ledger = filepath.Join(s.home, hankLedgerName)
	case LayoutPlain:
		real, err := filepath.EvalSymlinks(abs)
		if err != nil {
			return nil, err
		}
		state := opts.StateDir
		if state == "" {
			state = platform.DefaultStateDir()
		}
		if state, err = filepath.Abs(state); err != nil {
			return nil, err
		}
		s.workTree = real
		s.home = filepath.Join(state, "stores", PlainStoreName(real))
		s.gitDir = filepath.Join(s.home, "store.git")
		s.ledger = filepath.Join(s.home, plainLedgerName)
		if rel, err := filepath.Rel(real, s.home); err == nil && !strings.HasPrefix(rel, "..") {
			return nil, fmt.Errorf("state directory %s lies inside the workspace %s", state, real)
		}
	default:
		return nil, fmt.Errorf("unknown layout %q (want auto, hankweave or plain)", s.layout)
	}
	s.git = NewGit(gitPath, ver, s.gitDir, s.home)
	s.git.WorkTree, s.git.Index, s.git.held = s.workTree, filepath.Join(s.gitDir, cairnSubdir, "index"), &s.held

	if opts.NoCreate && !s.exists() {
		return nil, fmt.Errorf("%w for %s yet", ErrNoStore, abs)
	}
	if err := s.checkLinks(); err != nil {
		return nil, err
	}
	if s.layout == LayoutPlain {
		// The state directory and its stores folder are created as they
		// are (links on the way allowed); the store's own folders below
		// them refuse links.
		if err := os.MkdirAll(filepath.Dir(s.home), 0o755); err != nil {
			return nil, fmt.Errorf("create %s: %w", s.home, err)
		}
	}
	if err := platform.MkdirAllNoFollow(s.home, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", s.home, err)
	}
	if s.layout == LayoutPlain {
		_ = platform.WriteFileAtomic(filepath.Join(s.home, "workspace"), []byte(s.workTree+"\n"), 0o644)
	}
	// Creating, migrating and sweeping happen under a lock beside the store,
	// since the store's own folder may not exist yet.
	lk, err := lockCtx(ctx, filepath.Join(s.home, ".cairn-init.lock"))
	if err != nil {
		return nil, err
	}
	err = s.ensure(ctx)
	lk.Unlock()
	if err != nil {
		return nil, err
	}
	if err := s.withLock(ctx, func() error { return s.loadLedger(ctx) }); err != nil {
		return nil, err
	}
	return s, nil
}

// Close writes the records a full disk kept out of the ledger, if it can
// now; it is the one place callers stop using a store.
func (s *Store) Close() error {
	s.mu.Lock()
	s.closeEngines()
	pending := len(s.unwritten) > 0 || len(s.unwrittenMarks) > 0
	s.mu.Unlock()
	if !pending {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.withLock(ctx, s.flushUnwritten)
}

// exists reports whether the store (or a legacy one that Open migrates) is on disk.
func (s *Store) exists() bool {
	if _, err := os.Stat(filepath.Join(s.gitDir, "HEAD")); err == nil {
		return true
	}
	if s.layout == LayoutHankweave {
		if _, err := os.Stat(filepath.Join(s.home, ".git", "HEAD")); err == nil {
			return true
		}
	}
	return false
}

// WorkTree is the folder whose files are checkpointed.
func (s *Store) WorkTree() string { return s.workTree }

// GitDir is the store's GIT_DIR.
func (s *Store) GitDir() string { return s.gitDir }

// Dir is the workspace.
func (s *Store) Dir() string { return s.dir }

// Layout is the workspace's resolved layout.
func (s *Store) Layout() Layout { return s.layout }

// LedgerPath is the ledger's file.
func (s *Store) LedgerPath() string { return s.ledger }

// lockCtx takes a file lock, waiting until ctx is done.
func lockCtx(ctx context.Context, path string) (*platform.FileLock, error) {
	delay := 5 * time.Millisecond
	for {
		lk, err := platform.TryLock(path)
		if err == nil {
			return lk, nil
		}
		if !errors.Is(err, platform.ErrLocked) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			if pid := lockPid(path); pid > 0 && !platform.ProcessRunning(pid) {
				// The git processes a killed cairn started hold it (proc.go).
				return nil, fmt.Errorf("waiting for store lock: %w (%s is held by a process cairn pid %d started, which outlived it: a git still running?)", ctx.Err(), path, pid)
			}
			return nil, fmt.Errorf("waiting for store lock: %w (%v)", ctx.Err(), err)
		case <-time.After(delay):
		}
		delay = min(delay*2, 200*time.Millisecond)
	}
}

// lockPid is the pid a lock file names, or 0.
func lockPid(path string) int {
	b, err := readNoFollow(path, maxSmallFile)
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// withLock runs fn holding the in-process mutex and the store's file lock.
func (s *Store) withLock(ctx context.Context, fn func() error) error {
	s.lockWaiters.Add(1)
	s.mu.Lock()
	s.lockWaiters.Add(-1)
	defer s.mu.Unlock()
	defer s.publishLedger() // before the unlock: readers never see an older view after a newer one
	if err := s.checkLinks(); err != nil {
		return err
	}
	s.orphansOnce.Do(func() {
		// A cairn killed mid-repack leaves git's own children (which no
		// parent-death signal reaches and which hold no lock) writing into
		// the store: they go before this cairn touches it.
		if n := killOrphans(s.gitDir); n > 0 {
			s.note(ctx, fmt.Sprintf("stopped %d git processes a cairn that is gone left working on the store", n))
		}
	})
	lk, err := lockCtx(ctx, filepath.Join(s.gitDir, cairnSubdir, "lock"))
	if err != nil {
		return err
	}
	defer lk.Unlock()
	// Every git started until the unlock holds the lock too (proc.go).
	s.held.set(lk.File())
	defer s.held.set(nil)
	defer s.inproc.release() // held for one operation, not between them
	s.clearDeadLocks(ctx)
	err = fn()
	if err != nil {
		s.locksSwept = false
	}
	return err
}

// clearDeadLocks removes the lock files a killed git left in the store:
// HEAD.lock (a restore's detached HEAD) at every locked operation, and the
// refs' locks (a checkpoint's, a pre-restore checkpoint's recovery ref) once
// per Store and after an operation that failed. Left, HEAD.lock failed
// every later restore, and a ref's lock every later move of that ref.
// Called under the store lock: every git cairn starts holds that lock while
// it lives (proc.go), so in a plain store, where only cairn writes, a lock
// file found now has no live holder. In a Hankweave store the runtime
// writes refs too: only a lock over a minute old counts as dead there.
func (s *Store) clearDeadLocks(ctx context.Context) {
	dead := func(p string) {
		fi, err := os.Lstat(p)
		if err != nil || !fi.Mode().IsRegular() {
			return
		}
		if s.layout != LayoutPlain && time.Since(fi.ModTime()) < staleLockAge {
			return
		}
		if err := os.Remove(p); err == nil {
			zerologCtx(ctx).Warn().Str("lock", p).Msg("removed a lock file a killed git left in the store")
		}
	}
	dead(filepath.Join(s.gitDir, "HEAD.lock"))
	if s.locksSwept {
		return
	}
	s.locksSwept = true
	_ = filepath.WalkDir(filepath.Join(s.gitDir, "refs"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && strings.HasSuffix(p, ".lock") {
			dead(p)
		}
		return nil
	})
}

// ensure creates, migrates or completes the store. Callers hold the init lock.
func (s *Store) ensure(ctx context.Context) error {
	s.sweepTemp()
	s.sweepTmpObjects(staleTmpAge)
	s.recoverOrphanPacks(ctx, staleTmpAge)
	if s.layout == LayoutHankweave {
		if err := s.migrateLegacy(); err != nil {
			return err
		}
	}
	gc := filepath.Join(s.home, ".gitconfig")
	if _, err := os.Lstat(gc); errors.Is(err, fs.ErrNotExist) {
		content := plainGitconfig
		if s.layout == LayoutHankweave {
			content = hankGitconfig
		}
		if err := platform.WriteFileAtomic(gc, []byte(content), 0o644); err != nil {
			return err
		}
	}
	if _, err := os.Stat(filepath.Join(s.gitDir, "HEAD")); err != nil {
		if err := s.create(ctx); err != nil {
			return err
		}
	}
	if err := platform.MkdirAllNoFollow(filepath.Join(s.gitDir, cairnSubdir), 0o755); err != nil {
		return err
	}
	s.createIDCounter()
	return s.configure(ctx, s.git)
}

// tempPrefix names folders a store is built in before it is renamed into place.
func (s *Store) tempPrefix() string { return filepath.Base(s.gitDir) + "-tmp-" }

// PlainStoreName is the folder, under the state directory's stores/, of the
// plain-layout store of the workspace whose real path is real.
func PlainStoreName(real string) string {
	sum := sha256.Sum256([]byte(real))
	return filepath.Base(real) + "-" + hex.EncodeToString(sum[:8])
}

// sweepTemp removes stores left half-built by a crash.
func (s *Store) sweepTemp() {
	ents, _ := os.ReadDir(s.home)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), s.tempPrefix()) {
			_ = os.RemoveAll(filepath.Join(s.home, e.Name()))
		}
	}
}

// staleTmpAge is how old a temporary object file must be before a sweep that
// may race another writer removes it: git finishes one in far less.
const staleTmpAge = 5 * time.Minute

// sweepTmpObjects removes temporary files git and gitobj leave in objects/
// when a write fails (a full disk leaves empty tmp_obj_* behind for good; git
// fsck warns), and the temporary files cairn writes beside its position and
// stat cache. Only files whose whole name is such a temporary file's
// (tmp_obj_*, tmp_pack_*, tmp_idx_*, tmp_rev_*, tmp_mtimes_*, tmp_bitmap_*,
// cairn/position.tmp-<pid>, cairn/statcache.tmp-<pid>, cairn/restoring.tmp-<pid>)
// and that are older than minAge go: another git may be writing younger ones.
// Nothing else is removed: a pack without its index is indexed at open
// (recoverOrphanPacks).
func (s *Store) sweepTmpObjects(minAge time.Duration) {
	objects := filepath.Join(s.gitDir, "objects")
	sweep := func(dir string, name *regexp.Regexp, age time.Duration) {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return
		}
		for _, e := range ents {
			if e.IsDir() || !name.MatchString(e.Name()) {
				continue
			}
			p := filepath.Join(dir, e.Name())
			if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() && time.Since(fi.ModTime()) >= age {
				_ = os.Remove(p)
			}
		}
	}
	ents, err := os.ReadDir(objects)
	if err != nil {
		return
	}
	sweep(objects, tmpObjectName, minAge)
	for _, e := range ents {
		if e.IsDir() && hexDir.MatchString(e.Name()) {
			sweep(filepath.Join(objects, e.Name()), tmpObjectName, minAge)
		}
	}
	sweep(filepath.Join(objects, "pack"), tmpPackName, minAge)
	sweep(filepath.Join(objects, "pack"), repackTmpName, max(minAge, staleTmpAge)) // a live repack's: only old ones
	// A live writer of these holds the store's lock, which a sweep in a
	// seal holds too: only old ones, whatever the caller allows.
	sweep(filepath.Join(s.gitDir, cairnSubdir), cairnTmpName, max(minAge, staleTmpAge))
}

// migrateLegacy renames a pre-0.10 `checkpoints/.git` into place, or
// quarantines it when a current store already exists.
func (s *Store) migrateLegacy() error {
	legacy := filepath.Join(s.home, ".git")
	if fi, err := os.Lstat(legacy); err != nil || !fi.IsDir() {
		return nil
	}
	if _, err := os.Lstat(s.gitDir); errors.Is(err, fs.ErrNotExist) {
		if err := os.Rename(legacy, s.gitDir); err != nil {
			return fmt.Errorf("migrate legacy store %s: %w", legacy, err)
		}
		return platform.SyncDir(s.home)
	}
	q := filepath.Join(s.home, hankStoreName+"-quarantine-"+stamp19(time.Now()))
	if err := os.Rename(legacy, q); err != nil {
		return fmt.Errorf("quarantine legacy store %s: %w", legacy, err)
	}
	return platform.SyncDir(s.home)
}

// stamp19 is the runtime's timestamp for quarantine and backup names
// (docs/runtime-formats.md, "The store and its identity").
func stamp19(t time.Time) string {
	r := strings.NewReplacer(":", "-", ".", "-")
	return r.Replace(isoTime(t))[:19]
}

// isoTime formats like JavaScript's toISOString, as the runtime does.
func isoTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// create builds a new store in a temporary folder and renames it into place,
// so a crash never leaves half a store.
func (s *Store) create(ctx context.Context) error {
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(s.home, s.tempPrefix()+hex.EncodeToString(rnd[:]))
	g := *s.git
	g.Dir, g.WorkTree, g.Index = tmp, "", filepath.Join(tmp, cairnSubdir, "index")
	// The store is its owner's alone (docs/operating.md, "Where checkpoints live"): its
	// folder is 0700 from the start, so nothing in it is reachable by
	// others whatever the modes git and the in-process engine give files
	// (core.sharedRepository is left unset: the in-process engine writes
	// objects only where it is).
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return fmt.Errorf("create store %s: %w", s.gitDir, err)
	}
	if _, err := g.Run(ctx, nil, "init", "-q", "--initial-branch=main"); err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("create store %s: %w", s.gitDir, err)
	}
	err := func() error {
		if err := platform.MkdirAllNoFollow(filepath.Join(tmp, cairnSubdir), 0o700); err != nil {
			return err
		}
		if err := s.configure(ctx, &g); err != nil {
			return err
		}
		tree, err := g.Run(ctx, nil, "mktree")
		if err != nil {
			return err
		}
		now := isoTime(time.Now())
		c, err := g.withEnv("GIT_AUTHOR_DATE="+now, "GIT_COMMITTER_DATE="+now).
			Run(ctx, strings.NewReader(initialMessage+"\n"), "commit-tree", strings.TrimSpace(string(tree)), "-F", "-")
		if err != nil {
			return err
		}
		if _, err := g.Run(ctx, nil, "update-ref", "refs/heads/main", strings.TrimSpace(string(c)), zeroSHA); err != nil {
			return err
		}
		return platform.SyncFS(tmp)
	}()
	if err == nil {
		err = os.Rename(tmp, s.gitDir)
	}
	if err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("create store %s: %w", s.gitDir, err)
	}
	return platform.SyncDir(s.home)
}

// configure sets the store's config for durability and quiet. Only the
// store's own config file is written.
func (s *Store) configure(ctx context.Context, g *Git) error {
	sets := [][2]string{
		{"core.bare", "false"},
		{"core.autocrlf", "false"},
		{"core.safecrlf", "false"},
		{"core.symlinks", "true"},
		{"core.ignoreCase", "false"},
		{"core.hooksPath", "/dev/null"},
		{"core.untrackedCache", "false"},
		{"gc.auto", "0"},
		{"maintenance.auto", "false"},
		{"commit.gpgSign", "false"},
	}
	// Refs and packs (a maintenance repack's) are fsynced by git where it
	// can (2.36+). Loose objects are not, one by one: the git engine flushes
	// the filesystem once before a ref moves (measured: per-object fsync
	// tripled a 100k-file first seal); the in-process engine fsyncs what it
	// wrote (gitobj.DB.Sync).
	if g.Version.AtLeast(Version{2, 36, 0}) {
		sets = append(sets, [2]string{"core.fsync", "reference,pack"})
	}
	cfg := filepath.Join(g.Dir, "config")
	have, _ := os.ReadFile(cfg)
	for _, kv := range sets {
		if hasConfig(string(have), kv[0], kv[1]) {
			continue
		}
		if _, err := g.Run(ctx, nil, "config", "--file", cfg, kv[0], kv[1]); err != nil {
			return err
		}
	}
	for name, content := range map[string]string{"exclude": infoExclude, "attributes": infoAttributes} {
		p := filepath.Join(g.Dir, "info", name)
		if b, err := os.ReadFile(p); err == nil && string(b) == content {
			continue
		}
		if err := platform.MkdirAllNoFollow(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := platform.WriteFileAtomic(p, []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// hasConfig is a cheap check that spares a git call per key on every open;
// a false "no" only costs a redundant `git config`.
func hasConfig(cfg, key, val string) bool {
	_, name, _ := strings.Cut(key, ".")
	return strings.Contains(strings.ToLower(cfg), strings.ToLower("\t"+name+" = "+val+"\n"))
}

// withEnv returns a copy of g that adds env to every call.
func (g *Git) withEnv(env ...string) *Git {
	c := *g
	c.Extra = append(append([]string(nil), g.Extra...), env...)
	return &c
}
