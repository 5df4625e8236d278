// Package sealbench measures how fast cairn seals checkpoints, against git
// pipelines measured in the same run on the same synthetic trees.
//
// Absolute times drift by tens of percent between runs on the same machine,
// so every figure comes with references timed alongside it, interleaved with
// cairn's runs (cairn first on even runs, the reference first on odd ones),
// and the ratios are the figures to trust. The page cache is not dropped
// (that needs root and measures the disk, not cairn); one warm-up run that
// is not counted comes before the counted ones instead, and sync(2) runs
// before every timed operation so one operation's writeback does not land in
// the next one's time. Other work on the machine does land in it: each size
// records the load average before and after, to judge a run by.
package sealbench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/restore/ckpt"
	"github.com/cairn-dev/cairn/snapshot"
)

// Config says what to measure. The zero value measures the default sizes.
type Config struct {
	// Sizes are the tracked files of each generated tree; default 1000,
	// 10000, 100000.
	Sizes []int
	// Runs is how many counted runs each operation gets per size, after one
	// warm-up run; default 5.
	Runs int
	// Dir is the scratch folder; default a new temporary folder. A fresh
	// sub-folder is made inside it either way.
	Dir string
	// KeepTrees keeps the generated trees and their long-lived stores (the
	// throw-away stores of first seals are always removed).
	KeepTrees bool
	// JSON prints one JSON document instead of tables.
	JSON bool
	// SkipSlow skips the runtime's pipelines (a) and (b) at sizes of SlowFiles
	// and more, where one run takes minutes. Without it they run once there.
	SkipSlow bool
	// IncrementalOnly times the incremental seals (both engines) and the
	// floor alone: no pipelines, reconciles or first seals, whose hundreds
	// of MB written and deleted per run at 100k files take minutes and
	// leave the disk busy between the incremental seals.
	IncrementalOnly bool
	// ReconcileOnly times the incremental seals and the reconciles beside
	// git status: no pipelines and no first seals (seconds per run instead
	// of minutes at 100k files).
	ReconcileOnly bool
	// FirstOnly times the first seals alone, cairn's paired with `git add
	// -A` + commit on the same tree: no long-lived stores, incremental
	// seals, pipelines or reconciles (minutes of setup at 100k files).
	FirstOnly bool
	// SealChild, with FirstOnly, runs each of cairn's first seals in a
	// child process, so its peak RSS is the seal's alone: the command and
	// its first arguments, to which "--tree T --state S" are added; the
	// child prints what SealOnce prints.
	SealChild []string
	// Seed makes the trees and mutations; default 1.
	Seed uint64
	// Progress, when set, gets a line as each step starts: a run at 100k
	// files takes several minutes.
	Progress io.Writer
}

// SlowFiles is the tree size from which the runtime's pipelines run once
// instead of Runs times (or not at all with SkipSlow).
const SlowFiles = 50_000

// Operation names, as they appear in the JSON result.
const (
	OpIncremental = "cairn-incremental"
	OpIncrGit     = "cairn-incremental-git"
	OpFloor       = "ref-floor"
	OpSeedA       = "ref-seed-a"
	OpSeedB       = "ref-seed-b"
	OpReconcile   = "cairn-reconcile-unchanged"
	OpReconCkpt   = "cairn-reconcile-checkpoint"
	OpStatus      = "ref-status"
	OpFirstSeal   = "cairn-first-seal"
	OpAddAll      = "ref-addall"
	OpResticFirst = "restic-first"
	OpResticAgain = "restic-again"
)

var opOrder = []struct{ name, what string }{
	{OpIncremental, "cairn incremental seal (20 edited, 5 added, 5 deleted), in-process engine"},
	{OpIncrGit, "cairn incremental seal, the same change, engine = \"git\""},
	{OpFloor, "floor: update-index --stdin of the 30 paths + write-tree + commit-tree + update-ref"},
	{OpSeedA, "seed (a): reset --mixed + add -f 100 paths/process over every file + commit"},
	{OpSeedB, "seed (b): read-tree parent + add -f 100 paths/process over every file + commit-tree"},
	{OpReconcile, "cairn full reconcile, nothing changed, as the daemon runs it (autosave, skip unchanged: writes nothing)"},
	{OpReconCkpt, "cairn full reconcile, nothing changed, recorded as a manual checkpoint (commit, ref, ledger)"},
	{OpStatus, "git status --porcelain -z --untracked-files=all, nothing changed"},
	{OpFirstSeal, "cairn first seal, fresh store"},
	{OpAddAll, "git add -A + commit, fresh store"},
	{OpResticFirst, "restic backup of the same files (--files-from-raw), fresh repository (when restic is installed)"},
	{OpResticAgain, "restic backup again, nothing changed (when restic is installed)"},
}

var ratioOrder = []struct {
	name, num, den string
	target         float64 // 0: none, report only
}{
	{"incremental/floor", OpIncremental, OpFloor, 2},
	{"incremental/git-engine", OpIncremental, OpIncrGit, 0},
	{"git-engine/floor", OpIncrGit, OpFloor, 0},
	{"seed-a/incremental", OpSeedA, OpIncremental, 0},
	{"seed-b/incremental", OpSeedB, OpIncremental, 0},
	{"reconcile/status", OpReconcile, OpStatus, 1},
	{"reconcile-checkpoint/status", OpReconCkpt, OpStatus, 0},
	{"first-seal/addall", OpFirstSeal, OpAddAll, 0.3},
	{"first-seal/restic-first", OpFirstSeal, OpResticFirst, 0},
	{"reconcile-checkpoint/restic-again", OpReconCkpt, OpResticAgain, 0},
}

// Report is the machine-readable result.
type Report struct {
	Git    string       `json:"git"`
	GOOS   string       `json:"goos"`
	GOARCH string       `json:"goarch"`
	CPUs   int          `json:"cpus"`
	Runs   int          `json:"runs"`
	Seed   uint64       `json:"seed"`
	Sizes  []SizeResult `json:"sizes"`
}

// SizeResult is everything measured on one tree.
type SizeResult struct {
	Files         int        `json:"files"`        // tracked files
	IgnoredFiles  int        `json:"ignoredFiles"` // present on disk, left out by .gitignore
	Bytes         int64      `json:"bytes"`        // written by the generator
	GenerateMS    float64    `json:"generateMs"`
	SetupMS       float64    `json:"setupMs"` // first seal of the long-lived stores
	Ops           []OpResult `json:"ops"`
	Ratios        []Ratio    `json:"ratios"`
	Notes         []string   `json:"notes,omitempty"`
	SlowPipelines string     `json:"slowPipelines"`        // the runtime's pipelines (a) and (b): "every run", "once", "skipped" or "incremental only"
	WarmupRuns    int        `json:"warmupRuns"`           // not counted
	Runs          int        `json:"runs"`                 // counted
	LoadBefore    string     `json:"loadBefore,omitempty"` // /proc/loadavg, where there is one
	LoadAfter     string     `json:"loadAfter,omitempty"`
	// Store sizes right after the last run's first seals (bytes under
	// objects/): cairn's, git's after add -A + commit, and git's after a
	// `git gc` of it (not timed).
	FirstSealBytes int64 `json:"firstSealBytes,omitempty"`
	// The largest peak RSS of cairn's first seals, each run in a child
	// process (FirstOnly with SealChild), in bytes: as wait4 reports it
	// (the largest of the child, the gits it ran and this process: Go
	// starts a child by vfork, and exec records the parent's peak as the
	// child's), and the child's own (its VmHWM), the figure that counts.
	FirstSealPeakRSS    int64 `json:"firstSealPeakRss,omitempty"`
	FirstSealOwnPeakRSS int64 `json:"firstSealOwnPeakRss,omitempty"`
	AddAllBytes         int64 `json:"addAllBytes,omitempty"`
	GCBytes             int64 `json:"gcBytes,omitempty"`
}

// OpResult is one operation's timings over the counted runs.
type OpResult struct {
	Name      string    `json:"name"`
	What      string    `json:"what"`
	Runs      int       `json:"runs"` // 0 when skipped
	MedianMS  float64   `json:"medianMs"`
	MinMS     float64   `json:"minMs"`
	MaxMS     float64   `json:"maxMs"`
	SamplesMS []float64 `json:"samplesMs"`
}

// Ratio is a quotient of two medians. Met is set when there is a target.
type Ratio struct {
	Name   string  `json:"name"`
	Value  float64 `json:"value"`
	Target float64 `json:"target,omitempty"`
	Met    *bool   `json:"met,omitempty"`
}

// Run generates a tree per size, measures cairn and the references on it,
// and writes a table per size to w as each size finishes (or, with
// cfg.JSON, one Report at the end).
func Run(ctx context.Context, cfg Config, w io.Writer) error {
	if len(cfg.Sizes) == 0 {
		cfg.Sizes = []int{1000, 10000, 100000}
	}
	if cfg.Runs <= 0 {
		cfg.Runs = 5
	}
	if cfg.Seed == 0 {
		cfg.Seed = 1
	}
	for _, n := range cfg.Sizes {
		if n < minTreeFiles {
			return fmt.Errorf("sealbench: size %d is below the minimum of %d files", n, minTreeFiles)
		}
	}
	logf := progressf(cfg.Progress, "sealbench")
	root, env, cleanup, err := scratch(ctx, cfg.Dir, "sealbench-", cfg.KeepTrees, logf)
	if err != nil {
		return err
	}
	defer cleanup()

	rep := Report{Git: env.version.String(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH,
		CPUs: runtime.NumCPU(), Runs: cfg.Runs, Seed: cfg.Seed}
	for _, n := range cfg.Sizes {
		dir := filepath.Join(root, fmt.Sprintf("files-%d", n))
		res, err := runSize(ctx, cfg, env, n, dir, logf)
		if !cfg.KeepTrees {
			// Free the disk before the next, larger size.
			os.RemoveAll(dir)
		}
		if err != nil {
			return fmt.Errorf("sealbench: %d files: %w", n, err)
		}
		rep.Sizes = append(rep.Sizes, res)
		if !cfg.JSON {
			if err := writeTable(w, rep.Git, cfg.Runs, res); err != nil {
				return err
			}
		}
	}
	if cfg.JSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return nil
}

// runSize measures every operation on one tree of n files under dir.
func runSize(ctx context.Context, cfg Config, env *gitEnv, n int, dir string, logf func(string, ...any)) (SizeResult, error) {
	res := SizeResult{Files: n, WarmupRuns: 1, Runs: cfg.Runs, LoadBefore: loadAvg()}
	treeDir := filepath.Join(dir, "tree")

	logf("%d files: generating the tree", n)
	start := time.Now()
	tr, err := generate(ctx, treeDir, n, cfg.Seed)
	if err != nil {
		return res, err
	}
	res.GenerateMS = ms(time.Since(start))
	res.IgnoredFiles = tr.ignored
	res.Bytes = tr.bytes

	if cfg.FirstOnly {
		res.SlowPipelines = "first seals only"
		if err := runFirstOnly(ctx, cfg, env, treeDir, dir, &res, logf); err != nil {
			return res, err
		}
		res.Ratios = ratios(res.Ops)
		res.LoadAfter = loadAvg()
		return res, nil
	}

	// The long-lived stores start with the whole tree sealed, as a
	// workspace's store does before its incremental checkpoints.
	logf("%d files: setting up cairn's store and the reference stores", n)
	start = time.Now()
	cs, err := openCairn(ctx, treeDir, filepath.Join(dir, "cairn-state"))
	if err != nil {
		return res, err
	}
	defer cs.close()
	if _, err := cs.seal(ctx, "sealbench setup", nil); err != nil {
		return res, err
	}
	// The git engine on a store of its own over the same tree.
	csGit, err := openCairnEngine(ctx, treeDir, filepath.Join(dir, "cairn-git-state"), snapshot.EngineGit)
	if err != nil {
		return res, err
	}
	defer csGit.close()
	if _, err := csGit.seal(ctx, "sealbench setup", nil); err != nil {
		return res, err
	}
	floorDir := filepath.Join(dir, "ref-floor")
	floor, err := env.newRefStore(ctx, floorDir, treeDir, filepath.Join(floorDir, "sealbench-index"))
	if err != nil {
		return res, err
	}
	slow := n >= SlowFiles
	res.SlowPipelines = "every run"
	switch {
	case slow && cfg.SkipSlow:
		res.SlowPipelines = "skipped"
	case slow:
		res.SlowPipelines = "once"
	}
	if cfg.IncrementalOnly {
		res.SlowPipelines = "incremental only"
	} else if cfg.ReconcileOnly {
		res.SlowPipelines = "reconcile only"
	}
	var seedA, seedB *refStore
	if res.SlowPipelines == "every run" || res.SlowPipelines == "once" {
		if seedA, err = env.newRefStore(ctx, filepath.Join(dir, "ref-a"), treeDir, ""); err != nil {
			return res, err
		}
		bDir := filepath.Join(dir, "ref-b")
		if seedB, err = env.newRefStore(ctx, bDir, treeDir, filepath.Join(bDir, "sealbench-index")); err != nil {
			return res, err
		}
	}
	res.SetupMS = ms(time.Since(start))

	samples := map[string][]time.Duration{}
	// A note repeats in every run that shows the same problem: keep the
	// first occurrence of each kind and count the others.
	type noted struct {
		msg string
		n   int
	}
	var notes []*noted
	seen := map[string]*noted{}
	note := func(kind, format string, args ...any) {
		if nd := seen[kind]; nd != nil {
			nd.n++
			return
		}
		nd := &noted{msg: fmt.Sprintf(format, args...), n: 1}
		seen[kind] = nd
		notes = append(notes, nd)
	}

	for run := 0; run <= cfg.Runs; run++ {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		counted := run > 0
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
		// pair times cairn's operation and its reference, cairn first on
		// even runs and second on odd ones, so drift and cache effects
		// fall on both alike.
		pair := func(cairnOp string, cf func() error, refOp string, rf func() error) error {
			first, second := func() error { return timed(cairnOp, cf) }, func() error { return timed(refOp, rf) }
			if run%2 == 1 {
				first, second = second, first
			}
			if err := first(); err != nil {
				return err
			}
			return second()
		}
		what := "warm-up run"
		if counted {
			what = fmt.Sprintf("run %d/%d", run, cfg.Runs)
		}

		changed, err := tr.mutate(run)
		if err != nil {
			return res, err
		}
		logf("%d files, %s: incremental seal", n, what)
		var incr ckpt.Record
		err = pair(OpIncremental, func() error {
			var err error
			incr, err = cs.seal(ctx, "sealbench incremental", changed)
			return err
		}, OpFloor, func() error { return floor.floor(ctx, changed) })
		if err != nil {
			return res, err
		}
		floorTree, err := floor.treeOf(ctx, floor.parent)
		if err != nil {
			return res, err
		}
		if err := sameTree(ctx, cs, incr, floor, floorTree, "incremental seal", note); err != nil {
			return res, err
		}
		// The git engine seals the same change into its own store, always
		// after the pair above (its store is separate: it shares no cache
		// with the in-process engine's).
		var incrGit ckpt.Record
		if err := timed(OpIncrGit, func() error {
			var err error
			incrGit, err = csGit.seal(ctx, "sealbench incremental", changed)
			return err
		}); err != nil {
			return res, err
		}
		if err := sameTree(ctx, csGit, incrGit, floor, floorTree, "incremental seal (git engine)", note); err != nil {
			return res, err
		}

		// At SlowFiles and over, the runtime's pipelines run in the first
		// counted run only: they cover everything that changed since
		// their last commit, so skipping runs costs them nothing.
		if cfg.IncrementalOnly {
			continue
		}
		if seedA != nil && (!slow || run == 1) {
			logf("%d files, %s: seed pipelines (a) and (b)", n, what)
			files := tr.files()
			if err := timed(OpSeedA, func() error { return seedA.seedA(ctx, files) }); err != nil {
				return res, err
			}
			if err := timed(OpSeedB, func() error { return seedB.seedB(ctx, files) }); err != nil {
				return res, err
			}
		}

		logf("%d files, %s: reconcile with nothing changed", n, what)
		var recon ckpt.Record
		var status string
		err = pair(OpReconcile, func() error {
			rec, err := cs.reconcile(ctx)
			if err == nil && rec.SHA != "" {
				err = fmt.Errorf("sealbench: the reconcile found a change (checkpoint %s) where nothing changed", rec.ID)
			}
			return err
		}, OpStatus, func() error {
			var err error
			status, err = floor.status(ctx)
			return err
		})
		if err != nil {
			return res, err
		}
		if err := timed(OpReconCkpt, func() error {
			var err error
			recon, err = cs.seal(ctx, "sealbench reconcile", nil)
			return err
		}); err != nil {
			return res, err
		}
		if status != "" {
			note("status", "git status was not clean on the floor's store (%d bytes of output): the floor missed a change", len(status))
		}
		if err := sameTree(ctx, cs, recon, floor, floorTree, "full reconcile", note); err != nil {
			return res, err
		}

		if cfg.ReconcileOnly {
			continue
		}
		logf("%d files, %s: first seals on fresh stores", n, what)
		if err := firstSeals(ctx, env, treeDir, filepath.Join(dir, fmt.Sprintf("first-%d", run)), floor, floorTree, timed, pair, note, &res); err != nil {
			return res, err
		}
		if run < cfg.Runs { // nothing timed follows the last run
			quiesce()
		}
	}

	for _, nd := range notes {
		res.Notes = append(res.Notes, fmt.Sprintf("%s [in %d of %d runs, warm-up included; first shown]", nd.msg, nd.n, cfg.Runs+1))
	}
	for _, op := range opOrder {
		res.Ops = append(res.Ops, summarize(op.name, op.what, samples[op.name]))
	}
	res.Ratios = ratios(res.Ops)
	res.LoadAfter = loadAvg()
	return res, nil
}

// ratios are the quotients of ratioOrder whose operations both ran.
func ratios(ops []OpResult) []Ratio {
	var out []Ratio
	for _, r := range ratioOrder {
		num, den := medianOf(ops, r.num), medianOf(ops, r.den)
		if num == 0 || den == 0 {
			continue // an operation was skipped
		}
		rt := Ratio{Name: r.name, Value: num / den, Target: r.target}
		if r.target > 0 {
			met := rt.Value <= r.target
			rt.Met = &met
		}
		out = append(out, rt)
	}
	return out
}

// firstSeals times cairn's first seal and `git add -A` + commit, each on a
// fresh store over the same tree, and removes both stores afterwards: at
// 100k files each holds hundreds of MB of loose objects.
func firstSeals(ctx context.Context, env *gitEnv, treeDir, dir string, floor *refStore, want string,
	timed func(string, func() error) error, pair func(string, func() error, string, func() error) error,
	note func(kind, format string, args ...any), res *SizeResult) error {
	defer os.RemoveAll(dir)
	cs, err := openCairn(ctx, treeDir, filepath.Join(dir, "cairn-state"))
	if err != nil {
		return err
	}
	defer cs.close()
	ref, err := env.initStore(ctx, filepath.Join(dir, "ref"), treeDir, "")
	if err != nil {
		return err
	}
	var rec ckpt.Record
	err = pair(OpFirstSeal, func() error {
		var err error
		rec, err = cs.seal(ctx, "sealbench first seal", nil)
		return err
	}, OpAddAll, func() error { return ref.addAll(ctx) })
	if err != nil {
		return err
	}
	if err := sameTree(ctx, cs, rec, floor, want, "first seal", note); err != nil {
		return err
	}
	got, err := ref.treeOf(ctx, "HEAD")
	if err != nil {
		return err
	}
	if got != want {
		note("addall", "git add -A sealed tree %s, the floor %s", got, want)
	}
	if err := resticBackups(ctx, treeDir, filepath.Join(dir, "restic"), floor, timed); err != nil {
		return err
	}
	// What each store takes on disk, and git's after a gc (untimed).
	res.FirstSealBytes = dirBytes(filepath.Join(cs.st.GitDir(), "objects"))
	res.AddAllBytes = dirBytes(filepath.Join(dir, "ref", "objects"))
	if _, err := ref.out(ctx, nil, "gc", "-q"); err != nil {
		return err
	}
	res.GCBytes = dirBytes(filepath.Join(dir, "ref", "objects"))
	return nil
}

// resticBackups times restic's first backup of the files cairn seals (the
// floor's, named with --files-from-raw: restic reads no .gitignore) into a
// fresh repository, then a second one with nothing changed. Without
// restic on PATH it does nothing: the operations show no runs.
func resticBackups(ctx context.Context, treeDir, dir string, floor *refStore, timed func(string, func() error) error) error {
	restic, err := exec.LookPath("restic")
	if err != nil {
		return nil
	}
	defer os.RemoveAll(dir)
	list, err := floor.out(ctx, nil, "ls-files", "-z")
	if err != nil {
		return err
	}
	listFile := filepath.Join(dir, "files")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(listFile, []byte(list), 0o644); err != nil {
		return err
	}
	run := func(args ...string) error {
		cmd := exec.CommandContext(ctx, restic, append([]string{"--quiet", "--no-cache", "-r", filepath.Join(dir, "repo")}, args...)...)
		cmd.Dir = treeDir
		cmd.Env = append(os.Environ(), "RESTIC_PASSWORD=sealbench")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("sealbench: restic %s: %v: %s", args[0], err, out)
		}
		return nil
	}
	if err := run("init"); err != nil {
		return err
	}
	backup := func() error { return run("backup", "--files-from-raw", listFile) }
	if err := timed(OpResticFirst, backup); err != nil {
		return err
	}
	return timed(OpResticAgain, backup)
}

// dirBytes is the space the files under dir take (allocated blocks).
func dirBytes(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			n += diskBytes(fi)
		}
		return nil
	})
	return n
}

// sameTree notes when cairn sealed another tree than the floor holds for
// the same disk: the timings would then compare different work.
func sameTree(ctx context.Context, cs *cairnStore, rec ckpt.Record, floor *refStore, want, what string, note func(kind, format string, args ...any)) error {
	got, err := cs.treeOf(ctx, rec.SHA)
	if err != nil {
		return err
	}
	if got != want {
		mine, err := lsTree(ctx, cs.objects(ctx), got)
		if err != nil {
			return err
		}
		theirs, err := lsTree(ctx, floor.git, want)
		if err != nil {
			return err
		}
		note("tree "+what, "cairn's %s sealed another tree than git (cairn reported %d changed, %d added, %d removed): %s",
			what, rec.Changed, rec.Added, rec.Removed, treeDiff(mine, theirs))
	}
	if rec.State != "" && rec.State != ckpt.StateOK {
		note("state "+what, "cairn's %s ended %s: %v", what, rec.State, rec.Issues)
	}
	return nil
}

func summarize(name, what string, d []time.Duration) OpResult {
	r := OpResult{Name: name, What: what, Runs: len(d), SamplesMS: []float64{}}
	if len(d) == 0 {
		return r
	}
	for _, x := range d {
		r.SamplesMS = append(r.SamplesMS, ms(x))
	}
	s := slices.Clone(r.SamplesMS)
	slices.Sort(s)
	r.MinMS, r.MaxMS = s[0], s[len(s)-1]
	if len(s)%2 == 1 {
		r.MedianMS = s[len(s)/2]
	} else {
		r.MedianMS = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return r
}

func medianOf(ops []OpResult, name string) float64 {
	for _, o := range ops {
		if o.Name == name {
			return o.MedianMS
		}
	}
	return 0
}

// loadAvg returns the 1, 5 and 15 minute load averages, or "" where the
// system does not publish them.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// The helpers other benchmarks of cairn share (cairn bench daemon).

// Settle flushes dirty pages before a timed step (see settle).
func Settle() { settle() }

// LoadAvg is the 1, 5 and 15 minute load averages, or "".
func LoadAvg() string { return loadAvg() }

// FormatMS prints milliseconds rounded to what a noisy benchmark can claim.
func FormatMS(msec float64) string { return dur(msec) }

// progressf prints progress lines to w (nil: nowhere), prefixed by name.
func progressf(w io.Writer, name string) func(string, ...any) {
	return func(format string, args ...any) {
		if w != nil {
			fmt.Fprintf(w, name+": "+format+"\n", args...)
		}
	}
}

// scratch makes a benchmark's scratch folder inside dir (default: the
// system's temporary folder) and the git environment its reference stores
// use. cleanup removes the folder unless keep is set.
func scratch(ctx context.Context, dir, prefix string, keep bool, logf func(string, ...any)) (string, *gitEnv, func(), error) {
	if dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", nil, nil, err
		}
	}
	root, err := os.MkdirTemp(dir, prefix)
	if err != nil {
		return "", nil, nil, err
	}
	cleanup := func() { os.RemoveAll(root) }
	if keep {
		logf("trees and stores kept in %s", root)
		cleanup = func() {}
	}
	env, err := newGitEnv(ctx, filepath.Join(root, "home"))
	if err != nil {
		cleanup()
		return "", nil, nil, err
	}
	return root, env, cleanup, nil
}
