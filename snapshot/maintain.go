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
)

// Maintenance: packing refs and objects and pruning unreachable objects, so
// neither the store's size nor the time of a seal or an open grows with its
// history (README, "Maintenance").
//
// Maintenance and seals never overlap: Maintain holds the store lock for its
// whole run, and the daemon cancels a maintenance in progress before it seals,
// so a lifecycle seal does not wait for it (a cancelled step is a killed git,
// which the next point covers). Running a prune or repack beside a seal was
// tried and once committed a tree that lacked a path the seal had staged.
//   - Every step leaves a store git accepts if killed (git writes packs under
//     tmp_ names and renames them in; stale ones are swept at the next open or
//     maintenance), proven by the fault points below and maintain_crash_test.go.

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
	Steps   []string   `json:"steps,omitempty"` // pack-refs, prune, repack geometric|incremental|full
	Before  StoreStats `json:"before"`
	After   StoreStats `json:"after"`
}

// Maintain packs refs and objects and prunes unreachable objects past the
// grace period, under the store lock (a seal waits, or cancels it: the
// daemon does). A second maintenance of the same store (another process) is
// refused with Skipped, never run alongside.
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
	// The whole run holds the store lock: a seal never runs beside a prune or
	// a repack (a seal racing a repack was once seen committing a tree that
	// lacked a path it had staged). The daemon cancels maintenance before it
	// seals, so a lifecycle seal does not wait for it.
	err = s.withLock(ctx, func() error {
		var ierr error
		res, ierr = s.maintainLocked(ctx, opts, res)
		return ierr
	})
	return res, err
}

// maintainLocked is Maintain's work, under the store lock.
func (s *Store) maintainLocked(ctx context.Context, opts MaintainOptions, res MaintainResult) (MaintainResult, error) {
	var err error
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
	// Temporary packs of a repack killed earlier would count against the room.
	s.sweepTmpObjects(staleTmpAge)

	// A repack writes a new pack before it deletes what it replaces: at most
	// every loose object and every pack it merges (all of them, at worst).
	need := uint64(res.Before.LooseBytes+res.Before.PackBytes) + opts.MinFree
	if free, _, err := platform.FreeSpace(s.gitDir); err == nil && free < need {
		res.Skipped = fmt.Sprintf("low disk space: %s free, a repack may need %s", humanBytes(int64(free)), humanBytes(int64(need)))
		return res, nil
	}

	s.clearStalePackedRefsLock()
	if _, err := s.git.Run(ctx, nil, "pack-refs", "--all", "--prune"); err != nil {
		return res, fmt.Errorf("pack-refs: %w", err)
	}
	res.Steps = append(res.Steps, "pack-refs")
	faultPoint("pack-refs")
	if busy() {
		return s.finish(ctx, res)
	}

	// Unreachable loose objects past the grace period go first, so the
	// repack does not pack them.
	if _, err := s.bgGit().Run(ctx, nil, "prune", "--expire="+pruneExpire(opts.PruneGrace)); err != nil {
		return res, fmt.Errorf("prune: %w", err)
	}
	res.Steps = append(res.Steps, "prune")
	faultPoint("prune")
	if busy() {
		return s.finish(ctx, res)
	}

	// Objects: geometric repacking (git 2.32+) packs the
	// loose objects and merges only packs that break a factor-2 progression,
	// so its cost follows what is new, not the whole history. A full repack
	// (opts.Full) rewrites everything reachable into one pack and moves what
	// is unreachable (dropped checkpoints) into a cruft pack, expired after
	// the grace period (git 2.37+; older: loosened, for the next prune).
	step, args := "repack geometric", []string{"repack", "-d", "-q", "--geometric=2"}
	switch {
	case opts.Full && s.git.Version.AtLeast(Version{2, 37, 0}):
		step, args = "repack full", []string{"repack", "-d", "-q", "--cruft", "--cruft-expiration=" + pruneExpire(opts.PruneGrace)}
	case opts.Full:
		step, args = "repack full", []string{"repack", "-d", "-q", "-A", "-l", "--unpack-unreachable=" + pruneExpire(opts.PruneGrace)}
	case !s.git.Version.AtLeast(Version{2, 32, 0}):
		step, args = "repack incremental", []string{"repack", "-d", "-q", "-l"}
	}
	if _, err := s.bgGit().Run(ctx, nil, args...); err != nil {
		return res, fmt.Errorf("repack: %w", err)
	}
	res.Steps = append(res.Steps, step)
	faultPoint("repack")
	return s.finish(ctx, res)
}

// bgGit runs maintenance's long steps at the lowest priority.
func (s *Store) bgGit() *Git {
	g := *s.git
	g.Background = true
	return &g
}

func (s *Store) finish(ctx context.Context, res MaintainResult) (MaintainResult, error) {
	var err error
	res.After, err = s.Stats(ctx)
	res.Duration = time.Since(res.Start)
	last := LastMaintenance{Result: res}
	if prev, ok := s.LastMaintenance(); ok {
		last.LastFull = prev.LastFull
	}
	for _, st := range res.Steps {
		if st == "repack full" {
			last.LastFull = res.Start
		}
	}
	if b, jerr := json.Marshal(last); jerr == nil {
		_ = platform.WriteFileAtomic(filepath.Join(s.gitDir, cairnSubdir, "maintenance.json"), append(b, '\n'), 0o644)
	}
	return res, err
}

// LastMaintenance is <store>/cairn/maintenance.json: the last maintenance
// that ran (one skipped before its first step is not recorded) and when the
// last full one did.
type LastMaintenance struct {
	Result   MaintainResult `json:"result"`
	LastFull time.Time      `json:"lastFull,omitzero"`
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

// humanBytes writes n as 1.5 MiB.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// HumanBytes writes n as 1.5 MiB (for status and cairn gc).
func HumanBytes(n int64) string { return humanBytes(n) }

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
