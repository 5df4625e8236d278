package ckpt

// How a path differs between a checkpoint and the work tree (Verification).
const (
	VerifyChanged = "changed" // both hold it: other content, other mode, or both
	VerifyAdded   = "added"   // on disk (git would record it), not in the checkpoint
	VerifyRemoved = "removed" // in the checkpoint, not on disk (or git would not record it)
)

// Verification is what `cairn verify` found: a checkpoint compared with what
// git alone would record for the work tree now, and every object the
// checkpoint names looked up in the store.
type Verification struct {
	ID   string `json:"id,omitempty"` // the ledger id; empty for a commit outside the ledger
	SHA  string `json:"sha"`
	Tree string `json:"tree,omitempty"`
	// Patterns is the selection the work tree was read with.
	Patterns []string `json:"patterns"`
	// Files is how many files the checkpoint holds.
	Files       int             `json:"files"`
	Differences []VerifyDiff    `json:"differences"`
	Missing     []MissingObject `json:"missing"`
	// Unreadable are work-tree paths git could not read: what they hold is unknown.
	Unreadable []PathIssue `json:"unreadable,omitempty"`
	// Skipped are files left out by policy (over the size limit): no difference.
	Skipped []PathIssue `json:"skipped,omitempty"`
}

// Clean reports whether the checkpoint holds exactly what git would record
// now and every object it names is present.
func (v Verification) Clean() bool {
	return len(v.Differences) == 0 && len(v.Missing) == 0 && len(v.Unreadable) == 0
}

// VerifyDiff is one path where the checkpoint and the work tree differ. An
// empty mode and blob on a side means the path is absent there.
type VerifyDiff struct {
	Path           string `json:"path"`
	Status         string `json:"status"` // VerifyChanged | VerifyAdded | VerifyRemoved
	CheckpointMode string `json:"checkpointMode,omitempty"`
	CheckpointBlob string `json:"checkpointBlob,omitempty"`
	DiskMode       string `json:"diskMode,omitempty"`
	DiskBlob       string `json:"diskBlob,omitempty"`
}

// MissingObject is an object the checkpoint names that the store lacks.
type MissingObject struct {
	SHA  string `json:"sha"`
	Type string `json:"type"`           // commit, tree or blob
	Path string `json:"path,omitempty"` // where the checkpoint holds it; empty for the commit and its root tree
}
