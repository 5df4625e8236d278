// Package ckpt holds the types every part of a restore shares (README.md,
// "Restore and rollback"): checkpoint kinds and seal states, the ledger
// record, and the plan a restore carries out. The store (snapshot) writes
// and reads them, restore resolves and orchestrates with them, the daemon
// and the CLI print them. It imports nothing of cairn.
package ckpt

import (
	"strconv"
	"time"
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
	// StatePruned: a retention policy dropped the checkpoint's ref; the
	// record stays in the ledger with PrunedAt and PrunedBy, and its commit
	// is left for git to collect. Never a restore target.
	StatePruned State = "pruned"
)

// PathIssue names a path a checkpoint could not hold as it is on disk (or a
// restore could not verify), and why.
type PathIssue struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// Record is one ledger line: one checkpoint. A commit the ledger lacks (the
// runtime's, or one only git knows) is a Record without an ID.
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
	Issues     []PathIssue `json:"issues,omitempty"`  // partial/racy: paths not held as they are on disk
	Skipped    []PathIssue `json:"skipped,omitempty"` // left out by policy (larger than the size limit)
	Error      string      `json:"error,omitempty"`   // failed
	// Engine is what sealed it: "inproc" (cairn wrote the objects, trees,
	// commit and ref itself) or "git" (the git command line); empty for a
	// checkpoint adopted from the runtime or recorded by an earlier cairn.
	Engine    string `json:"engine,omitempty"`
	Adopted   bool   `json:"adopted,omitempty"`   // sealed by the runtime itself, recorded by cairn
	Recovered bool   `json:"recovered,omitempty"` // re-recorded from git trailers after a crash or a lost ledger
	// Republished: a captured checkpoint committed again when it was
	// published, after checkpoints sealed since the capture (its tree was
	// staged before theirs).
	Republished bool `json:"republished,omitempty"`
	// PrunedAt and PrunedBy (state pruned): when a retention policy dropped
	// the checkpoint, and the rule that did ("retention.autosave: keep_within=24h …").
	PrunedAt *time.Time `json:"prunedAt,omitempty"`
	PrunedBy string     `json:"prunedBy,omitempty"`
}

// Pruned reports whether a retention policy dropped r.
func (r Record) Pruned() bool { return r.State == StatePruned }

// Usable reports whether r names a commit a restore may use: a failed seal
// holds none, and a pruned checkpoint's commit is on its way out.
func (r Record) Usable() bool { return r.SHA != "" && r.State != StateFailed && r.State != StatePruned }

// InLedger reports whether r is a ledger record; a commit the runtime
// recorded, or one only git knows, has no ledger id.
func (r Record) InLedger() bool { return r.ID != "" }

// LedgerNum is the number of a ledger id ("c12" → 12): c and digits only,
// else false. The one parser of ids: the store, retention and the resolver
// all order records by it.
func LedgerNum(id string) (int, bool) {
	if len(id) < 2 || id[0] != 'c' {
		return 0, false
	}
	for i := 1; i < len(id); i++ {
		if id[i] < '0' || id[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(id[1:])
	return n, err == nil
}

// Name is how messages name r: its ledger id, else its short SHA.
func (r Record) Name() string {
	if r.ID != "" {
		return r.ID
	}
	return r.Short()
}

// Short is the first seven characters of the SHA.
func (r Record) Short() string {
	if len(r.SHA) > 7 {
		return r.SHA[:7]
	}
	return r.SHA
}

// Plan actions.
const (
	ActionAdd    = "add"    // the target holds a file the work tree lacks
	ActionModify = "modify" // the target holds other content (or mode) for a file
	ActionDelete = "delete" // cairn tracked the file and the target lacks it
)

// PlanFile is one file a restore changes. Size is the bytes written (the
// target's blob) for add/modify, and the bytes removed (the file on disk)
// for delete.
type PlanFile struct {
	Path   string `json:"path"` // slash-separated, relative to the work tree
	Size   int64  `json:"size"`
	Action string `json:"action"` // ActionAdd | ActionModify | ActionDelete
}

// Plan is what a restore to Target writes and deletes; Kept counts the files
// on disk the target lacks that cairn did not track: they stay as they are.
type Plan struct {
	Target Record     `json:"target"`
	Write  []PlanFile `json:"write"`
	Delete []PlanFile `json:"delete"`
	Kept   int        `json:"kept"`
}

// Empty reports whether the plan changes nothing.
func (p Plan) Empty() bool { return len(p.Write) == 0 && len(p.Delete) == 0 }

// Added counts the Write entries that create a file.
func (p Plan) Added() int {
	n := 0
	for _, f := range p.Write {
		if f.Action == ActionAdd {
			n++
		}
	}
	return n
}

// Modified counts the Write entries that replace an existing file (a Write
// entry without an action counts as modified).
func (p Plan) Modified() int { return len(p.Write) - p.Added() }

// WriteBytes is the total size of the files to write.
func (p Plan) WriteBytes() int64 { return total(p.Write) }

// DeleteBytes is the total size of the files to delete.
func (p Plan) DeleteBytes() int64 { return total(p.Delete) }

func total(fs []PlanFile) int64 {
	var n int64
	for _, f := range fs {
		n += f.Size
	}
	return n
}

// Request is one restore for a store to carry out: seal a pre-restore
// checkpoint of the work tree, plan, apply, verify.
type Request struct {
	Target string   // a commit of the store (full sha or anything git resolves)
	Label  string   // how the target is named in the pre-restore record (c7, …)
	Paths  []string // restore only these files or folders (work-tree relative); nil: all
	DryRun bool     // plan only: nothing is sealed, written or deleted
	// Progress, when set, hears each step as it starts.
	Progress func(step, total int, msg string)
	// Changed, when not nil, is every path that changed since the last seal
	// (a watcher's dirty set): the pre-restore checkpoint stages only those.
	Changed []string
}

// Outcome is what a store's restore did (or, dry, would do).
type Outcome struct {
	Target     string      `json:"target"`
	From       string      `json:"from,omitempty"`       // the position the work tree was at before
	PreRestore *Record     `json:"preRestore,omitempty"` // the checkpoint that makes the restore undoable
	Write      []PlanFile  `json:"write"`
	Delete     []PlanFile  `json:"delete"`
	Kept       int         `json:"kept"`                  // files on disk the target lacks that cairn did not track: left alone
	Diff       []PathIssue `json:"differences,omitempty"` // what verification found different from the target
	DryRun     bool        `json:"dryRun,omitempty"`
	// LeftOut are the paths the restore left alone because they are in a
	// folder others can write (a workspace served as root; README, "Security").
	LeftOut []PathIssue `json:"leftOut,omitempty"`
	// SavedOn is the branch the work before the restore was kept on, when
	// the store keeps it on one (the autodev layout parks a dirty tree).
	SavedOn string `json:"savedOn,omitempty"`
}

// TooLarge is why a file of size bytes is left out under a limit of limit
// bytes (max_file_size), in units: "larger than the 100.0 MiB limit (2.0 GiB)".
func TooLarge(limit, size int64) string {
	return "larger than the " + HumanBytes(limit) + " limit (" + HumanBytes(size) + ")"
}
