package snapshot

import (
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	binenc "encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/platform"
)

// gitEngine seals with git's own commands: update-index into cairn's
// private index, write-tree, commit-tree, update-ref (docs/engine.md, "The seam"). It
// seals every request: full reconciles, first seals, and what the
// in-process engine leaves to it. Its state is its use of cairn's index.
type gitEngine struct {
	s *Store
	// index is what the in-process engine knows of cairn's index: told of
	// every tree git seals, asked whether its objects are stored.
	index sharedIndex
	// indexChecked is cairn's index as last found whole (checkIndexFile).
	indexChecked fileStamp
}

// seal stages the job's paths (all of them when j.req.Changed is nil) into
// cairn's index, writes its tree and commit and moves the ref. When the
// parent checkpoint's objects are gone it seals on the newest one still
// whole (recoverParent), which the outcome names.
func (g *gitEngine) seal(ctx context.Context, j *sealJob) (sealOutcome, error) {
	s, req, rec, sel, parent, oldTip, now := g.s, j.req, j.rec, j.sel, j.parent, j.oldTip, j.now
	ref := rec.Ref
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

	g.checkIndexFile(ctx)
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
			return sealOutcome{}, errors.Join(pc.err, rerr)
		}
		parent, pc = np, parentCheck{tree: tree}
		parentGone = tree == ""
	}
	if pc.err != nil {
		return sealOutcome{}, pc.err
	}
	if err != nil {
		return sealOutcome{}, fmt.Errorf("stage: %w", err)
	}
	rec.Issues, rec.Skipped = st.issues, st.skipped
	if req.afterStage != nil {
		if err := req.afterStage(); err != nil {
			return sealOutcome{}, err
		}
	}
	faultPoint("stage")

	treeOut, _, err := s.git.runMapped(ctx, nil, "write-tree")
	if s.indexDamaged(ctx, err) || s.indexNamesMissing(ctx, err) {
		if st, err = s.stage(ctx, s.git, sel, nil); err != nil {
			return sealOutcome{}, fmt.Errorf("stage: %w", err)
		}
		rec.Issues, rec.Skipped = st.issues, st.skipped
		treeOut, _, err = s.git.runMapped(ctx, nil, "write-tree")
	}
	if err != nil {
		return sealOutcome{}, s.damageHint(err)
	}
	tree := strings.TrimSpace(string(treeOut))
	if err := g.vouchTree(ctx, tree, pc.tree); errors.As(err, new(*errMissingObject)) {
		// The index named an object another program removed; it was
		// dropped: staged again from the work tree, every file's blob is
		// stored anew.
		if st, err = s.stage(ctx, s.git, sel, nil); err != nil {
			return sealOutcome{}, fmt.Errorf("stage: %w", err)
		}
		rec.Issues, rec.Skipped = st.issues, st.skipped
		if treeOut, _, err = s.git.runMapped(ctx, nil, "write-tree"); err != nil {
			return sealOutcome{}, s.damageHint(err)
		}
		tree = strings.TrimSpace(string(treeOut))
		if err := g.vouchTree(ctx, tree, ""); err != nil {
			return sealOutcome{}, err
		}
	} else if err != nil {
		return sealOutcome{}, err
	}
	faultPoint("write-tree")
	if req.SkipUnchanged {
		ptree, ok := pc.tree, pc.tree != ""
		if !ok { // the damage check could not say: ask git
			ptree, ok = s.resolve(ctx, parent+"^{tree}")
		}
		if ok && ptree == tree && s.nothingNew(parent, rec.Issues) {
			if last, ok := s.lastSealed(); ok {
				g.index.gitSealed(ctx, tree, last.SHA)
			}
			return sealOutcome{skipped: true}, nil
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
	msg := message(req, *rec, logical, now)
	ts := isoTime(now)
	commitOut, err := s.git.withEnv("GIT_AUTHOR_DATE="+ts, "GIT_COMMITTER_DATE="+ts).
		Run(ctx, strings.NewReader(msg), args...)
	if err != nil {
		return sealOutcome{}, err
	}
	sha := strings.TrimSpace(string(commitOut))
	g.index.gitSealed(ctx, tree, sha)
	faultPoint("commit-tree")

	beforeUpdateRef()
	// The counts for the record are read while the objects are flushed,
	// and before the ref moves: a parent whose trees cannot be read (another
	// program deleted one) fails the seal with the ref where it was, never
	// after it names a checkpoint the ledger would record as failed.
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
	// Objects must be on disk before a ref names them.
	if err := platform.SyncFS(s.gitDir); err != nil {
		<-countC
		return sealOutcome{}, err
	}
	c := <-countC
	if c.err != nil {
		return sealOutcome{}, s.damageHint(c.err)
	}
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
		return sealOutcome{}, fmt.Errorf("ref %s moved while sealing (another writer?); not overwritten: %w", ref, err)
	}
	if !s.git.Version.AtLeast(Version{2, 36, 0}) {
		if err := platform.SyncFS(s.gitDir); err != nil {
			return sealOutcome{}, err
		}
	}
	faultPoint("update-ref")

	return sealOutcome{sha: sha, parent: parent, counts: [3]int{c.added, c.changed, c.removed}}, nil
}

// vouchTree checks that every object of tree, which git wrote from cairn's
// index, is stored (sharedIndex.vouchTree). A missing one removes the index
// (the next staging rebuilds it from the work tree, storing each blob
// again).
func (g *gitEngine) vouchTree(ctx context.Context, tree, ptree string) error {
	err := g.index.vouchTree(ctx, tree, ptree)
	if errors.As(err, new(*errMissingObject)) {
		if rerr := g.s.dropIndex(ctx, err.Error()+" (another program removed it, or a pack is damaged); cairn's index was rebuilt from the work tree, storing each file again"); rerr != nil {
			return errors.Join(err, rerr)
		}
		return fmt.Errorf("%w; cairn's index was removed, to be rebuilt from the work tree", err)
	}
	return err
}

// sealed has nothing to do: git wrote the index whole.
func (g *gitEngine) sealed(context.Context) {}

// close has nothing to stop: every git call ends with the seal.
func (g *gitEngine) close() {}

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
func (g *gitEngine) checkIndexFile(ctx context.Context) {
	s := g.s
	st, ok := stampFile(s.git.Index)
	if !ok || st == g.indexChecked {
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
	g.indexChecked = st
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
