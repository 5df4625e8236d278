package snapshot

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/platform"
	"github.com/cairn-dev/cairn/restore/ckpt"
	"github.com/cairn-dev/cairn/snapshot/gitobj"
)

// Maintenance: packing refs and objects and pruning unreachable objects, so
// neither the store's size nor the time of a seal or an open grows with its
// history (docs/operating.md, "Maintenance").
//
// Maintenance runs in bounded steps with seals between them (Maintain,
// maintainSteps): the steps that may delete an object hold the store lock for
// themselves only, the repacks none. Every step leaves a store git accepts if
// killed (git writes packs under tmp_ names and renames them in; stale ones
// are swept at the next open or maintenance), proven by the fault points
// below and TestMaintainCrashAtEveryStep.

// DefaultPruneGrace is how long an unreachable loose object is kept before
// prune removes it (git's own default for gc).
const DefaultPruneGrace = 14 * 24 * time.Hour

// PruneNow, as MaintainOptions.PruneGrace, prunes every unreachable object
// regardless of age (tests; never for a store a seal may be writing into).
const PruneNow time.Duration = -1

// MaintainOptions configure one maintenance run.
type MaintainOptions struct {
	// PruneGrace: unreachable loose objects younger than this stay. Zero
	// means DefaultPruneGrace; PruneNow prunes them all.
	PruneGrace time.Duration
	// Busy, when set, is asked before each step; a non-empty answer (why)
	// stops the run there, reported as Skipped. The daemon refuses while a
	// Hankweave runtime holds its lock or a restore starts.
	Busy func() string
	// MinFree is extra room to leave on the filesystem beyond what a repack
	// may need; default 16 MiB.
	MinFree uint64
	// Full repacks everything into one pack and drops unreachable packed
	// objects (checkpoints retention dropped) past the grace period; its cost
	// grows with the store, so the daemon runs it rarely (FullEvery).
	Full bool
	// Step, when set, is told before each step runs: its number (from 1),
	// how many the run has, and its name.
	Step func(i, n int, name string)
}

// FullEvery is how often the daemon's maintenance is a full one.
const FullEvery = 7 * 24 * time.Hour

// StoreStats describe a store on disk.
type StoreStats struct {
	Bytes        int64 `json:"bytes"`        // everything under GIT_DIR
	LooseObjects int64 `json:"looseObjects"` //
	LooseBytes   int64 `json:"looseBytes"`   //
	Packs        int64 `json:"packs"`        //
	PackBytes    int64 `json:"packBytes"`    //
	PackedObjs   int64 `json:"packedObjects"`
}

// MaintainResult is what one maintenance run did.
type MaintainResult struct {
	Start    time.Time     `json:"start"`
	Duration time.Duration `json:"durationNs"`
	// Skipped says why maintenance did not run (or stopped early); the steps
	// before it (Steps) did run.
	Skipped string     `json:"skipped,omitempty"`
	Steps   []string   `json:"steps,omitempty"` // pack-refs, prune, repack geometric|incremental|full, expire
	Before  StoreStats `json:"before"`
	After   StoreStats `json:"after"`
}

// Maintenance steps, each recorded in maintenance.json when it finishes.
const (
	StepPackRefs    = "pack-refs"
	StepPrune       = "prune"
	StepGeometric   = "repack geometric"
	StepIncremental = "repack incremental" // git older than 2.32
	StepFull        = "repack full"
	StepExpire      = "expire"
)

// maintStep is one bounded step of a maintenance run.
type maintStep struct {
	name string
	// locked steps run under the store lock: a seal that arrives waits for
	// the step, never for the run. The others run beside seals.
	locked bool
	run    func(ctx context.Context) error
}

// Maintain packs refs and objects and prunes unreachable objects past the
// grace period, in bounded steps (docs/operating.md, "Maintenance"). Seals run between
// the steps: each locked step holds the store lock for itself only, and the
// long repacks hold it not at all (see maintainSteps for why that is safe).
// The steps run oldest first (by when each last finished, kept in
// maintenance.json), so a run cut short (cancelled, Busy) leaves the next
// one to begin with what it did not reach. A second maintenance of the same
// store (another process) is refused with Skipped, never run alongside.
func (s *Store) Maintain(ctx context.Context, opts MaintainOptions) (res MaintainResult, err error) {
	res = MaintainResult{Start: time.Now().UTC()}
	defer func() { res.Duration = time.Since(res.Start) }()
	if opts.PruneGrace == 0 {
		opts.PruneGrace = DefaultPruneGrace
	}
	if opts.MinFree == 0 {
		opts.MinFree = 16 << 20
	}
	if err := s.checkLinks(); err != nil {
		return res, err
	}
	lk, err := platform.TryLock(filepath.Join(s.gitDir, cairnSubdir, "maintain.lock"))
	if err != nil {
		if errors.Is(err, platform.ErrLocked) {
			res.Skipped = "maintenance already running (" + err.Error() + ")"
			res.Before, _ = s.Stats(ctx)
			res.After = res.Before
			return res, nil
		}
		return res, err
	}
	defer lk.Unlock()

	if res.Before, err = s.Stats(ctx); err != nil {
		return res, err
	}
	res.After = res.Before
	busy := func() bool {
		if ctx.Err() != nil {
			res.Skipped = "cancelled"
			return true
		}
		if opts.Busy != nil {
			if why := opts.Busy(); why != "" {
				res.Skipped = why
				return true
			}
		}
		return false
	}
	if busy() {
		return res, nil
	}
	// Temporary packs of a repack killed earlier would count against the
	// room; a keep file an expire step left (killed) would hold its pack
	// out of every later repack.
	if err := s.withLock(ctx, func() error {
		s.sweepTmpObjects(staleTmpAge)
		s.sweepCairnKeeps()
		return nil
	}); err != nil {
		return res, err
	}

	// A repack writes a new pack before it deletes what it replaces: at most
	// every loose object and every pack it merges (all of them, at worst).
	need := uint64(res.Before.LooseBytes+res.Before.PackBytes) + opts.MinFree
	if free, _, err := platform.FreeSpace(s.gitDir); err == nil && free < need {
		res.Skipped = fmt.Sprintf("low disk space: %s free, a repack may need %s", ckpt.HumanBytes(int64(free)), ckpt.HumanBytes(int64(need)))
		return res, nil
	}

	prev, _ := s.LastMaintenance()
	steps := s.maintainSteps(opts, prev)
	for i, st := range steps {
		if busy() {
			break
		}
		if opts.Step != nil {
			opts.Step(i+1, len(steps), st.name)
		}
		run := func() error { return st.run(ctx) }
		if st.locked {
			s.yieldToSeals(ctx)
			err = s.withLock(ctx, run)
		} else {
			err = run()
		}
		if err != nil {
			if ctx.Err() != nil {
				res.Skipped = "cancelled"
				break // a killed git: the step is done again next time
			}
			return s.finish(ctx, res, fmt.Errorf("%s: %w", st.name, err))
		}
		res.Steps = append(res.Steps, st.name)
		s.noteStep(st.name, time.Now().UTC())
	}
	return s.finish(ctx, res, nil)
}

// maintainSteps are the steps of one run, oldest first.
//
// Which steps hold the store lock, and why the others may run beside a seal
// (a seal of either engine: git's update-index/write-tree/commit-tree, or
// the in-process one, which writes one pack per seal, merges small packs
// under the lock, checks presence with gitobj.Known and reads packed objects
// through a long-running git cat-file):
//   - Whatever deletes an object that may still be wanted holds the lock:
//     prune and expire. An unreachable object past the grace may be named
//     again by a seal that found it stored (a file put back as it was in a
//     dropped checkpoint): git's answer, freshening its time, does not close
//     the race (git-gc(1), NOTES) and the in-process engine does not freshen.
//     Under the lock the step sees every ref a seal moved before it, and the
//     next seal's Known.Refresh sees what it removed.
//   - pack-refs holds it: a seal's compare-and-swap of a ref must not meet
//     packed-refs.lock, nor a ref read meet a ref moving between files.
//   - The repacks (geometric, full) run without -d: they only write packs
//     (under a temporary name, renamed in, index last), reading objects
//     that nothing deletes meanwhile. A geometric repack packs every object
//     of the packs it merges and every loose object; the full one, without
//     an expiration, puts what is unreachable in a cruft pack (git 2.37+).
//     What -d would do is done after, under the lock (dropRedundant): a
//     pack goes only when every object in it is in a pack written since,
//     and loose objects only once packed (prune-packed, which also removes
//     emptied objects/xx folders: beside a seal by git, writing a loose
//     object into one, that failed the write and left the path out of the
//     checkpoint, as TestSealConcurrentWithMaintain once saw). So every
//     object stays readable throughout; packs and loose objects a seal
//     writes meanwhile are not the repack's. A pack the in-process engine
//     merged under the lock while git read it would make git fail (nothing
//     lost; the step runs again next time): while a repack runs, this
//     process's seals do not merge (Store.repacking, set under the lock, so
//     no merge is under way when the repack starts). What was removed, a
//     long-running cat-file still holds open: releasePacks restarts it.
//   - Dropping unreachable packed objects past the grace is the expire step,
//     under the lock: a cruft repack with the full step's pack kept (a .keep
//     file), so it walks what is reachable and rewrites only the newer packs
//     and the cruft pack, not the history the full step just packed.
//
// Before the steps were split and seals let between them, the whole run held
// the lock and every seal cancelled it, so a workspace sealing every few
// hundred milliseconds was never maintained.
func (s *Store) maintainSteps(opts MaintainOptions, prev LastMaintenance) []maintStep {
	expire := pruneExpire(opts.PruneGrace)
	cruft := s.git.Version.AtLeast(Version{2, 37, 0})
	var fullPack string // the pack the full step wrote, kept through expire
	steps := []maintStep{
		{name: StepPackRefs, locked: true, run: func(ctx context.Context) error {
			s.clearStalePackedRefsLock()
			_, err := s.git.Run(ctx, nil, "pack-refs", "--all", "--prune")
			faultPoint("pack-refs")
			return err
		}},
		// Unreachable loose objects past the grace go before a repack packs
		// them. Bounded by one walk of what is reachable, and only when some
		// loose object is old enough to go.
		{name: StepPrune, locked: true, run: func(ctx context.Context) error {
			if !s.looseOlderThan(opts.PruneGrace) {
				return nil
			}
			_, err := s.bgGit().Run(ctx, nil, "prune", "--expire="+expire)
			faultPoint("prune")
			return err
		}},
	}
	if opts.Full {
		// Everything reachable into one pack; the rest kept (cruft or
		// loose) for expire. Its cost grows with the store: it runs
		// beside seals.
		// Without -d (repackBeside): unreachable objects stay where they
		// are (older git) or go to a cruft pack too (2.37+).
		args := []string{"repack", "-a", "-q"}
		if cruft {
			args = []string{"repack", "-q", "--cruft"}
		}
		steps = append(steps, maintStep{name: StepFull, run: func(ctx context.Context) error {
			before := s.packNames()
			if err := s.repackBeside(ctx, args); err != nil {
				return err
			}
			fullPack = s.newestNonCruftPack(before)
			return nil
		}})
		if cruft {
			steps = append(steps, maintStep{name: StepExpire, locked: true, run: func(ctx context.Context) error {
				keep := ""
				if fullPack != "" {
					keep = strings.TrimSuffix(fullPack, ".pack") + ".keep"
					if err := os.WriteFile(keep, []byte(cairnKeep), 0o644); err != nil {
						return err
					}
					defer os.Remove(keep)
				}
				_, err := s.bgGit().Run(ctx, nil, "repack", "-d", "-q", "--cruft", "--cruft-expiration="+expire)
				faultPoint("expire")
				s.inproc.releasePacks()
				return err
			}})
		}
	} else {
		// Loose objects and the packs that break a factor-2 progression
		// (git 2.32+): its cost follows what is new, not the history.
		name, args := StepGeometric, []string{"repack", "-q", "--geometric=2"}
		if !s.git.Version.AtLeast(Version{2, 32, 0}) {
			name, args = StepIncremental, []string{"repack", "-q", "-l"}
		}
		steps = append(steps, maintStep{name: name, run: func(ctx context.Context) error {
			return s.repackBeside(ctx, args)
		}})
	}
	// Oldest debt first. Prune stays before a repack (else the repack packs
	// what prune would drop) and expire after the full repack it builds on.
	// pack-refs is independent of the object steps: it goes first or last
	// by its own age; the object steps keep their order.
	if prev.Steps[StepPackRefs].After(prev.Steps[steps[1].name]) {
		return append(append([]maintStep(nil), steps[1:]...), steps[0])
	}
	return steps
}

// bgGit runs maintenance's long steps at the lowest priority.
func (s *Store) bgGit() *Git {
	g := *s.git
	g.Background = true
	return &g
}

// repackBeside runs a repack without the store lock, seals going on beside
// it, and without -d: it only writes packs. Then, under the lock, a short
// settle removes what the new packs made redundant (dropRedundant). While
// it runs, this process's in-process seals do not merge their packs.
func (s *Store) repackBeside(ctx context.Context, args []string) error {
	var before map[string]bool
	if err := s.withLock(ctx, func() error {
		s.repacking.Store(true)
		before = s.packNames() // no merge under way: the lock is held
		return nil
	}); err != nil {
		return err
	}
	_, err := s.bgGit().Run(ctx, nil, args...)
	s.repacking.Store(false)
	if err != nil {
		return err
	}
	faultPoint("repack")
	s.yieldToSeals(ctx)
	return s.withLock(ctx, func() error {
		defer s.inproc.releasePacks()
		return s.dropRedundant(ctx, before)
	})
}

// dropRedundant, under the store lock after a repack run without -d,
// removes each pack that was there before it (before) whose every object
// is in a pack that was not, then the loose objects that are packed (git
// prune-packed). It is what repack -d does, moved under the lock: git's
// prune-packed also removes the emptied objects/xx folders, and a seal by
// git writing a loose object into one meanwhile failed ("unable to create
// temporary file"), leaving that path out of its checkpoint.
func (s *Store) dropRedundant(ctx context.Context, before map[string]bool) error {
	dir := filepath.Join(s.gitDir, "objects", "pack")
	hashSize := func(name string) int { // pack-<hex>.pack: its name is its checksum
		if len(strings.TrimSuffix(strings.TrimPrefix(name, "pack-"), ".pack")) == 64 {
			return 32
		}
		return 20
	}
	have := map[string]bool{}
	now := s.packNames()
	for name := range now {
		if before[name] {
			continue
		}
		hs := hashSize(name)
		names, err := gitobj.PackIndexNames(filepath.Join(dir, strings.TrimSuffix(name, ".pack")+".idx"), hs)
		if err != nil {
			continue // a pack being written, or damaged: vouches for nothing
		}
		for i := 0; i+hs <= len(names); i += hs {
			have[string(names[i:i+hs])] = true
		}
	}
	var drop []string
	for name := range before {
		stem := filepath.Join(dir, strings.TrimSuffix(name, ".pack"))
		if !now[name] {
			continue
		}
		if _, err := os.Lstat(stem + ".keep"); err == nil {
			continue
		}
		hs := hashSize(name)
		names, err := gitobj.PackIndexNames(stem+".idx", hs)
		if err != nil {
			continue
		}
		all := true
		for i := 0; i+hs <= len(names) && all; i += hs {
			all = have[string(names[i:i+hs])]
		}
		if all {
			drop = append(drop, stem)
		}
	}
	var errs []error
	for _, stem := range drop {
		// The index first: a reader that still finds it looks again.
		for _, ext := range []string{".idx", ".pack", ".rev", ".bitmap", ".mtimes"} {
			if err := os.Remove(stem + ext); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	if _, err := s.bgGit().Run(ctx, nil, "prune-packed", "-q"); err != nil {
		errs = append(errs, fmt.Errorf("prune-packed: %w", err))
	}
	return errors.Join(errs...)
}

// yieldToSeals lets seals already waiting for the store lock go before a
// locked step takes it (a short wait: seals are bounded too).
func (s *Store) yieldToSeals(ctx context.Context) {
	for i := 0; i < 1000 && s.lockWaiters.Load() > 0 && ctx.Err() == nil; i++ {
		time.Sleep(5 * time.Millisecond)
	}
}

// cairnKeep is the content of the .keep file the expire step writes, so a
// killed step's leftover is told from one another program wrote.
const cairnKeep = "cairn maintenance: expire\n"

// sweepCairnKeeps removes the .keep files a killed expire step left.
func (s *Store) sweepCairnKeeps() {
	dir := filepath.Join(s.gitDir, "objects", "pack")
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".keep") || !e.Type().IsRegular() {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if b, err := readNoFollow(p, 256); err == nil && string(b) == cairnKeep {
			_ = os.Remove(p)
		}
	}
}

// packNames are the store's packs (file names).
func (s *Store) packNames() map[string]bool {
	names := map[string]bool{}
	ents, _ := os.ReadDir(filepath.Join(s.gitDir, "objects", "pack"))
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".pack") {
			names[e.Name()] = true
		}
	}
	return names
}

// newestNonCruftPack is the largest pack (path) not in before and not a
// cruft one: what a full repack wrote (seals beside it write small ones).
func (s *Store) newestNonCruftPack(before map[string]bool) string {
	dir := filepath.Join(s.gitDir, "objects", "pack")
	best, size := "", int64(-1)
	for name := range s.packNames() {
		if before[name] {
			continue
		}
		p := filepath.Join(dir, name)
		if _, err := os.Lstat(strings.TrimSuffix(p, ".pack") + ".mtimes"); err == nil {
			continue
		}
		if fi, err := os.Lstat(p); err == nil && fi.Size() > size {
			best, size = p, fi.Size()
		}
	}
	return best
}

// looseOlderThan reports whether some loose object is older than grace
// (any, for PruneNow): whether prune has anything to do.
func (s *Store) looseOlderThan(grace time.Duration) bool {
	cut := time.Now().Add(-grace)
	objects := filepath.Join(s.gitDir, "objects")
	dirs, _ := os.ReadDir(objects)
	for _, d := range dirs {
		if len(d.Name()) != 2 || !d.IsDir() || !gitobj.IsHex(d.Name()+strings.Repeat("0", 38)) {
			continue
		}
		ents, _ := os.ReadDir(filepath.Join(objects, d.Name()))
		for _, e := range ents {
			if grace < 0 {
				return true
			}
			if fi, err := e.Info(); err == nil && fi.ModTime().Before(cut) {
				return true
			}
		}
	}
	return false
}

// noteStep records in maintenance.json that a step finished at t (and, for
// the step that ends a full repack, that a full one did).
func (s *Store) noteStep(name string, t time.Time) {
	last, _ := s.LastMaintenance()
	if last.Steps == nil {
		last.Steps = map[string]time.Time{}
	}
	last.Steps[name] = t
	if name == StepExpire || name == StepFull && !s.git.Version.AtLeast(Version{2, 37, 0}) {
		last.LastFull = t
	}
	s.writeLastMaintenance(last)
}

func (s *Store) writeLastMaintenance(last LastMaintenance) {
	if b, err := json.Marshal(last); err == nil {
		_ = platform.WriteFileAtomic(filepath.Join(s.gitDir, cairnSubdir, "maintenance.json"), append(b, '\n'), 0o644)
	}
}

// finish measures the store after a run and records the run (one that ran
// no step is not recorded).
func (s *Store) finish(ctx context.Context, res MaintainResult, err error) (MaintainResult, error) {
	var serr error
	res.After, serr = s.Stats(context.WithoutCancel(ctx))
	res.Duration = time.Since(res.Start)
	if len(res.Steps) > 0 {
		last, _ := s.LastMaintenance()
		last.Result = res
		s.writeLastMaintenance(last)
	}
	if err != nil {
		return res, err
	}
	return res, serr
}

// LastMaintenance is <store>/cairn/maintenance.json: the last maintenance
// that ran (one skipped before its first step is not recorded), when the
// last full one did, and when each step last finished.
type LastMaintenance struct {
	Result   MaintainResult       `json:"result"`
	LastFull time.Time            `json:"lastFull,omitzero"`
	Steps    map[string]time.Time `json:"steps,omitempty"`
}

// LastMaintenance is the last maintenance that ran on this store (by any
// process), and when the last full one ran.
func (s *Store) LastMaintenance() (LastMaintenance, bool) {
	var lm LastMaintenance
	b, err := readNoFollow(filepath.Join(s.gitDir, cairnSubdir, "maintenance.json"), maxSmallFile)
	if err != nil || json.Unmarshal(b, &lm) != nil {
		return lm, false
	}
	return lm, true
}

// pruneExpire is git's --expire for a grace period.
func pruneExpire(grace time.Duration) string {
	if grace < 0 {
		return "now"
	}
	return strconv.FormatInt(int64(grace/time.Second), 10) + ".seconds.ago"
}

// Stats measures the store: its bytes on disk, loose objects and packs.
func (s *Store) Stats(ctx context.Context) (StoreStats, error) {
	var st StoreStats
	out, err := s.git.Run(ctx, nil, "count-objects", "-v")
	if err != nil {
		return st, err
	}
	var garbage int64
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ": ")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		switch k {
		case "count":
			st.LooseObjects = n
		case "size":
			st.LooseBytes = n << 10
		case "in-pack":
			st.PackedObjs = n
		case "packs":
			st.Packs = n
		case "size-pack":
			st.PackBytes = n << 10
		case "size-garbage":
			garbage = n << 10
		}
	}
	// Objects as git counts them; the rest (refs, reflogs, cairn's index,
	// config) by walking, without descending into objects/.
	st.Bytes = st.LooseBytes + st.PackBytes + garbage
	objects := filepath.Join(s.gitDir, "objects")
	_ = filepath.WalkDir(s.gitDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() {
			if p == objects {
				return filepath.SkipDir
			}
			return nil
		}
		if fi, err := d.Info(); err == nil && fi.Mode().IsRegular() {
			st.Bytes += fi.Size()
		}
		return nil
	})
	return st, nil
}

// clearStalePackedRefsLock removes the packed-refs.lock a killed pack-refs
// left (else every later pack-refs and ref deletion fails). Called under the
// store lock: in a plain store only cairn writes refs, so any such lock is
// stale; in a Hankweave store the runtime may be writing, so only one older
// than a minute counts as stale.
func (s *Store) clearStalePackedRefsLock() {
	// packed-refs.new is the temporary file pack-refs writes under the lock
	// (git 2.39): a kill leaves it, and the next pack-refs refuses to start.
	for _, name := range []string{"packed-refs.lock", "packed-refs.new"} {
		p := filepath.Join(s.gitDir, name)
		fi, err := os.Lstat(p)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		if s.layout == LayoutPlain || time.Since(fi.ModTime()) > time.Minute {
			_ = os.Remove(p)
		}
	}
}
