package snapshot

import (
	"context"
	"sync"
	"time"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// Layout says where a workspace's store lives and what its work tree is.
type Layout string

const (
	LayoutAuto      Layout = "auto"      // hankweave when <dir>/.hankweave exists, else plain
	LayoutHankweave Layout = "hankweave" // store in <dir>/.hankweave/checkpoints, work tree agentRoot/ (or dir)
	LayoutPlain     Layout = "plain"     // store under the state directory, work tree dir
)

// The checkpoint types (record, kinds, states, path issues) are restore/ckpt's;
// the store writes and reads them directly.

// SealRequest describes one checkpoint to seal.
type SealRequest struct {
	Kind      ckpt.Kind
	Label     string
	CodonID   string
	CodonName string
	RunID     string
	Attempt   int // 0 for a codon's first record in the run; n for its n-th retry
	// Status is the word in the runtime's message ("completed", …); defaults to Kind.
	Status string
	// Patterns select the files (docs/operating.md, "What a checkpoint holds"); nil
	// means the store's defaults.
	Patterns []string
	// Duration goes into the message's `Duration: {n}ms` line when non-zero.
	Duration time.Duration
	// StartSHA is the parent of a run's first checkpoint; empty means the tip of main.
	StartSHA string
	// Ref overrides the ref the checkpoint is sealed on (a full ref name).
	Ref string
	// Changed lists work-tree paths (slash-separated, relative) that may have
	// changed since the last seal. Nil means a full reconcile of every candidate.
	Changed []string
	// Time stamps the checkpoint; zero means now.
	Time time.Time
	// SkipUnchanged seals nothing (an empty Record, no error) when the tree
	// equals the parent's: autosaves only when something changed.
	SkipUnchanged bool
	// Racy names paths that changed after the lifecycle marker this
	// checkpoint is for: the record's state becomes racy, listing them.
	Racy []ckpt.PathIssue
	// Progress, when set, is told now and then how far a long seal (a full
	// reconcile, a first seal) has come; it must return quickly.
	Progress func(Progress)

	subject    string       // replaces the first line (pre-restore: the runtime's wording)
	afterStage func() error // runs between staging and write-tree (a restore adds files it will overwrite)
	hold       string       // Capture: the held ref the commit goes on instead of its ref (held.go)
	engine     string       // EngineGit: the git engine whatever the store's (tests compare the two)
}

// Progress is how far a seal has come: files read of those it reads, and
// their bytes when the engine knows them.
type Progress struct {
	Done, Total int
	Bytes       int64
}

type progressKey struct{}

// withProgress carries a seal's Progress to the engine's long loops.
func withProgress(ctx context.Context, fn func(Progress)) context.Context {
	if fn == nil {
		return ctx
	}
	return context.WithValue(ctx, progressKey{}, fn)
}

// progressOf is the seal's Progress carried by ctx, or nil.
func progressOf(ctx context.Context) func(Progress) {
	fn, _ := ctx.Value(progressKey{}).(func(Progress))
	return fn
}

// progressTeller counts the files a seal's workers read, of total, and
// tells the seal's Progress (if any) every 500 files and at the last; safe
// for concurrent use.
func progressTeller(ctx context.Context, total int) (read func(size int64)) {
	tell := progressOf(ctx)
	if tell == nil {
		return func(int64) {}
	}
	var mu sync.Mutex
	var done int
	var bytes int64
	return func(size int64) {
		mu.Lock()
		defer mu.Unlock()
		done++
		bytes += size
		if done%500 == 0 || done == total {
			tell(Progress{Done: done, Total: total, Bytes: bytes})
		}
	}
}
