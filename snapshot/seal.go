package snapshot

import (
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	binenc "encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/platform"
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
	fail := func(err error) (ckpt.Record, error) {
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
	rec.Ref = ref
	if req.Changed != nil {
		if why := s.indexDoubt(); why != "" {
			s.note(ctx, why+"; this checkpoint reconciled the whole work tree, and the cache was rebuilt")
			req.Changed = nil
		}
	}
	if req.Changed != nil && req.afterStage == nil && req.engine != EngineGit {
		if e, ok := s.inprocReady(ctx, sel); ok {
			sha, skipped, counts, err := s.sealInproc(ctx, e, req, &rec, sel, parent, oldTip, now)
			switch {
			case errors.Is(err, errFallback):
				zerologCtx(ctx).Debug().Err(err).Msg("incremental seal by git")
			case errors.Is(err, ErrDamaged):
				// The parent checkpoint or its tree is gone: the git path
				// finds what to seal on (recoverParent), from the whole tree.
				s.closeEngine()
				s.eng = nil
				req.Changed = nil
			case errors.As(err, new(*errMissingObject)):
				// What cairn knew of the store is wrong: the engine starts
				// afresh, and git rebuilds the index from the work tree,
				// storing every file's blob again.
				if rerr := s.dropIndex(ctx, err.Error()+" (another program removed it, or a pack is damaged); this checkpoint rebuilt cairn's index from the work tree, storing each file again"); rerr != nil {
					return fail(rerr)
				}
				req.Changed = nil
			case err != nil:
				s.lastEngine, rec.Engine = EngineInproc, EngineInproc
				return fail(s.damageHint(err))
			case skipped:
				s.lastEngine = EngineInproc
				return ckpt.Record{}, nil
			default:
				s.lastEngine, rec.Engine = EngineInproc, EngineInproc
				faultPoint("update-ref")
				rec, err := s.complete(req, rec, sha, parent, counts, start)
				if err == nil && len(e.cache.pending) > pendingSyncMax {
					// Keep the stat cache small: git takes the entries now.
					if serr := s.syncIndex(ctx); serr != nil {
						zerologCtx(ctx).Warn().Err(serr).Msg("writing the in-process engine's entries into the index failed")
					}
				}
				return rec, err
			}
		}
	}
	s.lastEngine, rec.Engine = EngineGit, EngineGit
	// Objects another program deleted must not be sealed on top of: the
	// parent and its tree are checked while the paths are staged.
	type parentCheck struct {
		tree string
		err  error
	}
	damaged := make(chan parentCheck, 1)
	go func() {
		var c parentCheck
		c.tree, c.err = s.checkParent(ctx, parent)
		damaged <- c
	}()

	s.checkIndexFile(ctx)
	st, err := s.stage(ctx, s.git, sel, req.Changed)
	if s.indexDamaged(ctx, err) {
		st, err = s.stage(ctx, s.git, sel, nil)
	}
	pc := <-damaged
	parentGone := false
	if errors.Is(pc.err, ErrDamaged) {
		// Another program removed the parent checkpoint's objects: seal on
		// the newest checkpoint still whole rather than never again.
		np, tree, rerr := s.recoverParent(ctx, rec.Ref, parent)
		if rerr != nil {
			return fail(errors.Join(pc.err, rerr))
		}
		parent, pc = np, parentCheck{tree: tree}
		parentGone = tree == ""
	}
	if pc.err != nil {
		return fail(pc.err)
	}
	if err != nil {
		return fail(fmt.Errorf("stage: %w", err))
	}
	rec.Issues, rec.Skipped = st.issues, st.skipped
	if req.afterStage != nil {
		if err := req.afterStage(); err != nil {
			return fail(err)
		}
	}
	faultPoint("stage")

	treeOut, _, err := s.git.runMapped(ctx, nil, "write-tree")
	if s.indexDamaged(ctx, err) || s.indexNamesMissing(ctx, err) {
		if st, err = s.stage(ctx, s.git, sel, nil); err != nil {
			return fail(fmt.Errorf("stage: %w", err))
		}
		rec.Issues, rec.Skipped = st.issues, st.skipped
		treeOut, _, err = s.git.runMapped(ctx, nil, "write-tree")
	}
	if err != nil {
		return fail(s.damageHint(err))
	}
	tree := strings.TrimSpace(string(treeOut))
	if err := s.vouchGitTree(ctx, tree, pc.tree); errors.As(err, new(*errMissingObject)) {
		// The index named an object another program removed; it was
		// dropped: staged again from the work tree, every file's blob is
		// stored anew.
		if st, err = s.stage(ctx, s.git, sel, nil); err != nil {
			return fail(fmt.Errorf("stage: %w", err))
		}
		rec.Issues, rec.Skipped = st.issues, st.skipped
		if treeOut, _, err = s.git.runMapped(ctx, nil, "write-tree"); err != nil {
			return fail(s.damageHint(err))
		}
		tree = strings.TrimSpace(string(treeOut))
		if err := s.vouchGitTree(ctx, tree, ""); err != nil {
			return fail(err)
		}
	} else if err != nil {
		return fail(err)
	}
	faultPoint("write-tree")
	if req.SkipUnchanged {
		ptree, ok := pc.tree, pc.tree != ""
		if !ok { // the damage check could not say: ask git
			ptree, ok = s.resolve(ctx, parent+"^{tree}")
		}
		if ok && ptree == tree && s.nothingNew(parent, rec.Issues) {
			if last, ok := s.lastSealed(); ok {
				s.recordBase(ctx, tree, last.SHA)
			}
			return ckpt.Record{}, nil
		}
	}

	// A checkpoint on its own ref is a root commit that names its parent in
	// a trailer: an autosave kept must not keep every older one reachable,
	// or dropping them would free nothing (docs/cairn-formats.md, "Refs").
	args := []string{"commit-tree", tree, "-F", "-"}
	logical := ""
	if ownRef(ref) {
		logical = parent
	} else {
		args = append(args, "-p", parent)
	}
	msg := message(req, rec, logical, now)
	ts := isoTime(now)
	commitOut, err := s.git.withEnv("GIT_AUTHOR_DATE="+ts, "GIT_COMMITTER_DATE="+ts).
		Run(ctx, strings.NewReader(msg), args...)
	if err != nil {
		return fail(err)
	}
	sha := strings.TrimSpace(string(commitOut))
	s.recordBase(ctx, tree, sha)
	faultPoint("commit-tree")

	beforeUpdateRef()
	// Objects must be on disk before a ref names them.
	if err := platform.SyncFS(s.gitDir); err != nil {
		return fail(err)
	}
	// The counts for the record are read while the ref moves.
	type counts struct {
		added, changed, removed int
		err                     error
	}
	countC := make(chan counts, 1)
	go func() {
		var c counts
		from := parent
		if parentGone {
			from = emptyTreeOf(s) // all of it is new against nothing
		}
		c.added, c.changed, c.removed, c.err = s.diffCounts(ctx, from, sha)
		countC <- c
	}()
	if strings.HasPrefix(ref, "refs/cairn/") || strings.HasPrefix(ref, "refs/heads/run-") {
		// Under the store lock no cairn runs, nor any git one started (each
		// holds the store lock while it lives: proc.go), so in a plain store
		// a ref lock is a dead writer's. The runtime writes a Hankweave
		// store's refs itself: there only a lock a minute old is taken for
		// stale, as the in-process engine's LockRef does.
		lock := filepath.Join(s.gitDir, filepath.FromSlash(ref)+".lock")
		fi, err := os.Lstat(lock)
		if err == nil && (s.layout == LayoutPlain || time.Since(fi.ModTime()) >= time.Minute) {
			if err := os.Remove(lock); err == nil {
				zerologCtx(ctx).Warn().Str("ref", ref).Msg("removed a ref lock left by an interrupted seal")
			}
		}
	}
	if _, err := s.git.Run(ctx, nil, "update-ref", "-m", "cairn: "+string(req.Kind)+" "+rec.ID, ref, sha, oldTip); err != nil {
		<-countC
		return fail(fmt.Errorf("ref %s moved while sealing (another writer?); not overwritten: %w", ref, err))
	}
	if !s.git.Version.AtLeast(Version{2, 36, 0}) {
		if err := platform.SyncFS(s.gitDir); err != nil {
			return fail(err)
		}
	}
	faultPoint("update-ref")

	c := <-countC
	if c.err != nil {
		return fail(c.err)
	}
	return s.complete(req, rec, sha, parent, [3]int{c.added, c.changed, c.removed}, start)
}

// indexDamageSigns are what git says when it cannot read an index file.
var indexDamageSigns = []string{"index file smaller than expected", "bad signature", "bad index version",
	"bad index file sha1 signature", "index file corrupt", "unknown index entry format"}

// indexDamaged reports whether err is git failing to read cairn's private
// index; if so the index, which is derived data, is removed (the next
// staging rebuilds it from the work tree) and the store notes it once.
func (s *Store) indexDamaged(ctx context.Context, err error) bool {
	var ge *GitError
	if !errors.As(err, &ge) {
		return false
	}
	for _, sign := range indexDamageSigns {
		if strings.Contains(ge.Stderr, sign) {
			s.dropIndex(ctx, "cairn's private index was damaged (git could not read it: "+firstLine(ge.Stderr)+"); rebuilt from the work tree")
			return true
		}
	}
	return false
}

// indexNamesMissing reports whether write-tree failed because cairn's
// index names an object that is not stored (another program removed it);
// if so the index is dropped, to be rebuilt from the work tree, storing
// every file again.
func (s *Store) indexNamesMissing(ctx context.Context, err error) bool {
	var ge *GitError
	if !errors.As(err, &ge) || !strings.Contains(ge.Stderr, "invalid object") {
		return false
	}
	s.dropIndex(ctx, "cairn's index named objects missing from the store ("+firstLine(ge.Stderr)+"; removed by another program?); it was rebuilt from the work tree, storing each file again")
	return true
}

// checkIndexFile drops cairn's private index when it is not whole: not an
// index file, cut short, or failing its trailing checksum (git does not
// check that when it reads an index, and reads a cut one as entries of
// nothing). The checksum is checked once per version of the file.
func (s *Store) checkIndexFile(ctx context.Context) {
	st, ok := stampFile(s.git.Index)
	if !ok || st == s.indexChecked {
		return
	}
	data, err := readNoFollow(s.git.Index, maxIndexFile)
	why := ""
	switch {
	case err != nil:
		why = err.Error()
	case len(data) < 12+20:
		why = fmt.Sprintf("%d bytes, cut short", len(data))
	case string(data[:4]) != "DIRC" || binenc.BigEndian.Uint32(data[4:]) < 2 || binenc.BigEndian.Uint32(data[4:]) > 4:
		why = "not an index file"
	case !indexChecksumOK(data):
		why = "its checksum does not match: cut short or overwritten"
	}
	if why != "" {
		s.dropIndex(ctx, "cairn's private index was damaged ("+why+"); rebuilt from the work tree")
		return
	}
	s.indexChecked = st
}

// maxIndexFile bounds what is read of cairn's index (~100 bytes a file).
const maxIndexFile = 1 << 30

// indexChecksumOK reports whether an index file ends with the hash of the
// rest (SHA-1 or SHA-256, as the store's object format), or with zeros
// (git's index.skipHash).
func indexChecksumOK(data []byte) bool {
	for _, n := range []int{sha1.Size, sha256.Size} {
		if len(data) < 12+n {
			continue
		}
		body, sum := data[:len(data)-n], data[len(data)-n:]
		var got []byte
		if n == sha1.Size {
			h := sha1.Sum(body)
			got = h[:]
		} else {
			h := sha256.Sum256(body)
			got = h[:]
		}
		if bytes.Equal(got, sum) || bytes.Equal(sum, make([]byte, n)) {
			return true
		}
	}
	return false
}

// dropIndex removes cairn's private index (and the in-process engine's
// view of it) so the next staging rebuilds it from the work tree, and notes
// why (msg) once.
func (s *Store) dropIndex(ctx context.Context, msg string) error {
	s.closeEngine()
	s.eng = nil
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
// runtime): the one cairn's index and stat cache describe.
func (s *Store) lastSealed() (ckpt.Record, bool) {
	for i := len(s.records) - 1; i >= 0; i-- {
		if r := s.records[i]; r.SHA != "" && !r.Adopted {
			return r, true
		}
	}
	return ckpt.Record{}, false
}

// indexDoubt says why cairn's index cannot stand for the newest checkpoint
// sealed ("" when it can): the in-process engine sealed it, and the stat
// cache holding the entries it did not write into the index is missing,
// cannot be read whole, or describes an older checkpoint. An incremental
// seal would then build on an older state; a full reconcile re-reads every
// file whose stat the index does not vouch for, and is exact.
func (s *Store) indexDoubt() string {
	last, ok := s.lastSealed()
	if !ok || last.Engine != EngineInproc {
		return "" // git wrote the index whole at that seal
	}
	var hdr statHeader
	if s.eng != nil && s.eng.cache != nil && s.eng.cache.loaded != loadedDamaged && s.statCacheFresh(s.eng.cache) {
		hdr = s.eng.cache.hdr
	} else {
		b, err := readNoFollow(s.statCachePath(), maxStatCache)
		if errors.Is(err, fs.ErrNotExist) {
			return "the in-process engine's stat cache is missing"
		}
		c, derr := decodeStatCache(b)
		if err != nil || derr != nil {
			return "the in-process engine's stat cache cannot be read whole"
		}
		hdr = c.hdr
	}
	switch {
	case hdr.Commit != last.SHA:
		return "the in-process engine's stat cache describes another checkpoint than " + last.ID
	}
	return ""
}

// complete records a checkpoint whose ref moved: its state and the ledger.
func (s *Store) complete(req SealRequest, rec ckpt.Record, sha, parent string, counts [3]int, start time.Time) (ckpt.Record, error) {
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
