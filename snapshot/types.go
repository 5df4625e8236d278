package snapshot

import "time"

// Layout says where a workspace's store lives and what its work tree is.
type Layout string

const (
	LayoutAuto      Layout = "auto"      // hankweave when <dir>/.hankweave exists, else plain
	LayoutHankweave Layout = "hankweave" // store in <dir>/.hankweave/checkpoints, work tree agentRoot/ (or dir)
	LayoutPlain     Layout = "plain"     // store under the state directory, work tree dir
)

// Kind is why a checkpoint was sealed.
type Kind string

const (
	KindRigSetup   Kind = "rig-setup"
	KindCompleted  Kind = "completed"
	KindError      Kind = "error"
	KindSkipped    Kind = "skipped"
	KindExit       Kind = "exit"
	KindAutosave   Kind = "autosave"
	KindManual     Kind = "manual"
	KindPreRestore Kind = "pre-restore"
	KindBaseline   Kind = "baseline"
)

// Kinds lists every kind, for validation.
var Kinds = []Kind{KindRigSetup, KindCompleted, KindError, KindSkipped, KindExit, KindAutosave, KindManual, KindPreRestore, KindBaseline}

// IsLifecycle reports whether k is a codon lifecycle status of the runtime.
func (k Kind) IsLifecycle() bool {
	switch k {
	case KindRigSetup, KindCompleted, KindError, KindSkipped, KindExit:
		return true
	}
	return false
}

// State is how a seal ended.
type State string

const (
	StateOK      State = "ok"
	StatePartial State = "partial" // some paths could not be read: listed
	StateRacy    State = "racy"    // files changed between the marker and the seal: listed
	StateFailed  State = "failed"  // no checkpoint: the error says why
)

// PathIssue names a path a checkpoint could not hold as it is on disk, and why.
type PathIssue struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// Record is one ledger line: one checkpoint.
type Record struct {
	ID        string `json:"id"` // c1, c2, …
	SHA       string `json:"sha,omitempty"`
	Parent    string `json:"parent,omitempty"`
	Kind      Kind   `json:"kind"`
	Label     string `json:"label,omitempty"`
	CodonID   string `json:"codonId,omitempty"`
	CodonName string `json:"codonName,omitempty"`
	RunID     string `json:"runId,omitempty"`
	// Attempt counts earlier records of the same codon in the run (retries, 0-based).
	Attempt int       `json:"attempt,omitempty"`
	Ref     string    `json:"ref,omitempty"` // full ref the checkpoint was sealed on
	Time    time.Time `json:"time"`
	// DurationMS is how long the seal took.
	DurationMS int64       `json:"durationMs"`
	Changed    int         `json:"changed"`
	Added      int         `json:"added"`
	Removed    int         `json:"removed"`
	State      State       `json:"state"`
	Issues     []PathIssue `json:"issues,omitempty"`    // partial/racy: paths not held as they are on disk
	Skipped    []PathIssue `json:"skipped,omitempty"`   // left out by policy (larger than the size limit)
	Error      string      `json:"error,omitempty"`     // failed
	Adopted    bool        `json:"adopted,omitempty"`   // sealed by the runtime itself, recorded by cairn
	Recovered  bool        `json:"recovered,omitempty"` // re-recorded from git trailers after a crash or a lost ledger
}

// SealRequest describes one checkpoint to seal.
type SealRequest struct {
	Kind      Kind
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
	Racy []PathIssue

	subject    string       // replaces the first line (pre-restore: the runtime's wording)
	afterStage func() error // runs between staging and write-tree (a restore adds files it will overwrite)
}
