package snapshot

import (
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
	// Patterns select the files (README.md, "What a checkpoint holds"); nil
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

	subject    string       // replaces the first line (pre-restore: the runtime's wording)
	afterStage func() error // runs between staging and write-tree (a restore adds files it will overwrite)
	engine     string       // EngineGit: the git engine whatever the store's (tests compare the two)
}
