package ckpt

// How a file differs between the two sides of a diff.
const (
	FileAdded   = "added"
	FileChanged = "changed"
	FileRemoved = "removed"
)

// FileChange is one file a diff finds changed. A binary file is named, with
// no line counts: its content is never shown as text.
type FileChange struct {
	Path    string `json:"path"`   // slash-separated, relative to the work tree
	Status  string `json:"status"` // FileAdded | FileChanged | FileRemoved
	Binary  bool   `json:"binary,omitempty"`
	Added   int    `json:"linesAdded,omitempty"`
	Removed int    `json:"linesRemoved,omitempty"`
}
