package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/snapshot/gitobj"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// indexMeta records what cairn's index was last staged under, so an
// incremental seal under other patterns becomes a full reconcile.
type indexMeta struct {
	Selection string `json:"selection"`
	MaxSize   int64  `json:"maxSize"`
}

// Seal seals one checkpoint and records it in the ledger. A seal that cannot
// complete is recorded as failed and its error returned with the record.
func (s *Store) Seal(ctx context.Context, req SealRequest) (ckpt.Record, error) {
	var rec ckpt.Record
	ctx = withProgress(ctx, req.Progress)
	err := s.withLock(ctx, func() error {
		if err := s.refreshIfChanged(ctx); err != nil {
			return err
		}
		var err error
		rec, err = s.sealLocked(ctx, req)
		return err
	})
	return rec, err
}

func (s *Store) sealLocked(ctx context.Context, req SealRequest) (ckpt.Record, error) {
	defer s.useWorkTree()()
	start := time.Now()
	now := req.Time
	if now.IsZero() {
		now = start
	}
	rec := ckpt.Record{ID: s.nextID(), Kind: req.Kind, Label: oneLine(req.Label), CodonID: oneLine(req.CodonID),
		CodonName: oneLine(req.CodonName), RunID: oneLine(req.RunID), Attempt: req.Attempt, Time: now.UTC()}
	branch := "" // a capture's ref: a failed one is recorded on it
	fail := func(err error) (ckpt.Record, error) {
		if req.hold != "" {
			rec.Ref = branch
		}
		rec.State, rec.Error = ckpt.StateFailed, err.Error()
		rec.DurationMS = time.Since(start).Milliseconds()
		if aerr := s.appendRecord(rec); aerr != nil {
			err = errors.Join(err, aerr)
		}
		// A failed write (a full disk) leaves git's temporary objects behind.
		// In a plain store only cairn writes, under the lock held here; the
		// runtime writes into a Hankweave store itself, so only old ones go.
		minAge := time.Duration(0)
		if s.layout == LayoutHankweave {
			minAge = staleTmpAge
		}
		s.sweepTmpObjects(minAge)
		return rec, err
	}
	if err := validateRequest(req); err != nil {
		return fail(err)
	}
	// What the last restore, in this process or another, left for the
	// next seal (restorejournal.go).
	s.takeRestoreRecord(ctx)
	if req.Changed != nil && len(s.reexamine) > 0 {
		// What the last restore left that no event names.
		req.Changed = slices.Compact(slices.Sorted(slices.Values(append(slices.Clip(req.Changed), s.reexamine...))))
	}
	if lo := s.left(); lo.whole() {
		return fail(ErrWorkTreeForeign)
	} else if req.Changed != nil {
		// Nothing at or under a left-out folder is looked at: the planning
		// takes what the last checkpoint held there out.
		req.Changed, _ = lo.filter(req.Changed)
		if req.Changed == nil {
			req.Changed = []string{}
		}
	}
	patterns := req.Patterns
	if patterns == nil {
		patterns = s.opts.Patterns
	}
	sel, err := NewSelector(patterns)
	if err != nil {
		return fail(err)
	}
	ref, parent, oldTip, err := s.target(ctx, req, rec.ID)
	if err != nil {
		return fail(err)
	}
	rec.Ref, branch = ref, ref
	if req.hold != "" {
		// Captured: the commit is sealed on the run's branch tip but goes on
		// the held ref; Publish moves the branch (held.go).
		rec.Ref, oldTip = req.hold, zeroSHA
		if tip, ok := s.refTip(ctx, req.hold); ok {
			oldTip = tip
		}
	}
	if req.Changed != nil {
		if why := s.inproc.indexDoubt(); why != "" {
			s.note(ctx, why+"; this checkpoint reconciled the whole work tree, and the cache was rebuilt")
			req.Changed = nil
		} else if s.restoreUnsure {
			zerologCtx(ctx).Info().Msg("a restore stopped part way: this checkpoint reconciles the whole work tree")
			req.Changed = nil
		}
	}
	job := &sealJob{req: req, rec: &rec, sel: sel, parent: parent, oldTip: oldTip, now: now}
	if job.req.afterStage == nil && job.req.engine != EngineGit {
		var e *inproc
		var ok bool
		full := job.req.Changed == nil
		if full {
			e, ok = s.inprocFullReady(ctx)
		} else {
			e, ok = s.inproc.ready(ctx, sel)
		}
		if ok {
			var out sealOutcome
			var err error
			if full {
				out, err = e.sealFull(ctx, job)
			} else {
				out, err = e.seal(ctx, job)
			}
			if e.broken {
				s.inproc.drop() // a pack it gathered could not be written
			}
			switch {
			case errors.Is(err, errFallback):
				zerologCtx(ctx).Debug().Err(err).Bool("full", full).Msg("seal by git")
			case errors.Is(err, ErrDamaged):
				// The parent checkpoint or its tree is gone: the git engine
				// finds what to seal on (recoverParent), from the whole tree.
				s.inproc.drop()
				job.req.Changed = nil
			case errors.As(err, new(*errMissingObject)):
				// What cairn knew of the store is wrong: the engine starts
				// afresh, and git rebuilds the index from the work tree,
				// storing every file's blob again.
				if rerr := s.dropIndex(ctx, err.Error()+" (another program removed it, or a pack is damaged); this checkpoint rebuilt cairn's index from the work tree, storing each file again"); rerr != nil {
					return fail(rerr)
				}
				job.req.Changed = nil
			case err != nil:
				s.lastEngine, rec.Engine = EngineInproc, EngineInproc
				return fail(s.damageHint(err))
			case out.skipped:
				s.lastEngine = EngineInproc
				return ckpt.Record{}, nil
			default:
				s.lastEngine, rec.Engine = EngineInproc, EngineInproc
				faultPoint("update-ref")
				return s.recordSeal(ctx, e, job, out, start)
			}
		}
	}
	s.lastEngine, rec.Engine = EngineGit, EngineGit
	var git engine = s.gitEng
	out, err := git.seal(ctx, job)
	if err != nil {
		return fail(err)
	}
	if out.skipped {
		return ckpt.Record{}, nil
	}
	return s.recordSeal(ctx, git, job, out, start)
}

// dropIndex removes cairn's private index (and the in-process engine's
// view of it) so the next staging rebuilds it from the work tree, and notes
// why (msg) once.
func (s *Store) dropIndex(ctx context.Context, msg string) error {
	s.inproc.drop()
	s.note(ctx, msg)
	if err := os.Remove(s.git.Index); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// note records something cairn repaired by itself, for the log and the
// workspace's status (TakeNotes).
func (s *Store) note(ctx context.Context, msg string) {
	zerologCtx(ctx).Warn().Str("store", s.gitDir).Msg(msg)
	s.notes = append(s.notes, msg)
}

// TakeNotes returns what the store repaired by itself since the last call.
func (s *Store) TakeNotes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.notes
	s.notes = nil
	return n
}

// recoverParent finds what a checkpoint whose parent (missing) is gone is
// sealed on: on a checkpoint's own ref the parent is only named (a trailer
// and the ledger), so it stays, with no tree to compare; on a branch, the
// newest checkpoint of that ref whose commit and tree are still stored,
// else main's tip. It says so once.
func (s *Store) recoverParent(ctx context.Context, ref, missing string) (parent, tree string, err error) {
	id := missing
	for _, r := range s.records {
		if r.SHA == missing {
			id = r.ID + " (" + missing + ")"
		}
	}
	if ownRef(ref) {
		s.note(ctx, "checkpoint "+id+" is missing from the store (removed by another program?); the next checkpoint is sealed from the whole work tree, naming it as its parent")
		return missing, "", nil
	}
	var cands []string
	for i := len(s.records) - 1; i >= 0; i-- {
		if r := s.records[i]; r.Ref == ref && r.SHA != "" && r.SHA != missing {
			cands = append(cands, r.SHA)
		}
	}
	if tip, ok := s.refTip(ctx, "refs/heads/main"); ok {
		cands = append(cands, tip)
	}
	for _, c := range cands {
		if t, err := s.checkParent(ctx, c); err == nil && t != "" {
			s.note(ctx, "checkpoint "+id+" is missing from the store (removed by another program?); the next checkpoint on "+ref+" follows "+c+", the newest one still whole")
			return c, t, nil
		}
	}
	return "", "", fmt.Errorf("no checkpoint of %s is whole to seal on", ref)
}

// nothingNew reports whether a seal whose tree is its parent's, with these
// issues, would record nothing new: no issue, or exactly the paths the
// parent checkpoint could not read either (a retry of a file that still
// cannot be read adds no record each time).
func (s *Store) nothingNew(parent string, issues []ckpt.PathIssue) bool {
	if len(issues) == 0 {
		return true
	}
	for i := len(s.records) - 1; i >= 0; i-- {
		r := s.records[i]
		if r.SHA != parent {
			continue
		}
		if r.State != ckpt.StatePartial || len(r.Issues) != len(issues) {
			return false
		}
		had := map[string]bool{}
		for _, is := range r.Issues {
			had[is.Path] = true
		}
		for _, is := range issues {
			if !had[is.Path] {
				return false
			}
		}
		return true
	}
	return false
}

// lastSealed is the newest checkpoint cairn sealed (not adopted from the
// runtime): the one cairn's index and stat cache describe. A capture this
// process made (held.go) counts from when it was sealed, published or not;
// a record published by committing a capture's tree again does not (what it
// holds was sealed earlier).
func (s *Store) lastSealed() (ckpt.Record, bool) {
	for i := len(s.records) - 1; i >= 0; i-- {
		// A republished record's tree was staged before the records ahead
		// of it: the index stands for one of those (held.go, recommit).
		if r := s.records[i]; r.SHA != "" && !r.Adopted && !r.Republished {
			if s.lastCapture.SHA != "" && idNum(s.lastCapture.ID) > idNum(r.ID) {
				return s.lastCapture, true
			}
			return r, true
		}
	}
	return s.lastCapture, s.lastCapture.SHA != ""
}

// recordSeal records the checkpoint eng sealed for j in the ledger, then
// lets the engine tidy up after it.
func (s *Store) recordSeal(ctx context.Context, eng engine, j *sealJob, out sealOutcome, start time.Time) (ckpt.Record, error) {
	if j.req.hold != "" {
		// Captured: no record, no position; its id is never handed out again.
		rec := finish(j.req, *j.rec, out.sha, out.parent, out.counts, start)
		s.noteIssued(rec.ID, false)
		s.lastCapture = rec
		eng.sealed(ctx)
		return rec, nil
	}
	rec, err := s.complete(j.req, *j.rec, out.sha, out.parent, out.counts, start)
	if err == nil {
		// What a restore left is in this checkpoint (a told seal was told it).
		s.reexamine, s.rejudge, s.restoreUnsure = nil, nil, false
		if err := s.dropRestoreRecord(); err != nil {
			s.note(ctx, err.Error())
		}
		eng.sealed(ctx)
	}
	return rec, err
}

// complete records a checkpoint whose ref moved: its state and the ledger.
func (s *Store) complete(req SealRequest, rec ckpt.Record, sha, parent string, counts [3]int, start time.Time) (ckpt.Record, error) {
	rec = finish(req, rec, sha, parent, counts, start)
	if req.Kind != ckpt.KindPreRestore { // a restore sets the position itself
		s.notePosition(rec.SHA)
	}
	faultPoint("position")
	if err := s.appendRecord(rec); err != nil {
		return rec, err
	}
	faultPoint("ledger")
	return rec, nil
}

// finish fills in the record of a sealed checkpoint: commit, counts, state.
func finish(req SealRequest, rec ckpt.Record, sha, parent string, counts [3]int, start time.Time) ckpt.Record {
	rec.SHA, rec.Parent = sha, parent
	rec.Added, rec.Changed, rec.Removed = counts[0], counts[1], counts[2]
	rec.State = ckpt.StateOK
	switch {
	case len(rec.Issues) > 0:
		rec.State = ckpt.StatePartial
		rec.Issues = dedupeIssues(append(rec.Issues, req.Racy...))
	case len(req.Racy) > 0:
		rec.State = ckpt.StateRacy
		rec.Issues = dedupeIssues(append([]ckpt.PathIssue(nil), req.Racy...))
	}
	rec.DurationMS = time.Since(start).Milliseconds()
	return rec
}

func validateRequest(req SealRequest) error {
	known := false
	for _, k := range ckpt.Kinds {
		known = known || k == req.Kind
	}
	if !known {
		return fmt.Errorf("unknown checkpoint kind %q", req.Kind)
	}
	if req.Kind.IsLifecycle() && (req.CodonID == "" || req.RunID == "") {
		return fmt.Errorf("a %s checkpoint needs a codon id and a run id", req.Kind)
	}
	if req.RunID != "" && !validRefPart(req.RunID) {
		return fmt.Errorf("run id %q cannot name a branch", req.RunID)
	}
	return nil
}

// validRefPart accepts what git accepts in one ref component, conservatively.
func validRefPart(s string) bool {
	if s == "" || strings.HasPrefix(s, ".") || strings.HasSuffix(s, ".lock") || strings.Contains(s, "..") {
		return false
	}
	for _, c := range s {
		if c <= ' ' || c == 0x7f || strings.ContainsRune("~^:?*[\\/@{", c) {
			return false
		}
	}
	return true
}

// ErrDamaged means the store lacks objects its checkpoints need (another
// program deleted them): nothing is sealed on top until it is repaired.
var ErrDamaged = errors.New("the store is damaged")

// checkParent fails with ErrDamaged when the parent commit or its tree is
// missing from the store. Otherwise it returns the parent's tree ("" when
// git could not say), which spares SkipUnchanged a rev-parse.
func (s *Store) checkParent(ctx context.Context, parent string) (tree string, err error) {
	out, err := s.git.Run(ctx, strings.NewReader(parent+"\n"+parent+"^{tree}\n"), "cat-file", "--batch-check")
	if err != nil {
		return "", nil // git itself failed: the seal's own steps say why
	}
	for i, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if strings.HasSuffix(line, " missing") {
			what := "the parent checkpoint " + parent
			if i == 1 {
				what = "the tree of the parent checkpoint " + parent
			}
			return "", s.damaged(what)
		}
		if f := strings.Fields(line); i == 1 && len(f) == 3 && f[1] == "tree" && gitobj.IsHex(f[0]) {
			tree = f[0]
		}
	}
	return tree, nil
}

// damaged is the error of a seal that found objects missing.
func (s *Store) damaged(what string) error {
	return fmt.Errorf("%w: %s is missing from %s (deleted by another program?); nothing was sealed on top of it. "+
		"Run `cairn doctor --fsck %s` to see what is lost and how to repair it", ErrDamaged, what, s.gitDir, s.dir)
}

// damageHint turns git's report of a missing object into ErrDamaged.
func (s *Store) damageHint(err error) error {
	var ge *GitError
	if errors.As(err, &ge) {
		msg := ge.Stderr
		if strings.Contains(msg, "invalid object") || strings.Contains(msg, "unable to read") ||
			strings.Contains(msg, "bad object") || strings.Contains(msg, "missing") {
			return fmt.Errorf("%w (%v)", s.damaged("an object the index names"), err)
		}
	}
	return err
}
