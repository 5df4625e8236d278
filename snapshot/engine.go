package snapshot

import (
	"context"
	"errors"
	"time"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// Engines: how a seal is done (docs/engine.md, "The seam"). The in-process
// engine seals incremental seals, first seals and full reconciles (Linux),
// and restores when it is ready (inprocrestore.go); git does the rest.
const (
	EngineGit    = "git"    // update-index, write-tree, commit-tree, update-ref
	EngineInproc = "inproc" // objects, trees, commit and ref written by cairn itself
)

// DefaultEngine is the engine of a store whose Options name none: the
// in-process one; `engine = "git"` keeps incremental seals on the git
// command line (docs/cairn-formats.md).
const DefaultEngine = EngineInproc

// errFallback means the in-process engine cannot seal this request exactly
// as git would (no base recorded, an ignore file changed, an unusual
// config): the git engine seals it instead.
var errFallback = errors.New("in-process engine: fall back to git")

// engine seals one checkpoint's files into the store (docs/engine.md, "The seam").
// The store holds its lock around the seal, has chosen the record's id, the
// ref, the parent and the ref's old value, and records the outcome in the
// ledger; the engine writes the objects, the commit and the ref's move, and
// owns whatever it keeps between seals. Two implement it: gitEngine (git's
// commands, any request) and inproc (cairn's own writes, an incremental
// seal it is ready for; errFallback sends the request to git).
type engine interface {
	// seal seals j: the files, a commit on j.parent, the ref moved from
	// j.oldTip. It sets j.rec's Issues and Skipped.
	seal(ctx context.Context, j *sealJob) (sealOutcome, error)
	// sealed runs once the store recorded the checkpoint in the ledger.
	sealed(ctx context.Context)
	// close stops the engine's long-running helpers; its state stays.
	close()
}

// sealJob is one seal an engine does, as the store prepared it.
type sealJob struct {
	req    SealRequest
	rec    *ckpt.Record // the checkpoint's record under way: its id and ref
	sel    *Selector    // the selection its files are held under
	parent string       // the checkpoint it is sealed on
	oldTip string       // the ref's value it moves from
	now    time.Time    // its time, in the commit and the record
}

// sealOutcome is what an engine sealed.
type sealOutcome struct {
	sha    string // the new checkpoint's commit
	parent string // what it was sealed on: j.parent, or one the git engine fell back to
	// counts are the paths added, changed and removed against parent.
	counts [3]int
	// skipped: SkipUnchanged, and the seal would record nothing new.
	skipped bool
}

var (
	_ engine = (*gitEngine)(nil)
	_ engine = (*inproc)(nil)
)

// engineName is the engine the store's options ask for incremental seals.
func (s *Store) engineName() string {
	if s.opts.Engine == "" {
		return DefaultEngine
	}
	return s.opts.Engine
}

// closeEngines stops the engines' long-running helpers (Close).
func (s *Store) closeEngines() {
	s.gitEng.close()
	s.inproc.close()
}
