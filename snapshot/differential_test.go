//go:build unix

package snapshot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/platform/testsupport"
	"github.com/cairn-dev/cairn/restore/ckpt"
)

// The differential test (issue 22): random, reproducible sequences of
// real-world operations on a work tree, sealed by each engine in its own
// store over its own copy of the tree, and after every seal the checkpoint is
// compared with git's own view of the tree, computed here independently of
// cairn's staging: a temporary index, `ls-files -o --exclude-standard`,
// cairn's documented filters (exclusions, regular files, the selection, the
// size limit, nested repositories as stage.go records them), `update-index
// --add`, `write-tree`, `diff-tree -r`. Every object a checkpoint names must
// be in the store.
//
// CAIRN_DIFF_TIME (a Go duration) sets the budget of each file system's run
// (default a few seconds); CAIRN_DIFF_SEED replays one sequence;
// CAIRN_DIFF_OPS (comma-separated op names) restricts the operations, to
// narrow a failure down; CAIRN_DIFF_STEPS sets the steps of a sequence;
// CAIRN_DIFF_LOG=1 logs every sequence's op log, not only a failing one's;
// CAIRN_DIFF_DUMP=1 logs, on a failure, every checkpoint's files and the
// work tree (with each .gitignore's rules).

const (
	diffDefaultBudget = 3 * time.Second
	diffMaxFileSize   = 2 << 20 // Options.MaxFileSize of the stores: the "big" op goes past it
)

// diffPatterns is the selection of every store: all but *.tmp files.
var diffPatterns = []string{"**", "!**/*.tmp"}

// TestDifferential runs the differential test on the ordinary temporary file
// system and, as root with mkfs.ext4, on an ext4 with 1-second timestamps.
func TestDifferential(t *testing.T) {
	budget := diffDefaultBudget
	if v := os.Getenv("CAIRN_DIFF_TIME"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("CAIRN_DIFF_TIME=%q: %v", v, err)
		}
		budget = d
	}
	hostGitPath(t)
	t.Run("tmp", func(t *testing.T) {
		t.Parallel()
		diffRun(t, func(t *testing.T) string { return t.TempDir() }, budget)
	})
	t.Run("ext4-1s", func(t *testing.T) {
		t.Parallel()
		mnt := testsupport.MountExt4Coarse(t, 256<<20)
		diffRun(t, func(t *testing.T) string {
			d, err := os.MkdirTemp(mnt, "wt")
			if err != nil {
				t.Fatal(err)
			}
			// Each sequence's, gone with it: a long run's sequences would
			// fill the small file system otherwise.
			t.Cleanup(func() { os.RemoveAll(d) })
			return d
		}, budget)
	})
}

// diffRun plays sequences, each from its own seed, until the budget is spent
// (at least one sequence).
func diffRun(t *testing.T, workDir func(*testing.T) string, budget time.Duration) {
	steps := 30
	if v := os.Getenv("CAIRN_DIFF_STEPS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("CAIRN_DIFF_STEPS=%q", v)
		}
		steps = n
	}
	if v := os.Getenv("CAIRN_DIFF_SEED"); v != "" {
		seed, err := strconv.ParseUint(v, 0, 64)
		if err != nil {
			t.Fatalf("CAIRN_DIFF_SEED=%q: %v", v, err)
		}
		diffSequence(t, workDir(t), &rngChooser{rand.New(rand.NewPCG(seed, seed))}, fmt.Sprintf("CAIRN_DIFF_SEED=%d", seed), steps, time.Time{})
		return
	}
	deadline := time.Now().Add(budget)
	base := uint64(time.Now().UnixNano())
	for i := uint64(0); i == 0 || time.Now().Before(deadline); i++ {
		seed := base + i
		ok := t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			diffSequence(t, workDir(t), &rngChooser{rand.New(rand.NewPCG(seed, seed))}, fmt.Sprintf("CAIRN_DIFF_SEED=%d", seed), steps, deadline)
		})
		if !ok {
			return
		}
	}
}

// FuzzDifferential drives the same sequences from the fuzzer's bytes:
// `go test -fuzz FuzzDifferential -run '^$' ./snapshot/`.
func FuzzDifferential(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25})
	f.Add([]byte("self-ignoring folder swapped for a plain one, twice over"))
	f.Add([]byte{17, 17, 17, 200, 3, 91, 44, 250, 128, 7, 7, 1, 60, 60, 60, 2, 99, 13, 5, 5, 5, 5})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 400 {
			data = data[:400]
		}
		diffSequence(t, t.TempDir(), &bytesChooser{data: data}, fmt.Sprintf("fuzz input %x", data), 40, time.Time{})
	})
}

// chooser is where a sequence's choices come from: a seeded generator or
// the fuzzer's bytes.
type chooser interface {
	intn(n int) int
	done() bool
}

type rngChooser struct{ r *rand.Rand }

func (c *rngChooser) intn(n int) int { return c.r.IntN(n) }
func (c *rngChooser) done() bool     { return false }

type bytesChooser struct {
	data []byte
	out  bool
}

func (c *bytesChooser) intn(n int) int {
	if len(c.data) == 0 {
		c.out = true
		return 0
	}
	v := int(c.data[0])
	c.data = c.data[1:]
	if n > 256 && len(c.data) > 0 {
		v = v<<8 | int(c.data[0])
		c.data = c.data[1:]
	}
	return v % n
}
func (c *bytesChooser) done() bool { return c.out }

// diffWorld is one engine's store over its own work tree.
type diffWorld struct {
	engine  string
	root    string // the work tree
	outside string // a folder beside it, to move things out of and into the tree
	st      *Store
	view    string // the test's own index, objects and HOME
	state   string // the store's state directory
	full    bool   // the state directory is a small tmpfs (ENOSPC op)
	dirty   map[string]bool
	lastSHA string   // the last checkpoint sealed
	shas    []string // every checkpoint sealed, in order: a restore's targets
	// evs says at which event of the sequence each of shas was sealed (a
	// step's seal, or a capture published in it), and ev is the event under
	// way: a restore picks a checkpoint both worlds sealed at the same event
	// (one world's failed seal would otherwise shift the other's targets).
	evs    []int
	ev     int
	stash  [][2]string
	filler string
	// stores counts the stores opened over the work tree; reopened makes
	// the next seal a full one (a new store's first seal).
	stores   int
	reopened bool
	// stateDir is the state folder of the store open now.
	stateDir string
	// held is a capture (held.go) not yet published or discarded, made in
	// the store heldIn.
	held   *Held
	heldIn *Store
}

// diffStep is one step of the log: ops and the seal that followed.
type diffStep struct {
	ops  []string
	seal string
}

func diffSequence(t *testing.T, base string, c chooser, replay string, steps int, deadline time.Time) {
	git := hostGitPath(t)
	allowed := map[string]bool{}
	if v := os.Getenv("CAIRN_DIFF_OPS"); v != "" {
		for _, n := range strings.Split(v, ",") {
			allowed[strings.TrimSpace(n)] = true
		}
	}
	var tmpfs string
	if os.Geteuid() == 0 {
		tmpfs = tryTmpfs(t, "48m")
	}
	var worlds []*diffWorld
	for _, eng := range []string{EngineGit, EngineInproc} {
		w := &diffWorld{engine: eng, dirty: map[string]bool{}}
		w.root = filepath.Join(base, eng, "work")
		w.outside = filepath.Join(base, eng, "outside")
		w.view = t.TempDir()
		for _, d := range []string{w.root, w.outside, filepath.Join(w.view, "home"), filepath.Join(w.view, "objects")} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		w.state = t.TempDir()
		if tmpfs != "" {
			w.state, w.full = filepath.Join(tmpfs, eng), true
		}
		worlds = append(worlds, w)
	}
	// The starting tree, the same in each world.
	start := []diffOp{opPut("seed file", "f0", "zero\n", 0o644), opPut("seed file", "a/x.txt", "ax\n", 0o644),
		opPut("seed file", "a/b/f1", "one\n", 0o755), opPut("seed ignore", ".gitignore", "*.log\n", 0o644),
		opPut("seed file", "c d/keep.log", "kept?\n", 0o644)}
	var log []diffStep
	first := diffStep{seal: "open, full reconcile"}
	for _, op := range start {
		first.ops = append(first.ops, op.desc)
		for _, w := range worlds {
			op.do(t, w)
		}
	}
	log = append(log, first)
	logText := func() string {
		var b strings.Builder
		for i, s := range log {
			fmt.Fprintf(&b, "  step %d: %s\n", i, s.seal)
			for _, o := range s.ops {
				fmt.Fprintf(&b, "    %s\n", o)
			}
		}
		return b.String()
	}
	logged := false // fail printed the op log
	if os.Getenv("CAIRN_DIFF_LOG") != "" {
		defer func() { t.Logf("%s: op log:\n%s", replay, logText()) }()
	} else {
		// An op that fails (t.Fatal in its do) prints what led there too.
		defer func() {
			if t.Failed() && !logged {
				t.Logf("replay: %s (CAIRN_DIFF_STEPS=%d)\nop log so far:\n%s", replay, len(log)-1, logText())
			}
		}()
	}
	fail := func(w *diffWorld, format string, args ...any) {
		t.Helper()
		logged = true
		if os.Getenv("CAIRN_DIFF_DUMP") != "" {
			for _, sha := range w.shas {
				out, err := w.st.git.Run(context.Background(), nil, "ls-tree", "-r", "-z", sha)
				t.Logf("checkpoint %.12s (%v):\n%q", sha, err, splitNul(out))
			}
			var tree []string
			filepath.WalkDir(w.root, func(abs string, d fs.DirEntry, err error) error {
				if d != nil && d.IsDir() && d.Name() == ".git" {
					return filepath.SkipDir
				}
				if b, rerr := readNoFollow(abs, 1<<20); rerr == nil && d.Name() == ".gitignore" {
					tree = append(tree, fmt.Sprintf("%s = %q", relOf(w.root, abs), b))
				} else {
					tree = append(tree, relOf(w.root, abs))
				}
				return nil
			})
			t.Logf("work tree:\n%s", strings.Join(tree, "\n"))
		}
		t.Fatalf("%s; engine %s: %s\nreplay: %s (CAIRN_DIFF_STEPS=%d)\nop log:\n%s", replay, w.engine, fmt.Sprintf(format, args...), replay, len(log)-1, logText())
	}
	for _, w := range worlds {
		w.stateDir = w.state
		w.st = openTestStore(t, w.root, Options{Engine: w.engine, StateDir: w.stateDir, MaxFileSize: diffMaxFileSize, Patterns: diffPatterns})
		rec, err := w.st.Seal(context.Background(), SealRequest{Kind: ckpt.KindManual})
		if err != nil || rec.SHA == "" {
			t.Fatalf("first seal (%s): %+v, %v", w.engine, rec, err)
		}
		w.lastSHA = rec.SHA
		w.keep(rec.SHA)
		if msg := w.check(t, git, rec); msg != "" {
			fail(w, "%s", msg)
		}
	}
	var recent []string
	fullNext := false // the seal after a restore: a full reconcile, or told (restoreStep's caller)
	for step := 1; step <= steps && !c.done(); step++ {
		if !deadline.IsZero() && time.Now().After(deadline) {
			break
		}
		// Each op is picked by the first world's tree as the ops before it left it.
		var ops []diffOp
		n := 1
		if c.intn(2) == 0 {
			n += c.intn(4)
		}
		s := diffStep{}
		changed := map[string]bool{}
		for len(ops) < n {
			op, ok := genOp(t, c, worlds[0], recent, allowed)
			if !ok {
				break
			}
			ops = append(ops, op)
			s.ops = append(s.ops, op.desc)
			var got [][]string
			for _, w := range worlds {
				got = append(got, op.do(t, w))
			}
			for _, p := range got[0] {
				changed[p] = true
			}
		}
		recent = recent[:0]
		for p := range changed {
			recent = append(recent, p)
		}
		slices.Sort(recent)
		full := c.intn(8) == 0 || fullNext
		fullNext = false
		kind := ckpt.KindManual
		skip := false
		if c.intn(3) == 0 {
			kind, skip = ckpt.KindAutosave, c.intn(2) == 0
		}
		// Now and then a capture (a rig-setup held until published, or
		// discarded), resolved at once or after the next step's seal.
		capture, later, discard := false, false, false
		if (len(allowed) == 0 || allowed["capture"]) && !skip && !c.done() && c.intn(6) == 0 {
			capture, later, discard = true, c.intn(2) == 0, c.intn(3) == 0
		}
		s.seal = fmt.Sprintf("seal %s", kind)
		if capture {
			s.seal = "capture rig-setup"
		}
		if skip {
			s.seal += " (skip unchanged)"
		}
		if full {
			s.seal += ", full reconcile"
		} else {
			s.seal += fmt.Sprintf(", changed %q (+ paths still dirty)", recent)
		}
		log = append(log, s)
		failed := map[string]bool{} // the worlds whose seal failed
		for _, w := range worlds {
			for p := range changed {
				w.dirty[p] = true
			}
			req := SealRequest{Kind: kind, SkipUnchanged: skip}
			if w.reopened {
				log[len(log)-1].seal += fmt.Sprintf("; %s: a new store's first seal", w.engine)
			}
			if !full && !w.reopened {
				req.Changed = []string{}
				for p := range w.dirty {
					req.Changed = append(req.Changed, p)
				}
				slices.Sort(req.Changed)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			w.ev = 3 * step
			pending, pendingIn := w.held, w.heldIn
			var rec ckpt.Record
			var err error
			if capture {
				req.Kind, req.RunID, req.CodonID = ckpt.KindRigSetup, "r", fmt.Sprintf("c%d", step)
				var h Held
				h, err = w.st.Capture(ctx, req)
				rec = h.Record
				if err == nil {
					w.held, w.heldIn = &h, w.st
				}
			} else {
				rec, err = w.st.Seal(ctx, req)
			}
			cancel()
			w.reopened = false
			switch {
			case rec.State == ckpt.StateFailed:
				// No checkpoint; the paths stay dirty for the next seal.
				failed[w.engine] = true
				if rec.SHA != "" {
					fail(w, "seal %s failed (%v) yet names checkpoint %s", rec.ID, err, rec.SHA)
				}
				log[len(log)-1].seal += fmt.Sprintf("; %s: failed: %.200s", w.engine, rec.Error)
			case rec.SHA == "" && err == nil && skip:
				// Skipped as unchanged: the last checkpoint must still be git's view.
				log[len(log)-1].seal += fmt.Sprintf("; %s: skipped as unchanged", w.engine)
				// Skipping claims the store's position (the checkpoint the work
				// tree was last sealed from or restored to; captures and their
				// publishing move it too) holds what is on disk.
				pos := w.st.position()
				if pos == "" {
					// Nothing sealed yet in a new store: the seal compared with
					// the commit the store starts from (empty, as Hankweave's).
					out, err := w.viewGit(t, git, true, nil, "rev-parse", "--verify", "HEAD^{commit}")
					if err != nil {
						t.Fatalf("a new store's start: %v", err)
					}
					pos = strings.TrimSpace(string(out))
				}
				if msg := w.check(t, git, ckpt.Record{SHA: pos, State: ckpt.StateOK}); msg != "" {
					fail(w, "autosave skipped as unchanged, but the position (%s) is not git's view: %s", pos, msg)
				}
				clear(w.dirty)
			case rec.SHA == "":
				fail(w, "seal returned no checkpoint and no failed record: %+v, %v", rec, err)
			default:
				log[len(log)-1].seal += fmt.Sprintf("; %s: %s %s by %s", w.engine, rec.ID, rec.State, w.st.lastEngine)
				if len(rec.Issues) > 0 {
					log[len(log)-1].seal += fmt.Sprintf(" issues %q", issuePaths(rec.Issues))
				}
				if msg := w.check(t, git, rec); msg != "" {
					fail(w, "%s", msg)
				}
				if !capture { // a capture is no checkpoint until published
					w.lastSHA = rec.SHA
					w.keep(rec.SHA)
				}
				clear(w.dirty)
				for _, is := range rec.Issues {
					w.dirty[is.Path] = true // stays dirty until a checkpoint holds it
				}
			}
			// A capture held over from the last step is resolved after this
			// step's seal; this step's, at once unless it waits a step.
			if pending != nil {
				w.ev = 3*step + 1
				log[len(log)-1].seal += "; " + w.engine + ": " + w.resolveHeld(t, pending, pendingIn, discard, fail)
			}
			if capture && !later && w.held != nil && w.held != pending {
				w.ev = 3*step + 2
				log[len(log)-1].seal += "; " + w.engine + ": " + w.resolveHeld(t, w.held, w.heldIn, discard, fail)
			}
		}
		for _, op := range ops {
			if op.after != nil {
				for _, w := range worlds {
					op.after(t, w)
				}
			}
		}
		if len(failed) == 1 && slices.ContainsFunc(ops, func(op diffOp) bool { return op.uneven }) {
			log[len(log)-1].seal += "; the worlds' ledgers differ from here by design: the sequence ends"
			break
		}
		// Now and then, a restore of each world to one of its earlier
		// checkpoints (the same one in each), compared with git's checkout.
		both := commonEvents(worlds[0], worlds[1])
		n = len(both)
		if (len(allowed) == 0 || allowed["restore"]) && n > 1 && !c.done() && c.intn(5) == 0 {
			k := c.intn(n - 1)
			watched := c.intn(2) == 0
			rs := diffStep{seal: fmt.Sprintf("restore to checkpoint #%d", k)}
			if watched {
				rs.seal += " (told the dirty set)"
			}
			// Now and then changes made since the last seal, which only the
			// pre-restore checkpoint holds (a file created is kept).
			if c.intn(2) == 0 {
				for range 1 + c.intn(3) {
					op, ok := genOp(t, c, worlds[0], recent, allowed)
					if !ok {
						break
					}
					rs.ops = append(rs.ops, op.desc)
					for _, w := range worlds {
						for _, p := range op.do(t, w) {
							w.dirty[p] = true
						}
						if op.after != nil {
							op.after(t, w)
						}
					}
				}
			}
			// An op may have replaced a store (its checkpoints gone with it):
			// the target is one both worlds still keep.
			if both = commonEvents(worlds[0], worlds[1]); k >= len(both) {
				rs.seal += "; no checkpoint left to restore to"
				log = append(log, rs)
				continue
			}
			// One restore in three is of a few paths only (cairn restore
			// --path): compared with git's checkout of those paths.
			var paths []string
			if c.intn(3) == 0 {
				w0 := worlds[0]
				paths = pickRestorePaths(t, c, w0, w0.shas[slices.Index(w0.evs, both[k])])
				rs.seal += fmt.Sprintf(", paths %q", paths)
			}
			log = append(log, rs)
			parted := false
			for _, w := range worlds {
				note, msg, p := w.restoreStep(t, w.shas[slices.Index(w.evs, both[k])], watched, paths)
				log[len(log)-1].seal += "; " + w.engine + ": " + note
				if msg != "" {
					fail(w, "%s", msg)
				}
				parted = parted || p
			}
			if parted {
				// One world left a path as it was, by design, where git's
				// checkout replaces it (or refused the restore): the ops
				// picked from one world's tree would not apply to the other.
				log[len(log)-1].seal += "; the worlds part here by design: the sequence ends"
				break
			}
			// git's restore may leave folders emptied before it, which the
			// in-process one (as git's checkout) removes; no checkpoint
			// holds a folder, but the next ops are picked from the first
			// world's tree: the worlds are made the same again.
			for _, w := range worlds {
				if w.engine == EngineGit {
					for _, o := range worlds {
						if o.engine != EngineGit {
							pruneEmptyFoldersLike(t, w.root, o.root)
						}
					}
				}
			}
			// The seal after it: now and then a full reconcile; else told
			// what changes next, the dirty set kept or forgotten (the store
			// adds what the restore left: kept, written, deleted paths).
			fullNext = c.intn(3) == 0
			if !fullNext && c.intn(2) == 0 {
				for _, w := range worlds {
					clear(w.dirty)
				}
				log[len(log)-1].seal += "; dirty sets forgotten"
			}
			// Now and then the next seal is another process's (`cairn
			// checkpoint` after `cairn restore`, no daemon): what the
			// restore left it comes from the store, not from memory.
			if worlds[0].held == nil && worlds[1].held == nil && c.intn(4) == 0 {
				for _, w := range worlds {
					w.st.Close()
					w.st = openTestStore(t, w.root, Options{Engine: w.engine, StateDir: w.stateDir, MaxFileSize: diffMaxFileSize, Patterns: diffPatterns})
				}
				log[len(log)-1].seal += "; stores closed and opened again"
			}
		}
	}
}

// pruneEmptyFoldersLike removes the folders under root that hold no file
// (at any depth) and that ref lacks at the same path.
func pruneEmptyFoldersLike(t *testing.T, root, ref string) {
	t.Helper()
	var empty []string
	filepath.WalkDir(root, func(abs string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() || abs == root {
			return nil
		}
		if d.Name() == ".git" {
			return filepath.SkipDir
		}
		rel := relOf(root, abs)
		if _, err := os.Lstat(filepath.Join(ref, filepath.FromSlash(rel))); err == nil {
			return nil
		}
		files := false
		filepath.WalkDir(abs, func(_ string, e fs.DirEntry, err error) error {
			if err == nil && !e.IsDir() {
				files = true
				return filepath.SkipAll
			}
			return nil
		})
		if !files {
			empty = append(empty, abs)
			return filepath.SkipDir
		}
		return nil
	})
	for _, abs := range empty {
		if err := os.RemoveAll(abs); err != nil {
			t.Fatal(err)
		}
	}
}

// keep notes checkpoint sha, sealed at the event under way, as a restore's target.
func (w *diffWorld) keep(sha string) {
	w.shas = append(w.shas, sha)
	w.evs = append(w.evs, w.ev)
}

// commonEvents lists the events at which both worlds sealed a checkpoint
// they still keep, in order.
func commonEvents(a, b *diffWorld) []int {
	var out []int
	for _, e := range a.evs {
		if slices.Contains(b.evs, e) && !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return out
}

// resolveHeld publishes or discards the capture h, checking that a
// published one holds the captured tree and time on the run's branch.
func (w *diffWorld) resolveHeld(t *testing.T, h *Held, in *Store, discard bool, fail func(*diffWorld, string, ...any)) string {
	t.Helper()
	if w.held == h {
		w.held = nil
	}
	if in != w.st { // the capture was made in a store replaced since
		return "capture " + h.Record.ID + " went with its store"
	}
	ctx := context.Background()
	if discard {
		if err := w.st.Discard(ctx, *h); err != nil {
			fail(w, "discard %s: %v", h.Record.ID, err)
		}
		return "capture " + h.Record.ID + " discarded"
	}
	rec, err := w.st.Publish(ctx, *h)
	switch {
	case err != nil && w.full:
		return fmt.Sprintf("publish %s failed on a full disk: %.200v", h.Record.ID, err)
	case err != nil && !w.full:
		fail(w, "publish %s: %v", h.Record.ID, err)
	}
	if treeOf(t, w.st, rec.SHA) != treeOf(t, w.st, h.Record.SHA) || !rec.Time.Equal(h.Record.Time) {
		fail(w, "published %s (%s at %v) does not hold capture %s (%s at %v)", rec.ID, rec.SHA, rec.Time, h.Record.ID, h.Record.SHA, h.Record.Time)
	}
	if tip, _ := w.st.Resolve(ctx, "refs/heads/run-r"); tip != rec.SHA {
		fail(w, "run-r at %s after publishing %s", tip, rec.SHA)
	}
	if rec.SHA == h.Record.SHA { // published as captured, nothing sealed since: the position
		w.lastSHA = rec.SHA
	}
	w.keep(rec.SHA)
	return "capture " + h.Record.ID + " published as " + rec.ID
}

// declined reports whether the restore left p as it was on purpose: p is
// what it was before the restore, and at, under or above a path the restore
// names as not written.
func declined(p string, before, got map[string]diskEntry, issues []ckpt.PathIssue) bool {
	b, had := before[p]
	g, has := got[p]
	if had != has || b != g {
		return false
	}
	for _, is := range issues {
		if p == is.Path || strings.HasPrefix(p, is.Path+"/") || strings.HasPrefix(is.Path, p+"/") {
			return true
		}
	}
	return false
}

// restoreStep restores the world to target and compares its work tree,
// file by file, with git's `checkout --force` of the same target in a copy
// of the work tree taken just before (gitCheckoutRef). It returns a note
// for the log and, when they differ, why.
func (w *diffWorld) restoreStep(t *testing.T, target string, watched bool, paths []string) (note, fail string, parted bool) {
	t.Helper()
	pos := w.st.Position()
	if paths != nil {
		// The worlds may differ by now (a restore leaves, by design, what
		// git's checkout would replace): only the paths this world's
		// position or target holds something at, as git takes them.
		paths = heldPaths(t, w.st, paths, pos, target)
		// Nor one below a file on disk: cairn leaves, by design, a file
		// outside the paths asked for where the target needs a folder,
		// which git's checkout replaces; the worlds would part there and
		// the ops picked from one would not apply to the other.
		paths = slices.DeleteFunc(paths, func(p string) bool {
			for d := path.Dir(p); d != "."; d = path.Dir(d) {
				if fi, err := os.Lstat(w.abs(d)); err == nil && !fi.IsDir() {
					return true
				}
			}
			return false
		})
		if len(paths) == 0 {
			return "no picked path held here: not restored", "", false
		}
	}
	ref := t.TempDir()
	copyTree(t, w.root, ref)
	before := scanDisk(t, w.root)
	req := ckpt.Request{Target: target, Label: "diff", Paths: paths}
	if watched {
		req.Changed = []string{}
		for p := range w.dirty {
			req.Changed = append(req.Changed, p)
		}
		slices.Sort(req.Changed)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	res, err := w.st.Restore(ctx, req)
	cancel()
	var dmg *ckpt.TargetDamagedError
	switch {
	case errors.As(err, &dmg):
		if d := diskDiff(before, scanDisk(t, w.root)); d != "" {
			return "refused", fmt.Sprintf("the refused restore (%v) changed the work tree:\n    %s", err, d), false
		}
		return fmt.Sprintf("refused: %.200s", err), "", false
	case errors.Is(err, ErrCannotHoldInTheWay):
		if d := diskDiff(before, scanDisk(t, w.root)); d != "" {
			return "refused", fmt.Sprintf("the refused restore (%v) changed the work tree:\n    %s", err, d), true
		}
		return fmt.Sprintf("refused: %.200s", err), "", true
	case err != nil && w.full && strings.Contains(err.Error(), "no space"):
		return fmt.Sprintf("failed: %.200s", err), "", false
	case err != nil:
		return "failed", fmt.Sprintf("restore to %s: %v", target, err), false
	}
	note = fmt.Sprintf("restored by %s, %d written, %d deleted, %d kept", w.st.lastRestore, len(res.Write), len(res.Delete), res.Kept)
	if len(res.Diff) > 0 {
		note += fmt.Sprintf(", not as the target: %v", res.Diff)
	}
	if len(paths) == 0 {
		gitCheckoutRef(t, w.st, ref, pos, target)
	} else {
		gitCheckoutPaths(t, w.st, ref, pos, target, paths)
	}
	want, got := scanDisk(t, ref), scanDisk(t, w.root)
	if w.engine == EngineGit {
		dropEmptyFolders(want, got)
	}
	// One difference is cairn's by design: a file the pre-restore
	// checkpoint lacks (an ignored one) standing where the target needs a
	// folder, or inside a folder where the target needs a file, is never
	// deleted (git's checkout deletes it); the restore leaves it as it was
	// and names the path it could not write.
	for p := range want {
		if got[p] != want[p] && declined(p, before, got, res.Diff) {
			delete(want, p)
			delete(got, p)
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok && declined(p, before, got, res.Diff) {
			delete(got, p)
		}
	}
	// Another: a file the position holds and the pre-restore checkpoint
	// lacks (ignore rules written since the last checkpoint) is left as it
	// was; cairn deletes only what both hold, while git's index still tracks
	// it and its checkout deletes it.
	if res.PreRestore != nil {
		pre := lsTree(t, w.st, res.PreRestore.SHA)
		for p, b := range before {
			if _, held := pre[p]; !held && got[p] == b {
				if _, inTarget := want[p]; !inTarget {
					delete(got, p)
				}
			}
		}
	}
	if d := diskDiff(want, got); d != "" {
		return note, fmt.Sprintf("the restore to %s differs from git checkout --force (want = git, got = cairn):\n    %s", target, d), false
	}
	// The work tree is at the target now: a seal that finds nothing new
	// since skips against it. Restored paths leave it between the two.
	w.lastSHA = target
	if len(paths) > 0 {
		w.lastSHA = ""
		if res.PreRestore != nil {
			w.lastSHA = res.PreRestore.SHA
		}
	}
	for _, p := range res.Write {
		w.dirty[p.Path] = true
	}
	for _, p := range res.Delete {
		w.dirty[p.Path] = true
	}
	return note, "", len(res.Diff) > 0
}

// heldPaths is paths without those that neither checkpoint holds a file
// at or under.
func heldPaths(t *testing.T, st *Store, paths []string, commits ...string) []string {
	t.Helper()
	var trees []map[string]treeEntry
	for _, c := range commits {
		if c != "" {
			trees = append(trees, lsTree(t, st, c))
		}
	}
	var out []string
	for _, p := range paths {
		held := false
		for _, tr := range trees {
			for q := range tr {
				if q == p || strings.HasPrefix(q, p+"/") {
					held = true
				}
			}
		}
		if held {
			out = append(out, p)
		}
	}
	return out
}

// pickRestorePaths picks one to three paths for a restore of paths: files
// the target or the position holds, or a folder above one.
func pickRestorePaths(t *testing.T, c chooser, w *diffWorld, target string) []string {
	t.Helper()
	var all []string
	for _, sha := range []string{target, w.st.Position()} {
		if sha == "" {
			continue
		}
		for p := range lsTree(t, w.st, sha) {
			all = append(all, p)
		}
	}
	slices.Sort(all)
	all = slices.Compact(all)
	var out []string
	for range 1 + c.intn(3) {
		p, ok := pickOf(c, all)
		if !ok {
			break
		}
		for c.intn(2) == 0 && strings.Contains(p, "/") {
			p = path.Dir(p)
		}
		out = append(out, p)
	}
	// A path under another picked one adds nothing, and git's checkout
	// --no-overlay then says the inner one matched nothing.
	slices.Sort(out)
	out = slices.Compact(out)
	var outer []string
	for _, p := range out {
		if !slices.ContainsFunc(out, func(q string) bool { return strings.HasPrefix(p, q+"/") }) {
			outer = append(outer, p)
		}
	}
	return outer
}

// tryTmpfs mounts a small tmpfs for the ENOSPC op, or returns "".
func tryTmpfs(t *testing.T, size string) string {
	dir := t.TempDir()
	if err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).Run(); err != nil {
		return ""
	}
	t.Cleanup(func() {
		// A git child of a store closed an instant ago may still hold a
		// file there while it exits: the mount is busy until it is gone.
		deadline := time.Now().Add(10 * time.Second)
		for {
			out, err := exec.Command("umount", dir).CombinedOutput()
			if err == nil {
				return
			}
			if time.Now().After(deadline) || !strings.Contains(string(out), "busy") {
				t.Errorf("umount %s: %v: %s", dir, err, out)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	return dir
}

// viewGit runs git as the test's own independent view: the store's git
// dir, the work tree, the test's index, a clean environment; objects the
// view writes go to a folder of the test (the store's objects are read as an
// alternate), so the check never repairs or alters the store.
func (w *diffWorld) viewGit(t *testing.T, git string, storeOnly bool, stdin []byte, args ...string) ([]byte, error) {
	t.Helper()
	home := filepath.Join(w.view, "home")
	env := []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + home, "XDG_CONFIG_HOME=" + home, "GIT_CONFIG_NOSYSTEM=1", "LC_ALL=C",
		"GIT_DIR=" + w.st.GitDir(), "GIT_WORK_TREE=" + w.root, "GIT_INDEX_FILE=" + filepath.Join(w.view, "index"),
	}
	if !storeOnly {
		env = append(env, "GIT_OBJECT_DIRECTORY="+filepath.Join(w.view, "objects"),
			"GIT_ALTERNATE_OBJECT_DIRECTORIES="+filepath.Join(w.st.GitDir(), "objects"))
	}
	cmd := exec.Command(git, args...)
	cmd.Dir = w.root
	cmd.Env = env
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("git %q: %w: %s", args, err, stderr.String())
	}
	return out, nil
}

// gitView computes the tree git itself records for the work tree under
// cairn's rules, independently of cairn's index.
func (w *diffWorld) gitView(t *testing.T, git string) string {
	t.Helper()
	os.Remove(filepath.Join(w.view, "index"))
	sel, err := NewSelector(diffPatterns)
	if err != nil {
		t.Fatal(err)
	}
	out, err := w.viewGit(t, git, false, nil, "ls-files", "-z", "-o", "--exclude-standard")
	if err != nil {
		t.Fatal(err)
	}
	var cands, nestedFiles []string
	for _, p := range splitNul(out) {
		if !strings.HasSuffix(p, "/") {
			cands = append(cands, p)
			continue
		}
		// A folder holding a repository: git lists it, not its files. cairn
		// (stage.go, planFull) records the files under it but for any .git,
		// as git's ignore rules, asked of check-ignore --no-index, leave them.
		root := filepath.Join(w.root, filepath.FromSlash(strings.TrimSuffix(p, "/")))
		filepath.WalkDir(root, func(abs string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			r := relOf(w.root, abs)
			if d.IsDir() && Excluded(r) {
				return filepath.SkipDir
			}
			if !d.IsDir() && !Excluded(r) {
				nestedFiles = append(nestedFiles, r)
			}
			return nil
		})
	}
	if len(nestedFiles) > 0 {
		var ask []string
		for _, f := range nestedFiles {
			ask = append(ask, "./"+f)
		}
		out, err := w.viewGit(t, git, false, []byte(strings.Join(ask, "\x00")+"\x00"), "check-ignore", "--no-index", "-z", "--stdin")
		var ee *exec.ExitError
		if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 1) { // 1: nothing ignored
			t.Fatal(err)
		}
		ignored := map[string]bool{}
		for _, f := range splitNul(out) {
			ignored[strings.TrimPrefix(f, "./")] = true
		}
		for _, f := range nestedFiles {
			if !ignored[f] {
				cands = append(cands, f)
			}
		}
	}
	var keep []string
	for _, p := range cands {
		if Excluded(p) || !sel.Match(p) {
			continue
		}
		fi, err := os.Lstat(filepath.Join(w.root, filepath.FromSlash(p)))
		if err != nil || !fi.Mode().IsRegular() || fi.Size() > diffMaxFileSize {
			continue
		}
		keep = append(keep, p)
	}
	if len(keep) > 0 {
		if _, err := w.viewGit(t, git, false, []byte(strings.Join(keep, "\x00")+"\x00"), "update-index", "-z", "--add", "--stdin"); err != nil {
			t.Fatal(err)
		}
	}
	out, err = w.viewGit(t, git, false, nil, "write-tree")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// check compares a checkpoint with git's view; "" when it holds.
func (w *diffWorld) check(t *testing.T, git string, rec ckpt.Record) string {
	t.Helper()
	// Every object the checkpoint names is in the store (read alone).
	out, err := w.viewGit(t, git, true, nil, "rev-list", "--objects", "--no-walk", "--missing=print", rec.SHA)
	if err != nil {
		return fmt.Sprintf("checkpoint %s (%s): objects cannot be listed: %v", rec.ID, rec.State, err)
	}
	var missing []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "?") {
			missing = append(missing, l[1:])
		}
	}
	if len(missing) > 0 {
		return fmt.Sprintf("checkpoint %s (%s) names objects missing from the store: %s", rec.ID, rec.State, strings.Join(missing, " "))
	}
	want := w.gitView(t, git)
	diffs := w.treeDiff(t, git, want, rec.SHA)
	if len(diffs) == 0 {
		return ""
	}
	var bad []string
	covered := func(p string) bool {
		for _, is := range rec.Issues {
			if p == is.Path || strings.HasPrefix(p, is.Path+"/") {
				return true
			}
		}
		return false
	}
	var kept map[string]string
	if rec.State == ckpt.StatePartial && rec.Parent != "" {
		kept = map[string]string{}
		for _, d := range w.treeDiff(t, git, rec.Parent, rec.SHA) {
			kept[d.path] = d.line
		}
	}
	for _, d := range diffs {
		switch {
		case (rec.State == ckpt.StatePartial || rec.State == ckpt.StateRacy) && covered(d.path):
			if kept != nil {
				if l, changed := kept[d.path]; changed {
					bad = append(bad, fmt.Sprintf("%q is listed as an issue but does not keep the parent's version: %s", d.path, l))
				}
			}
		default:
			bad = append(bad, d.line)
		}
	}
	if len(bad) == 0 {
		return ""
	}
	return fmt.Sprintf("checkpoint %s (%s, issues %q) differs from git's view (want = git, got = checkpoint):\n    %s",
		rec.ID, rec.State, issuePaths(rec.Issues), strings.Join(bad, "\n    "))
}

type treeDiffEntry struct{ path, line string }

// treeDiff lists what differs between two trees (or commits), described.
func (w *diffWorld) treeDiff(t *testing.T, git, want, got string) []treeDiffEntry {
	t.Helper()
	out, err := w.viewGit(t, git, false, nil, "diff-tree", "-r", "-z", "--no-renames", want, got)
	if err != nil {
		t.Fatal(err)
	}
	f := splitNul(out)
	var res []treeDiffEntry
	for i := 0; i+1 < len(f); i += 2 {
		meta := strings.Fields(strings.TrimPrefix(f[i], ":"))
		p := f[i+1]
		if len(meta) < 5 {
			continue
		}
		res = append(res, treeDiffEntry{p, fmt.Sprintf("%q: want %s, got %s", p,
			w.describeEntry(t, git, meta[0], meta[2]), w.describeEntry(t, git, meta[1], meta[3]))})
	}
	return res
}

func (w *diffWorld) describeEntry(t *testing.T, git, mode, sha string) string {
	if strings.Trim(sha, "0") == "" {
		return "nothing"
	}
	b, err := w.viewGit(t, git, false, nil, "cat-file", "blob", sha)
	if err != nil {
		return fmt.Sprintf("%s %.10s (unreadable)", mode, sha)
	}
	return fmt.Sprintf("%s %.10s %.40q", mode, sha, b)
}

// diffOp is one operation, applied to each world in turn; do returns the
// paths a watcher would report, after runs once the step's seals are checked.
type diffOp struct {
	desc  string
	do    func(t *testing.T, w *diffWorld) []string
	after func(t *testing.T, w *diffWorld)
	// uneven: the op may fail one world's seal and not the other's (objects
	// deleted from a store, whose two engines lay them out differently; a
	// full disk, where what fits differs). After such a failure in one world
	// only, their ledgers and positions differ, and so would their restores:
	// the sequence ends there.
	uneven bool
}

var (
	diffDirs  = []string{"", "", "a/", "a/b/", "c d/", "-x/", "n\xffd/", "a/b/deep e/", "sub/", "rigArchive/"}
	diffNames = []string{"f0", "f1", "x.txt", "a", "b", "sub", "a b", "new\nline", "\xff\xfe.bin", "-dash", "--help",
		"ünï.md", "x.log", "keep.log", "t.tmp", ".hankweave-x", "tab\tq", "q\"uote", "back\\slash", "*", "#hash", "!bang", "sp "}
	diffIgnoreLines = []string{"*.log", "!keep.log", "b/", "x*", "*.bin", "/f0", "sub", "deep e/", "*.md", "a"}
)

// diffTree lists what the first world's work tree holds, to pick from.
type diffTree struct {
	files, dirs, links, ignores, selfIgnoring, ignoring []string
	size                                                map[string]int64
	modes                                               map[string]fs.FileMode
}

func scanTree(root string) diffTree {
	tr := diffTree{size: map[string]int64{}, modes: map[string]fs.FileMode{}}
	filepath.WalkDir(root, func(abs string, d fs.DirEntry, err error) error {
		if err != nil || abs == root {
			return nil
		}
		r := relOf(root, abs)
		switch {
		case d.IsDir() && d.Name() == ".git":
			return filepath.SkipDir
		case d.IsDir():
			tr.dirs = append(tr.dirs, r)
			// Not through a link, nor from a FIFO (which would block): git
			// reads neither as rules.
			if b, err := readNoFollow(filepath.Join(abs, ".gitignore"), 1<<20); err == nil {
				tr.ignoring = append(tr.ignoring, r)
				if strings.TrimSpace(string(b)) == "*" {
					tr.selfIgnoring = append(tr.selfIgnoring, r)
				}
			}
		case d.Type()&fs.ModeSymlink != 0:
			tr.links = append(tr.links, r)
		case d.Type().IsRegular():
			tr.files = append(tr.files, r)
			if fi, err := d.Info(); err == nil {
				tr.size[r], tr.modes[r] = fi.Size(), fi.Mode()
			}
			if d.Name() == ".gitignore" {
				tr.ignores = append(tr.ignores, r)
			}
		}
		return nil
	})
	return tr
}

func pickOf(c chooser, v []string) (string, bool) {
	if len(v) == 0 {
		return "", false
	}
	return v[c.intn(len(v))], true
}

func diffContent(c chooser, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = "abcdefghij\n"[c.intn(11)]
	}
	return string(b)
}

// diffOpNames are the ops and their weights.
var diffOpNames = []struct {
	name   string
	weight int
}{
	{"create", 12}, {"edit", 12}, {"rewrite", 8}, {"delete", 6}, {"rmdir", 3}, {"mvfile", 6}, {"mvdir", 4},
	{"swap", 6}, {"chmod", 5}, {"ignore", 4}, {"unignore", 3}, {"negate", 2}, {"selfignore", 3}, {"cachewrite", 4}, {"selfswap", 4},
	{"ignoredir-out", 2}, {"ignoredir-in", 2}, {"nested", 2}, {"fifo", 1}, {"big", 1}, {"large", 2}, {"statcache", 3},
	{"delobj", 2}, {"enospc", 1}, {"tick", 1}, {"newstore", 1}, {"reopen", 3},
}

// genOp picks an op (by the first world's tree) that each world then replays.
func genOp(t *testing.T, c chooser, w0 *diffWorld, recent []string, allowed map[string]bool) (diffOp, bool) {
	tr := scanTree(w0.root)
	// A self-ignoring folder just written in is swapped more often: its
	// rules are the last check-ignore read.
	hot := slices.ContainsFunc(tr.selfIgnoring, func(d string) bool {
		return slices.ContainsFunc(recent, func(p string) bool { return strings.HasPrefix(p, d+"/") })
	})
	weight := func(name string, w int) int {
		switch {
		case len(allowed) > 0 && !allowed[name]:
			return 0
		case name == "selfswap" && hot:
			return 5 * w
		}
		return w
	}
	total := 0
	for _, o := range diffOpNames {
		total += weight(o.name, o.weight)
	}
	if total == 0 {
		return diffOp{}, false
	}
	for tries := 0; tries < 20 && !c.done(); tries++ {
		k := c.intn(total)
		var name string
		for _, o := range diffOpNames {
			if k < weight(o.name, o.weight) {
				name = o.name
				break
			}
			k -= weight(o.name, o.weight)
		}
		if op, ok := makeOp(t, c, name, tr, w0, recent); ok {
			return op, true
		}
	}
	return diffOp{}, false
}

func newPath(c chooser) string {
	return diffDirs[c.intn(len(diffDirs))] + diffNames[c.intn(len(diffNames))]
}

func makeOp(t *testing.T, c chooser, name string, tr diffTree, w0 *diffWorld, recent []string) (diffOp, bool) {
	switch name {
	case "create":
		p := newPath(c)
		return opPut("create", p, diffContent(c, c.intn(120)), 0o644), true
	case "big":
		p := newPath(c)
		return opPut("create past the size limit", p, strings.Repeat(diffContent(c, 64), diffMaxFileSize/64+1+c.intn(4)), 0o644), true
	case "large":
		// Under the limit but over 1 MiB: the in-process engine writes such a blob loose, as it reads it.
		p := newPath(c)
		return opPut("create a large file", p, strings.Repeat(diffContent(c, 64), (1<<20)/64+1+c.intn(4096)), 0o644), true
	case "edit":
		p, ok := pickOf(c, tr.files)
		if !ok {
			return diffOp{}, false
		}
		return opPut("edit", p, diffContent(c, c.intn(120)), tr.modes[p].Perm()), true
	case "rewrite":
		// Same size, new bytes, right after the last seal read the file.
		var cand []string
		for _, p := range recent {
			if tr.size[p] > 0 {
				cand = append(cand, p)
			}
		}
		if len(cand) == 0 || c.intn(3) == 0 {
			for _, p := range tr.files {
				if tr.size[p] > 0 {
					cand = append(cand, p)
				}
			}
		}
		p, ok := pickOf(c, cand)
		if !ok {
			return diffOp{}, false
		}
		old, _ := os.ReadFile(filepath.Join(w0.root, filepath.FromSlash(p)))
		nb := []byte(diffContent(c, len(old)))
		nb[0] = old[0] ^ 1 // never the same bytes
		return opPut("same-size rewrite", p, string(nb), tr.modes[p].Perm()), true
	case "delete":
		p, ok := pickOf(c, append(slices.Clone(tr.files), tr.links...))
		if !ok {
			return diffOp{}, false
		}
		return diffOp{desc: fmt.Sprintf("delete %q", p), do: func(t *testing.T, w *diffWorld) []string {
			os.Remove(w.abs(p))
			return []string{p}
		}}, true
	case "rmdir":
		p, ok := pickOf(c, tr.dirs)
		if !ok {
			return diffOp{}, false
		}
		return diffOp{desc: fmt.Sprintf("rm -rf %q", p), do: func(t *testing.T, w *diffWorld) []string {
			return w.removeAll(t, p)
		}}, true
	case "mvfile":
		p, ok := pickOf(c, tr.files)
		if !ok {
			return diffOp{}, false
		}
		to := newPath(c)
		if to == p || strings.HasPrefix(to, p+"/") || strings.HasPrefix(p, to+"/") {
			return diffOp{}, false
		}
		return diffOp{desc: fmt.Sprintf("mv %q %q", p, to), do: func(t *testing.T, w *diffWorld) []string {
			rep := w.clearFor(t, to)
			if err := os.Rename(w.abs(p), w.abs(to)); err != nil {
				t.Fatal(err)
			}
			return append(rep, p, to)
		}}, true
	case "mvdir":
		p, ok := pickOf(c, tr.dirs)
		if !ok {
			return diffOp{}, false
		}
		to := strings.TrimSuffix(newPath(c), "/") + "-d"
		if to == p || strings.HasPrefix(to, p+"/") || strings.HasPrefix(p, to+"/") {
			return diffOp{}, false
		}
		return diffOp{desc: fmt.Sprintf("mv (folder) %q %q", p, to), do: func(t *testing.T, w *diffWorld) []string {
			rep := w.clearFor(t, to)
			if err := os.Rename(w.abs(p), w.abs(to)); err != nil {
				t.Fatal(err)
			}
			return append(rep, p, to)
		}}, true
	case "swap":
		all := append(append(slices.Clone(tr.files), tr.dirs...), tr.links...)
		p, ok := pickOf(c, all)
		if !ok {
			return diffOp{}, false
		}
		fi, err := os.Lstat(w0.abs(p))
		if err != nil {
			return diffOp{}, false
		}
		kind := c.intn(2)
		content := diffContent(c, 1+c.intn(40))
		target := []string{"f0", "../f0", "a", "/etc/hostname", "nowhere"}[c.intn(5)]
		switch {
		case fi.Mode().IsRegular() && kind == 0, fi.Mode()&fs.ModeSymlink != 0 && kind == 0:
			return diffOp{desc: fmt.Sprintf("%q becomes a folder holding %q", p, p+"/inner"), do: func(t *testing.T, w *diffWorld) []string {
				rep := w.removeAll(t, p)
				return append(rep, w.put(t, p+"/inner", content, 0o644)...)
			}}, true
		case fi.IsDir() && kind == 0, fi.Mode()&fs.ModeSymlink != 0:
			return diffOp{desc: fmt.Sprintf("%q (%s) becomes a file", p, fi.Mode().Type()), do: func(t *testing.T, w *diffWorld) []string {
				return w.put(t, p, content, 0o644)
			}}, true
		default:
			return diffOp{desc: fmt.Sprintf("%q (%s) becomes a symlink to %q", p, fi.Mode().Type(), target), do: func(t *testing.T, w *diffWorld) []string {
				rep := w.removeAll(t, p)
				if err := os.Symlink(target, w.abs(p)); err != nil {
					t.Fatal(err)
				}
				return append(rep, p)
			}}, true
		}
	case "chmod":
		p, ok := pickOf(c, tr.files)
		if !ok {
			return diffOp{}, false
		}
		m := tr.modes[p].Perm() ^ 0o111
		return diffOp{desc: fmt.Sprintf("chmod %o %q", m, p), do: func(t *testing.T, w *diffWorld) []string {
			os.Chmod(w.abs(p), m)
			return []string{p}
		}}, true
	case "ignore":
		var lines []string
		for range 1 + c.intn(3) {
			lines = append(lines, diffIgnoreLines[c.intn(len(diffIgnoreLines))])
		}
		d := diffDirs[c.intn(len(diffDirs))]
		return opPut("ignore file", d+".gitignore", strings.Join(lines, "\n")+"\n", 0o644), true
	case "unignore":
		p, ok := pickOf(c, tr.ignores)
		if !ok {
			return diffOp{}, false
		}
		return diffOp{desc: fmt.Sprintf("delete ignore file %q", p), do: func(t *testing.T, w *diffWorld) []string {
			os.Remove(w.abs(p))
			return []string{p}
		}}, true
	case "negate":
		d := diffDirs[c.intn(len(diffDirs))]
		return diffOp{desc: fmt.Sprintf("%q: *.log but !keep.log, with keep.log and other.log", d+".gitignore"), do: func(t *testing.T, w *diffWorld) []string {
			rep := w.put(t, d+".gitignore", "*.log\n!keep.log\n", 0o644)
			rep = append(rep, w.put(t, d+"keep.log", "keep me\n", 0o644)...)
			return append(rep, w.put(t, d+"other.log", "drop me\n", 0o644)...)
		}}, true
	case "selfignore":
		d := diffDirs[c.intn(len(diffDirs))] + []string{".pytest_cache", "cache", "sub"}[c.intn(3)]
		return diffOp{desc: fmt.Sprintf("self-ignoring folder %q (.gitignore \"*\", v/lastfailed, README.md)", d), do: func(t *testing.T, w *diffWorld) []string {
			rep := w.put(t, d+"/.gitignore", "*\n", 0o644)
			rep = append(rep, w.put(t, d+"/v/lastfailed", "{}\n", 0o644)...)
			return append(rep, w.put(t, d+"/README.md", "cache\n", 0o644)...)
		}}, true
	case "cachewrite":
		// A tool writing into its self-ignoring cache folder (pytest does).
		d, ok := pickOf(c, tr.selfIgnoring)
		if !ok {
			return diffOp{}, false
		}
		p := d + "/" + []string{"README.md", "v/lastfailed", "nodeids"}[c.intn(3)]
		return opPut("write in a self-ignoring folder", p, diffContent(c, c.intn(60)), 0o644), true
	case "selfswap":
		// Mostly one the last step wrote in (its rules are what check-ignore read last).
		var hot []string
		for _, d := range tr.selfIgnoring {
			if slices.ContainsFunc(recent, func(p string) bool { return strings.HasPrefix(p, d+"/") }) {
				hot = append(hot, d)
			}
		}
		d, ok := pickOf(c, hot)
		if !ok || c.intn(4) == 0 {
			d, ok = pickOf(c, tr.selfIgnoring)
		}
		if !ok {
			return diffOp{}, false
		}
		away := c.intn(2) == 0
		content := diffContent(c, 1+c.intn(30))
		desc := fmt.Sprintf("self-ignoring %q moved out of the tree, replaced by a plain folder holding a.txt, sub/b.txt", d)
		if !away {
			desc = fmt.Sprintf("self-ignoring %q moved to %q, replaced by a plain folder holding a.txt, sub/b.txt", d, d+"-old")
		}
		return diffOp{desc: desc, do: func(t *testing.T, w *diffWorld) []string {
			rep := []string{d}
			if away {
				w.moveOut(t, d)
			} else {
				rep = append(rep, w.clearFor(t, d+"-old")...)
				if err := os.Rename(w.abs(d), w.abs(d+"-old")); err != nil {
					t.Fatal(err)
				}
				rep = append(rep, d+"-old")
			}
			rep = append(rep, w.put(t, d+"/a.txt", content, 0o644)...)
			return append(rep, w.put(t, d+"/sub/b.txt", content+"b", 0o644)...)
		}}, true
	case "ignoredir-out":
		d, ok := pickOf(c, tr.ignoring)
		if !ok {
			return diffOp{}, false
		}
		return diffOp{desc: fmt.Sprintf("folder %q (with its .gitignore) moved out of the tree", d), do: func(t *testing.T, w *diffWorld) []string {
			w.moveOut(t, d)
			return []string{d}
		}}, true
	case "ignoredir-in":
		to := strings.TrimSuffix(newPath(c), "/") + "-in"
		rules := []string{"*\n", "*.log\n", "x*\n!x.txt\n"}[c.intn(3)]
		return diffOp{desc: fmt.Sprintf("folder with .gitignore %q and x.txt, y.log moved into the tree as %q", rules, to), do: func(t *testing.T, w *diffWorld) []string {
			src, err := os.MkdirTemp(w.outside, "in")
			if err != nil {
				t.Fatal(err)
			}
			for n, s := range map[string]string{".gitignore": rules, "x.txt": "x\n", "y.log": "y\n"} {
				if err := os.WriteFile(filepath.Join(src, n), []byte(s), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			rep := w.clearFor(t, to)
			if err := os.Rename(src, w.abs(to)); err != nil {
				t.Fatal(err)
			}
			return append(rep, to)
		}}, true
	case "nested":
		d := diffDirs[c.intn(len(diffDirs))] + []string{"repo", "sub", "vendor/lib"}[c.intn(3)]
		return diffOp{desc: fmt.Sprintf("nested repository: git init %q with main.go, .gitignore *.o, main.o", d), do: func(t *testing.T, w *diffWorld) []string {
			rep := w.put(t, d+"/main.go", "package main\n", 0o644)
			rep = append(rep, w.put(t, d+"/.gitignore", "*.o\n", 0o644)...)
			rep = append(rep, w.put(t, d+"/main.o", "obj\n", 0o644)...)
			hostGit(t, w.abs(d), "init", "-q")
			return rep
		}}, true
	case "fifo":
		p := newPath(c)
		return diffOp{desc: fmt.Sprintf("mkfifo %q", p), do: func(t *testing.T, w *diffWorld) []string {
			rep := w.clearFor(t, p)
			if err := syscall.Mkfifo(w.abs(p), 0o644); err != nil {
				t.Fatal(err)
			}
			return append(rep, p)
		}}, true
	case "statcache":
		cut := c.intn(1001)
		remove := c.intn(4) == 0
		desc := fmt.Sprintf("stat cache cut to %d‰ of its length", cut)
		if remove {
			desc = "stat cache removed"
		}
		return diffOp{desc: desc, do: func(t *testing.T, w *diffWorld) []string {
			p := filepath.Join(w.st.GitDir(), cairnSubdir, "statcache")
			fi, err := os.Stat(p)
			if err != nil {
				return nil
			}
			if remove {
				os.Remove(p)
			} else if err := os.Truncate(p, fi.Size()*int64(cut)/1000); err != nil {
				t.Fatal(err)
			}
			return nil
		}}, true
	case "delobj":
		// An object the last checkpoint names (mostly a blob) goes: its
		// loose file, or the whole pack holding it.
		k := c.intn(1 << 16)
		blob := c.intn(4) != 0
		what := "object"
		if blob {
			what = "blob"
		}
		return diffOp{desc: fmt.Sprintf("next second; %s #%d (mod their count) of the last checkpoint deleted from the store (its loose file, or the pack holding it)", what, k), do: func(t *testing.T, w *diffWorld) []string {
			if w.reopened || w.lastSHA == "" {
				return nil // a new store, no checkpoint of its own yet
			}
			if len(w.stash) > 0 {
				// An earlier op of this step deleted one already: the last
				// checkpoint can no longer be listed whole (a tree of it
				// may be the one gone), and one loss a step is the test.
				return nil
			}
			git := hostGitPath(t)
			if w.engine == EngineGit {
				// Past the racy window, so the files are trusted by their stat data.
				nextSecond()
			}
			var ids []string
			if blob {
				out, err := w.viewGit(t, git, true, nil, "ls-tree", "-r", "-z", w.lastSHA)
				if err != nil {
					t.Fatal(err)
				}
				for _, l := range splitNul(out) {
					if f := strings.Fields(l); len(f) >= 3 {
						ids = append(ids, f[2])
					}
				}
			} else {
				out, err := w.viewGit(t, git, true, nil, "rev-list", "--objects", "--no-walk", w.lastSHA)
				if err != nil {
					t.Fatal(err)
				}
				for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
					ids = append(ids, strings.Fields(l)[0])
				}
			}
			slices.Sort(ids)
			ids = slices.Compact(ids)
			if len(ids) == 0 {
				return nil
			}
			id := ids[k%len(ids)]
			objs := filepath.Join(w.st.GitDir(), "objects")
			var gone []string
			if _, err := os.Stat(filepath.Join(objs, id[:2], id[2:])); err == nil {
				gone = append(gone, id[:2]+"/"+id[2:])
			}
			idxs, _ := filepath.Glob(filepath.Join(objs, "pack", "*.idx"))
			slices.Sort(idxs)
			for _, idx := range idxs {
				b, err := os.ReadFile(idx)
				if err != nil {
					continue
				}
				out, err := w.viewGit(t, git, true, b, "show-index")
				if err != nil || !strings.Contains(string(out), " "+id+" ") {
					continue
				}
				base := "pack/" + strings.TrimSuffix(filepath.Base(idx), ".idx")
				gone = append(gone, base+".pack", base+".idx", base+".rev")
			}
			for _, g := range gone {
				src := filepath.Join(objs, filepath.FromSlash(g))
				// Kept beside the store (same file system), put back after the step.
				dst := filepath.Join(w.state, "stash-"+w.engine+"-"+strings.ReplaceAll(g, "/", "_"))
				if err := os.Rename(src, dst); errors.Is(err, fs.ErrNotExist) {
					continue // a pack without its .rev
				} else if err != nil {
					t.Fatalf("delete %s: %v", g, err)
				}
				w.stash = append(w.stash, [2]string{src, dst})
			}
			return nil
		}, after: func(t *testing.T, w *diffWorld) {
			// Put the objects back, so the run goes on (a damaged store
			// fails every seal until repaired, by design).
			for _, s := range w.stash {
				if _, err := os.Stat(s[0]); err != nil {
					os.Rename(s[1], s[0])
				} else {
					os.Remove(s[1])
				}
			}
			w.stash = nil
		}, uneven: true}, true
	case "enospc":
		if !w0.full {
			return diffOp{}, false
		}
		slack := c.intn(4) * 8 << 10
		return diffOp{desc: fmt.Sprintf("the store's disk filled (%d bytes left)", slack), do: func(t *testing.T, w *diffWorld) []string {
			if w.filler != "" {
				return nil
			}
			w.filler = filepath.Join(w.state, "filler")
			f, err := os.Create(w.filler)
			if err != nil {
				return nil
			}
			buf := make([]byte, 4096)
			for {
				if _, err := f.Write(buf); err != nil {
					break
				}
			}
			f.Close()
			// Give back the slack, so some writes succeed and others fail.
			if fi, err := os.Stat(w.filler); err == nil {
				os.Truncate(w.filler, max(0, fi.Size()-int64(slack)))
			}
			return nil
		}, after: func(t *testing.T, w *diffWorld) {
			if w.filler != "" {
				os.Remove(w.filler)
				w.filler = ""
			}
		}, uneven: true}, true
	case "newstore":
		if w0.filler != "" {
			// Not on a disk this step filled: opening a store writes its
			// config, and a full disk refuses that (a clear error, but then
			// there is no store to go on with).
			return diffOp{}, false
		}
		return diffOp{desc: "a new store over the work tree (its first seal follows)", do: func(t *testing.T, w *diffWorld) []string {
			w.st.Close()
			w.stores++
			// Beside the old one, on the same file system (the tmpfs of the
			// ENOSPC op, when there is one).
			w.stateDir = filepath.Join(w.state, fmt.Sprintf("store-%d", w.stores))
			w.st = openTestStore(t, w.root, Options{Engine: w.engine, StateDir: w.stateDir, MaxFileSize: diffMaxFileSize, Patterns: diffPatterns})
			w.reopened = true
			w.shas, w.evs = nil, nil // the old store's checkpoints are not the new one's to restore to
			w.lastSHA = ""           // nor its last: a capture as the first seal leaves the new one none
			return nil
		}}, true
	case "reopen":
		if w0.held != nil {
			return diffOp{}, false // a capture is held by the store open now
		}
		return diffOp{desc: "the store closed and opened again (a new engine, as `cairn checkpoint` or `cairn restore` with no daemon)", do: func(t *testing.T, w *diffWorld) []string {
			w.st.Close()
			w.st = openTestStore(t, w.root, Options{Engine: w.engine, StateDir: w.stateDir, MaxFileSize: diffMaxFileSize, Patterns: diffPatterns})
			return nil
		}}, true
	case "tick":
		return diffOp{desc: "wait for the next whole second", do: func(t *testing.T, w *diffWorld) []string {
			if w.engine == EngineGit { // once, in the first world
				nextSecond()
			}
			return nil
		}}, true
	}
	return diffOp{}, false
}

// opPut writes a file through whatever stands in its way.
func opPut(what, p, content string, mode fs.FileMode) diffOp {
	return diffOp{desc: fmt.Sprintf("%s %q (%d bytes, %o)", what, p, len(content), mode), do: func(t *testing.T, w *diffWorld) []string {
		return w.put(t, p, content, mode)
	}}
}

func (w *diffWorld) abs(p string) string { return filepath.Join(w.root, filepath.FromSlash(p)) }

// removeAll removes p and returns it and everything under it, as a
// watcher reports a recursive removal.
func (w *diffWorld) removeAll(t *testing.T, p string) []string {
	var rep []string
	filepath.WalkDir(w.abs(p), func(abs string, d fs.DirEntry, err error) error {
		if err == nil {
			rep = append(rep, relOf(w.root, abs))
		}
		return nil
	})
	if err := os.RemoveAll(w.abs(p)); err != nil {
		t.Fatal(err)
	}
	return rep
}

// clearFor makes room for a new entry at p: what stands at p goes, parents
// that are not folders become folders. It returns what a watcher reports.
func (w *diffWorld) clearFor(t *testing.T, p string) []string {
	// The folders on the way first: removing p through a linked folder
	// would remove another path than the one reported.
	var rep []string
	var dirs []string
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		dirs = append(dirs, d)
	}
	slices.Reverse(dirs)
	for _, d := range dirs {
		fi, err := os.Lstat(w.abs(d))
		if err == nil && fi.IsDir() {
			continue
		}
		if err == nil {
			rep = append(rep, w.removeAll(t, d)...)
		}
		if err := os.Mkdir(w.abs(d), 0o755); err != nil {
			t.Fatal(err)
		}
		rep = append(rep, d)
	}
	if _, err := os.Lstat(w.abs(p)); err == nil {
		rep = append(rep, w.removeAll(t, p)...)
	}
	return rep
}

// underLink reports whether a folder on the way to p is a symbolic link.
func (w *diffWorld) underLink(p string) bool {
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		if fi, err := os.Lstat(w.abs(d)); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return true
		}
	}
	return false
}

// put writes a file at p through whatever is in the way.
func (w *diffWorld) put(t *testing.T, p, content string, mode fs.FileMode) []string {
	var rep []string
	if fi, err := os.Lstat(w.abs(p)); err != nil || !fi.Mode().IsRegular() || w.underLink(p) {
		// Never written through a linked folder on the way: the file
		// changed would be another path than the one reported.
		rep = w.clearFor(t, p)
	}
	if err := os.WriteFile(w.abs(p), []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(w.abs(p), mode); err != nil {
		t.Fatal(err)
	}
	return append(rep, p)
}

// moveOut moves a work-tree folder out of the tree (a watcher reports the folder).
func (w *diffWorld) moveOut(t *testing.T, p string) {
	dst, err := os.MkdirTemp(w.outside, "out")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(w.abs(p), filepath.Join(dst, "d")); err != nil {
		t.Fatal(err)
	}
}

// nextSecond waits for the next whole second of the clock, to leave a
// timestamp tick behind (the point of the ops that call it).
func nextSecond() {
	now := time.Now()
	time.Sleep(now.Truncate(time.Second).Add(time.Second).Sub(now) + 10*time.Millisecond)
}
