package api

import (
	"encoding/json"
	"time"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// Command is POST /v1/command: the runtime's envelope {id, type, data}, plus the
// workspace it acts on. Workspace may be given at the top level or inside data.
type Command struct {
	ID        string          `json:"id,omitempty"`
	Type      string          `json:"type"`
	Workspace string          `json:"workspace,omitempty"`
	Data      json.RawMessage `json:"data,omitempty"`
}

// CommandReply answers a Command: the same id and type, and the result.
type CommandReply struct {
	ID   string `json:"id,omitempty"`
	Type string `json:"type"`
	Data any    `json:"data"`
}

// Command types (the runtime's).
const (
	CmdCheckpointList       = "checkpoint.list"
	CmdRollbackToCheckpoint = "rollback.toCheckpoint"
	CmdRollbackToCodon      = "rollback.toCodon"
	CmdRollbackToLastSucc   = "rollback.toLastSuccess"
)

// CheckpointListData is checkpoint.list's data.
type CheckpointListData struct {
	Workspace string `json:"workspace,omitempty"`
	RunID     string `json:"runId,omitempty"`
}

// CheckpointList is checkpoint.list's answer, in the runtime's shape
// (docs/runtime-formats.md, "checkpoint.list").
type CheckpointList struct {
	RunID         string           `json:"runId"`
	CurrentBranch string           `json:"currentBranch"`
	Checkpoints   []CheckpointInfo `json:"checkpoints"`
}

// CheckpointInfo is one lifecycle checkpoint in checkpoint.list, newest first.
type CheckpointInfo struct {
	CodonID        string `json:"codonId"`
	CodonName      string `json:"codonName"`
	CheckpointType string `json:"checkpointType"`
	SHA            string `json:"sha"`
	Status         string `json:"status"`
	Timestamp      string `json:"timestamp"`
}

// RollbackData is the data of rollback.toCheckpoint ({checkpointSha}),
// rollback.toCodon ({codonId, checkpointType}) and rollback.toLastSuccess ({}).
// Paths and DryRun are cairn's, as in RestoreRequest.
type RollbackData struct {
	Workspace      string   `json:"workspace,omitempty"`
	CheckpointSHA  string   `json:"checkpointSha,omitempty"`
	CodonID        string   `json:"codonId,omitempty"`
	CheckpointType string   `json:"checkpointType,omitempty"`
	AutoRestart    bool     `json:"autoRestart,omitempty"`
	Paths          []string `json:"paths,omitempty"`
	DryRun         bool     `json:"dryRun,omitempty"`
}

// RestoreRequest is POST /v1/restore. Target is a ledger id (c7), a SHA
// prefix, a codon spec (codon:ID[:type]), last-success, or a time (@10:42,
// autosave@10:42).
type RestoreRequest struct {
	Workspace string   `json:"workspace"`
	Target    string   `json:"target"`
	Paths     []string `json:"paths,omitempty"`
	DryRun    bool     `json:"dryRun,omitempty"`
}

// UndoRequest is POST /v1/undo: back to the newest pre-restore checkpoint,
// or only the named paths; DryRun plans only.
type UndoRequest struct {
	Workspace string   `json:"workspace"`
	Paths     []string `json:"paths,omitempty"`
	DryRun    bool     `json:"dryRun,omitempty"`
}

// WorkspaceRequest names one workspace: POST /v1/watch, /v1/unwatch.
type WorkspaceRequest struct {
	Workspace string `json:"workspace"`
}

// PlanFile is one file a restore writes or deletes (restore/ckpt's).
type PlanFile = ckpt.PlanFile

// Continuation is the run a rollback recorded in state.json.
type Continuation struct {
	FromRun       string  `json:"fromRun,omitempty"`
	ToRun         string  `json:"toRun"`
	SourceRun     string  `json:"sourceRun"`
	AfterCodon    *string `json:"afterCodon"`
	CheckpointSHA string  `json:"checkpointSha"`
}

// RestoreResult answers a restore, undo or rollback.
type RestoreResult struct {
	Target     Record      `json:"target"`
	PreRestore *Record     `json:"preRestore,omitempty"`
	Write      []PlanFile  `json:"write"`
	Delete     []PlanFile  `json:"delete"`
	Kept       int         `json:"kept"`
	Diff       []PathIssue `json:"differences,omitempty"`
	// LeftOut are paths the restore left alone: they are in a folder others
	// can write, in a workspace served as root (README, "Security").
	LeftOut   []PathIssue   `json:"leftOut,omitempty"`
	DryRun    bool          `json:"dryRun,omitempty"`
	Paths     []string      `json:"paths,omitempty"`
	Continued *Continuation `json:"continuation,omitempty"`
	// StateNote says why state.json was not updated, when it was not.
	StateNote string `json:"stateNote,omitempty"`
	// Archive is what came back from rigArchive/ (Hankweave layout).
	Archive *ArchiveRestore `json:"archive,omitempty"`
	// Autodev layout: Message is the line to print, SavedOn the branch a
	// dirty tree was parked on.
	Layout  string `json:"layout,omitempty"`
	Message string `json:"message,omitempty"`
	SavedOn string `json:"savedOn,omitempty"`
}

// ArchiveRestore is the runtime's rollback.archiveRestore payload.
type ArchiveRestore struct {
	RestoredPaths  []string `json:"restoredPaths"`
	ProtectedPaths []string `json:"protectedPaths,omitempty"`
	FailedPaths    []string `json:"failedPaths,omitempty"`
	Status         string   `json:"status"` // ok, partial
}

// List answers GET /v1/list: the ledger newest first and the position.
type List struct {
	Workspace string   `json:"workspace"`
	Position  string   `json:"position,omitempty"`
	Head      string   `json:"head,omitempty"` // the id marked ← HEAD
	Records   []Record `json:"records"`
	// Layout is "autodev" for the in-repository layout; Off then says why
	// checkpoints are off (no repository), and the list shows it instead.
	Layout string `json:"layout,omitempty"`
	Off    string `json:"off,omitempty"`
	// Pins are the pinned commits' SHAs (cairn pin), sorted.
	Pins []string `json:"pins,omitempty"`
}

// Diff answers GET /v1/diff and GET /v1/show.
type Diff struct {
	A      string  `json:"a"`
	B      string  `json:"b"` // empty: the work tree
	Record *Record `json:"record,omitempty"`
	Stat   string  `json:"stat"`
	Patch  string  `json:"patch,omitempty"`
	// Files lists each file changed (query files=1); path=P (repeatable)
	// narrows the whole answer to those files. With limit=N (and offset=K)
	// Files is one page of them, Total counts them all and Stat is git's
	// one-line summary instead of a line a file.
	Files  []FileChange `json:"files,omitempty"`
	Total  int          `json:"total,omitempty"`
	Offset int          `json:"offset,omitempty"`
	// Folders (query folders=1) counts the files changed in each child of
	// folder P (query folder=P, which also narrows Files to those under P;
	// the top when none), most first.
	Folders []FolderCount `json:"folders,omitempty"`
}

// FolderCount is one folder's share of a diff (restore/ckpt's).
type FolderCount = ckpt.FolderCount

// FileChange is one file a diff lists (restore/ckpt's).
type FileChange = ckpt.FileChange

// Verification answers GET /v1/verify?workspace=W[&id=T]: the checkpoint T
// (default: the newest with a commit) compared with what git alone would
// record for the work tree now, and the objects it names that the store
// lacks (restore/ckpt's). Differences are the answer, not an error: the
// status is 200 whether or not it is clean.
type (
	Verification  = ckpt.Verification
	VerifyDiff    = ckpt.VerifyDiff
	MissingObject = ckpt.MissingObject
)

// Event is one line of GET /v1/events (newline-delimited JSON).
type Event struct {
	Type      string    `json:"type"`
	Workspace string    `json:"workspace,omitempty"`
	Time      time.Time `json:"time"`
	Data      any       `json:"data"`
}

// Event types.
const (
	EvCheckpointSealed  = "checkpoint.sealed"
	EvRollbackStarted   = "rollback.started"
	EvRollbackProgress  = "rollback.progress"
	EvRollbackCompleted = "rollback.completed"
	// EvRollbackArchiveRestore carries ArchiveRestore: files brought back from rigArchive/.
	EvRollbackArchiveRestore = "rollback.archiveRestore"
	EvError                  = "error"
	// EvProgress carries Progress: how far a long seal has come.
	EvProgress = "progress"
)

// RollbackStarted is rollback.started's data.
type RollbackStarted struct {
	FromRun         string `json:"fromRun"`
	FromCodon       string `json:"fromCodon"`
	ToCodon         string `json:"toCodon"`
	ToCheckpoint    string `json:"toCheckpoint"`
	CheckpointType  string `json:"checkpointType"`
	CodonsToProcess int    `json:"codonsToProcess"`
}

// RollbackProgress is rollback.progress's data.
type RollbackProgress struct {
	CurrentStep int    `json:"currentStep"`
	TotalSteps  int    `json:"totalSteps"`
	Message     string `json:"message"`
}

// RollbackCompleted is rollback.completed's data.
type RollbackCompleted struct {
	FromRun        string `json:"fromRun"`
	ToRun          string `json:"toRun"`
	Checkpoint     string `json:"checkpoint"`
	CodonID        string `json:"codonId"`
	CodonName      string `json:"codonName"`
	CheckpointType string `json:"checkpointType"`
	AutoRestart    bool   `json:"autoRestart"`
}

// ErrorEvent is an error event's data.
type ErrorEvent struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}
