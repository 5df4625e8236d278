package sealbench

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// RestoreConfig says what the restore benchmark measures. The zero value
// measures a 100k-file tree restored to a checkpoint 1k files away.
type RestoreConfig struct {
	// Files is the tracked files of the generated tree; default 100000.
	Files int
	// Changed is how many files differ between the two checkpoints; default
	// 1000: a tenth added, a tenth deleted, the rest edited.
	Changed int
	// Runs is how many counted runs each side gets, after one warm-up run;
	// default 5.
	Runs int
	// Dir is the scratch folder; default a new temporary folder. A fresh
	// sub-folder is made inside it either way.
	Dir string
	// KeepTrees keeps the generated trees and their stores.
	KeepTrees bool
	// JSON prints one JSON document instead of a table.
	JSON bool
	// Seed makes the tree and the changes; default 1.
	Seed uint64
	// Progress, when set, gets a line as each step starts.
	Progress io.Writer
}

// Restore benchmark operations, as they appear in the JSON result.
const (
	OpRestore = "cairn-restore"
	// OpRestoreWatched is a restore told the watch's dirty set (here:
	// nothing changed since the last seal), so the pre-restore stages only
	// that, as the daemon's restores do once their barrier is read.
	OpRestoreWatched = "cairn-restore-watched"
	OpCheckout       = "ref-checkout"
	// OpRestoreCold is OpRestore from a store opened for it and closed
	// after (timed): what `cairn restore` without a daemon does, with
	// nothing the engine keeps between seals (cairn's index parsed, the
	// trees it read, what it knows of the store's objects).
	OpRestoreCold = "cairn-restore-cold"
	// OpWalkFloor lists every folder of the tree and lstats every file, on
	// every core, and nothing else (walkFloor): the least a restore that
	// must find what the whole work tree holds can cost.
	OpWalkFloor = "walk-floor"
)

// RestoreReport is the restore benchmark's machine-readable result. The
// figures are in Result, laid out as the seal benchmark's are.
type RestoreReport struct {
	Git     string     `json:"git"`
	GOOS    string     `json:"goos"`
	GOARCH  string     `json:"goarch"`
	CPUs    int        `json:"cpus"`
	Runs    int        `json:"runs"`
	Seed    uint64     `json:"seed"`
	Changed int        `json:"changed"` // files that differ between the two checkpoints
	Edited  int        `json:"edited"`
	Added   int        `json:"added"`   // in Y, not in X: the restore deletes them
	Deleted int        `json:"deleted"` // in X, not in Y: the restore writes them back
	Result  SizeResult `json:"result"`
	// Verified counts the restores (cairn's and git's, warm-up included)
	// whose work tree was checked equal to the target afterwards. A
	// mismatch fails the benchmark instead.
	Verified int `json:"verified"`
}

// RunRestore measures cairn's whole restore (pre-restore checkpoint, plan,
// checkout, verification) against `git checkout --force` alone, on two
// identical generated work trees: one under a plain-layout cairn store, the
// other under an independent git store (its own GIT_DIR and index). Both
// hold checkpoint X of the tree and checkpoint Y, cfg.Changed files away,
// and both work trees start at Y, unchanged since Y was sealed or committed.
// Each run times cairn restoring to X and git checking X out, interleaved
// (cairn first on even runs), checks both work trees equal X, and brings
// both back to Y untimed.
func RunRestore(ctx context.Context, cfg RestoreConfig, w io.Writer) error {
	if cfg.Files <= 0 {
		cfg.Files = 100_000
	}
	if cfg.Changed <= 0 {
		cfg.Changed = 1000
	}
	if cfg.Runs <= 0 {
		cfg.Runs = 5
	}
	if cfg.Seed == 0 {
		cfg.Seed = 1
	}
	if cfg.Files < minTreeFiles {
		return fmt.Errorf("sealbench: a tree needs at least %d files, asked for %d", minTreeFiles, cfg.Files)
	}
	if cfg.Changed > (cfg.Files-fixedFiles)/2 {
		return fmt.Errorf("sealbench: %d changed files is more than half the tree's %d source files", cfg.Changed, cfg.Files-fixedFiles)
	}
	logf := progressf(cfg.Progress, "restorebench")
	root, env, cleanup, err := scratch(ctx, cfg.Dir, "restorebench-", cfg.KeepTrees, logf)
	if err != nil {
		return err
	}
	defer cleanup()
	rep := RestoreReport{Git: env.version.String(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH,
		CPUs: runtime.NumCPU(), Runs: cfg.Runs, Seed: cfg.Seed}
	if err := runRestore(ctx, cfg, env, root, &rep, logf); err != nil {
		return fmt.Errorf("sealbench: restore, %d files: %w", cfg.Files, err)
	}
	if cfg.JSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	if err := writeTable(w, rep.Git, cfg.Runs, rep.Result); err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "   X and Y differ in %d files (%d edited, %d added, %d deleted); %d restores checked equal to X\n",
		rep.Changed, rep.Edited, rep.Added, rep.Deleted, rep.Verified)
	return err
}

func runRestore(ctx context.Context, cfg RestoreConfig, env *gitEnv, root string, rep *RestoreReport, logf func(string, ...any)) error {
	n := cfg.Files
	res := SizeResult{Files: n, WarmupRuns: 1, Runs: cfg.Runs, LoadBefore: loadAvg()}

	// Two trees from the same seed are the same tree, byte for byte.
	logf("%d files: generating the two trees", n)
	start := time.Now()
	cairnTree, refTree := filepath.Join(root, "cairn", "tree"), filepath.Join(root, "ref", "tree")
	tr, err := generate(ctx, cairnTree, n, cfg.Seed)
	if err != nil {
		return err
	}
	if _, err := generate(ctx, refTree, n, cfg.Seed); err != nil {
		return err
	}
	res.GenerateMS = ms(time.Since(start))
	res.IgnoredFiles = tr.ignored
	res.Bytes = tr.bytes

	logf("%d files: sealing X, changing %d files, sealing Y", n, cfg.Changed)
	start = time.Now()
	cs, err := openCairnEngine(ctx, cairnTree, filepath.Join(root, "cairn", "state"), "") // the default engine, as the daemon runs
	if err != nil {
		return err
	}
	defer cs.close()
	recX, err := cs.seal(ctx, "restorebench X", nil)
	if err != nil {
		return err
	}
	ref, err := env.initStore(ctx, filepath.Join(root, "ref", "git"), refTree, filepath.Join(root, "ref", "index"))
	if err != nil {
		return err
	}
	refX, err := ref.commitAll(ctx, "restorebench X")
	if err != nil {
		return err
	}
	ch := planChanges(tr, cfg.Changed)
	rep.Changed, rep.Edited, rep.Added, rep.Deleted = len(ch.paths()), len(ch.edits), len(ch.adds), len(ch.deletes)
	for _, dir := range []string{cairnTree, refTree} {
		if err := ch.apply(dir); err != nil {
			return err
		}
	}
	// Y is sealed as a watched run seals it: incrementally, over the paths
	// that changed.
	recY, err := cs.seal(ctx, "restorebench Y", ch.paths())
	if err != nil {
		return err
	}
	refY, err := ref.commitAll(ctx, "restorebench Y")
	if err != nil {
		return err
	}
	res.SetupMS = ms(time.Since(start))

	// Both stores must hold the same two trees, or the timings compare
	// different work.
	wantX, wantY := map[string]string{}, map[string]string{}
	for _, c := range []struct {
		what      string
		cairn, gt string
		want      map[string]string
	}{{"X", recX.SHA, refX, wantX}, {"Y", recY.SHA, refY, wantY}} {
		mine, err := lsTree(ctx, cs.objects(ctx), c.cairn)
		if err != nil {
			return err
		}
		theirs, err := lsTree(ctx, ref.git, c.gt)
		if err != nil {
			return err
		}
		if d := treeDiff(mine, theirs); d != "" {
			return fmt.Errorf("cairn's checkpoint %s holds another tree than git's commit: %s", c.what, d)
		}
		maps.Copy(c.want, mine)
	}

	samples := map[string][]time.Duration{}
	var notes []string
	noted := map[string]bool{}
	note := func(kind, format string, args ...any) {
		if !noted[kind] {
			noted[kind] = true
			notes = append(notes, fmt.Sprintf(format, args...))
		}
	}
	check := func(who, dir, at string, want map[string]string) error {
		if err := ch.check(dir, want); err != nil {
			return fmt.Errorf("%s: the work tree is not at %s: %w", who, at, err)
		}
		return nil
	}

	// Untimed, after a restore of cairn's alone: the tree checked at X, then
	// brought back to Y and Y sealed again, as after a normal run.
	backToY := func() error {
		if err := check("cairn", cairnTree, "X", wantX); err != nil {
			return err
		}
		if _, err := cs.st.Restore(ctx, ckpt.Request{Target: recY.SHA, Label: "Y"}); err != nil {
			return fmt.Errorf("cairn: restore back to Y: %w", err)
		}
		if _, err := cs.seal(ctx, "restorebench Y again", nil); err != nil {
			return err
		}
		return check("cairn", cairnTree, "Y", wantY)
	}

	for run := 0; run <= cfg.Runs; run++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		counted := run > 0
		what := "warm-up run"
		if counted {
			what = fmt.Sprintf("run %d/%d", run, cfg.Runs)
		}
		timed := func(op string, f func() error) error {
			settle()
			t0 := time.Now()
			if err := f(); err != nil {
				return fmt.Errorf("%s: %w", op, err)
			}
			if counted {
				samples[op] = append(samples[op], time.Since(t0))
			}
			return nil
		}
		var rres ckpt.Outcome
		cairnSide := func() error {
			return timed(OpRestore, func() error {
				var err error
				rres, err = cs.st.Restore(ctx, ckpt.Request{Target: recX.SHA, Label: "X"})
				return err
			})
		}
		refSide := func() error {
			return timed(OpCheckout, func() error {
				_, err := ref.out(ctx, nil, "checkout", "-q", "--force", refX)
				return err
			})
		}
		first, second := cairnSide, refSide
		if run%2 == 1 {
			first, second = second, first
		}
		logf("%d files, %s: restoring to X", n, what)
		if err := first(); err != nil {
			return err
		}
		if err := second(); err != nil {
			return err
		}

		// Untimed: both work trees must now be X.
		if len(rres.Diff) > 0 {
			return fmt.Errorf("cairn's restore verified %d differences from X, first %s: %s", len(rres.Diff), rres.Diff[0].Path, rres.Diff[0].Reason)
		}
		if rres.PreRestore == nil {
			return errors.New("cairn's restore sealed no pre-restore checkpoint")
		}
		if w, d := len(rres.Write), len(rres.Delete); w != len(ch.edits)+len(ch.deletes) || d != len(ch.adds) {
			note("plan", "cairn's restore planned %d writes and %d deletions, the benchmark changed %d and added %d",
				w, d, len(ch.edits)+len(ch.deletes), len(ch.adds))
		}
		if err := check("cairn", cairnTree, "X", wantX); err != nil {
			return err
		}
		if err := check("git", refTree, "X", wantX); err != nil {
			return err
		}
		st, err := ref.out(ctx, nil, "status", "--porcelain", "-z", "--untracked-files=no")
		if err != nil {
			return err
		}
		if st != "" {
			return fmt.Errorf("git: git status after checking X out is not clean: %q", firstN(st, 200))
		}
		rep.Verified += 2

		// Untimed: back to Y, and Y sealed again, so the next restore starts
		// as after a normal run: work tree at Y, unchanged since its seal.
		logf("%d files, %s: back to Y", n, what)
		back, err := cs.st.Restore(ctx, ckpt.Request{Target: recY.SHA, Label: "Y"})
		if err != nil {
			return fmt.Errorf("cairn: restore back to Y: %w", err)
		}
		if len(back.Diff) > 0 {
			return fmt.Errorf("cairn: restore back to Y verified %d differences", len(back.Diff))
		}
		if _, err := cs.seal(ctx, "restorebench Y again", nil); err != nil {
			return err
		}
		if _, err := ref.out(ctx, nil, "checkout", "-q", "--force", refY); err != nil {
			return fmt.Errorf("git: checkout back to Y: %w", err)
		}
		if err := check("cairn", cairnTree, "Y", wantY); err != nil {
			return err
		}
		if err := check("git", refTree, "Y", wantY); err != nil {
			return err
		}

		// A restore told the watch's dirty set: nothing changed since Y's seal.
		if err := timed(OpRestoreWatched, func() error {
			r, err := cs.st.Restore(ctx, ckpt.Request{Target: recX.SHA, Label: "X", Changed: []string{}})
			if err == nil && len(r.Diff) > 0 {
				err = fmt.Errorf("verified %d differences from X", len(r.Diff))
			}
			return err
		}); err != nil {
			return err
		}
		if err := backToY(); err != nil {
			return err
		}

		// The same restore by a store opened for it, as a process of its own
		// would (the kernel's caches stay warm, as they do for git).
		if err := timed(OpRestoreCold, func() error {
			cold, err := openCairnEngine(ctx, cairnTree, filepath.Join(root, "cairn", "state"), "")
			if err != nil {
				return err
			}
			r, err := cold.st.Restore(ctx, ckpt.Request{Target: recX.SHA, Label: "X"})
			if cerr := cold.close(); err == nil {
				err = cerr
			}
			if err == nil && len(r.Diff) > 0 {
				err = fmt.Errorf("verified %d differences from X", len(r.Diff))
			}
			return err
		}); err != nil {
			return err
		}
		if err := backToY(); err != nil {
			return err
		}

		// The floor under the two whole-tree restores, on the same tree.
		if err := timed(OpWalkFloor, func() error {
			n, err := walkFloor(cairnTree)
			if err == nil && n < cfg.Files {
				err = fmt.Errorf("stat'ed %d entries, the tree holds %d files", n, cfg.Files)
			}
			return err
		}); err != nil {
			return err
		}
	}

	res.Notes = notes
	res.Ops = []OpResult{
		summarize(OpRestore, fmt.Sprintf("cairn restore to X (pre-restore checkpoint, plan, write, verify), %d files away, by a store open since the seals (a daemon's whose watch cannot vouch: whole tree reconciled)", rep.Changed), samples[OpRestore]),
		summarize(OpRestoreCold, "the same by a store opened for it and closed after (`cairn restore` with no daemon)", samples[OpRestoreCold]),
		summarize(OpRestoreWatched, "cairn restore told the watch's dirty set (pre-restore stages only that, as the daemon's once its barrier is read)", samples[OpRestoreWatched]),
		summarize(OpCheckout, "git checkout -q --force X alone, same tree, own store", samples[OpCheckout]),
		summarize(OpWalkFloor, "every folder listed and every file lstat'ed on every core, nothing else: the floor under a restore no watch vouches for", samples[OpWalkFloor]),
	}
	for _, op := range []struct{ op, name string }{{OpRestore, "restore/checkout"}, {OpRestoreCold, "restore-cold/checkout"}, {OpRestoreWatched, "restore-watched/checkout"}} {
		if a, b := medianOf(res.Ops, op.op), medianOf(res.Ops, OpCheckout); a > 0 && b > 0 {
			rt := Ratio{Name: op.name, Value: a / b, Target: 0.5} // issue 26
			met := rt.Value <= rt.Target
			rt.Met = &met
			res.Ratios = append(res.Ratios, rt)
		}
	}
	if a, b := medianOf(res.Ops, OpWalkFloor), medianOf(res.Ops, OpCheckout); a > 0 && b > 0 {
		res.Ratios = append(res.Ratios, Ratio{Name: "walk-floor/checkout", Value: a / b})
		if c := medianOf(res.Ops, OpRestoreWatched); c > 0 {
			// What a whole-tree restore adds to a told one is at least the
			// walk: an estimate of its least cost, not a bound.
			res.Ratios = append(res.Ratios, Ratio{Name: "(walk-floor+restore-watched)/checkout", Value: (a + c) / b})
		}
	}
	res.LoadAfter = loadAvg()
	rep.Result = res
	return nil
}

// commitAll commits the whole work tree (git add -A, no -f) and returns the
// commit.
func (s *refStore) commitAll(ctx context.Context, msg string) (string, error) {
	if _, err := s.out(ctx, nil, "add", "-A"); err != nil {
		return "", err
	}
	if _, err := s.out(ctx, nil, "commit", "-q", "--allow-empty", "-m", msg); err != nil {
		return "", err
	}
	return s.out(ctx, nil, "rev-parse", "--verify", "HEAD^{commit}")
}

// changeSet is what turns checkpoint X's tree into Y's: source files edited
// (a line appended), added and deleted. It is planned once and applied to
// each of the benchmark's identical trees.
type changeSet struct {
	edits   []string
	appends map[string]string
	adds    []string
	bodies  map[string][]byte
	deletes []string
}

// planChanges picks n distinct changes from t's source files: a tenth
// additions, a tenth deletions (at least one of each from 10 on), the rest
// edits. It does not touch the disk or t's lists.
func planChanges(t *tree, n int) changeSet {
	r := t.rng(streamMutate, 1<<20) // a stream the seal benchmark's runs never use
	nAdd := n / 10
	if n >= 10 {
		nAdd = max(1, nAdd)
	}
	nDel := nAdd
	nEdit := n - nAdd - nDel
	c := changeSet{appends: map[string]string{}, bodies: map[string][]byte{}}
	picked := map[string]bool{}
	pick := func() string {
		for {
			p := t.text[r.IntN(len(t.text))]
			if !picked[p] {
				picked[p] = true
				return p
			}
		}
	}
	for range nEdit {
		p := pick()
		c.edits = append(c.edits, p)
		// Appending always changes the size, so git's stat check sees it.
		c.appends[p] = fmt.Sprintf("// restorebench edit: %s\n", vocab[r.IntN(len(vocab))])
	}
	for range nDel {
		c.deletes = append(c.deletes, pick())
	}
	for i := range nAdd {
		p := path.Join(t.dirs[r.IntN(len(t.dirs))], fmt.Sprintf("restored%d.%s", i, exts[i%len(exts)]))
		c.adds = append(c.adds, p)
		c.bodies[p] = sourceText(r, minText+r.IntN(maxText-minText+1))
	}
	return c
}

// paths is every path the changes touch, sorted.
func (c changeSet) paths() []string {
	all := slices.Concat(c.edits, c.adds, c.deletes)
	slices.Sort(all)
	return all
}

// apply makes the changes in the tree at root.
func (c changeSet) apply(root string) error {
	for _, p := range c.edits {
		f, err := os.OpenFile(filepath.Join(root, filepath.FromSlash(p)), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return err
		}
		_, err = f.WriteString(c.appends[p])
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	for _, p := range c.deletes {
		if err := os.Remove(filepath.Join(root, filepath.FromSlash(p))); err != nil {
			return err
		}
	}
	for _, p := range c.adds {
		if err := os.WriteFile(filepath.Join(root, filepath.FromSlash(p)), c.bodies[p], 0o644); err != nil {
			return err
		}
	}
	return nil
}

// check compares every path the changes touch, on disk under root, with
// want (ls-tree of the checkpoint: path → "mode blob oid"): each file the
// checkpoint holds must be on disk with the same blob hash, and each it
// lacks must be absent. Files the changes did not touch were written by
// neither side.
func (c changeSet) check(root string, want map[string]string) error {
	var bad []string
	for _, p := range c.paths() {
		full := filepath.Join(root, filepath.FromSlash(p))
		meta, ok := want[p]
		if !ok {
			if _, err := os.Lstat(full); !errors.Is(err, fs.ErrNotExist) {
				bad = append(bad, "extra "+p)
			}
			continue
		}
		f := strings.Fields(meta)
		if len(f) != 3 {
			return fmt.Errorf("ls-tree entry %q for %s", meta, p)
		}
		body, err := os.ReadFile(full)
		if errors.Is(err, fs.ErrNotExist) {
			bad = append(bad, "missing "+p)
			continue
		} else if err != nil {
			return err
		}
		if blobID(body, len(f[2])) != f[2] {
			bad = append(bad, "differs "+p)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	if n := len(bad); n > 5 {
		bad = append(bad[:5], fmt.Sprintf("and %d more", n-5))
	}
	return errors.New(strings.Join(bad, ", "))
}

// blobID is git's object name of a blob: SHA-1, or SHA-256 for a store
// whose object names are 64 hex digits long.
func blobID(body []byte, hexLen int) string {
	var h hash.Hash = sha1.New()
	if hexLen == 2*sha256.Size {
		h = sha256.New()
	}
	h.Write([]byte("blob " + strconv.Itoa(len(body)) + "\x00"))
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

func firstN(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
