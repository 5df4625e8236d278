// Package api holds the wire types of cairn's local socket API, shared by the
// daemon and its clients. It depends only on restore/ckpt, the shared
// checkpoint types, which depends on nothing of ours.
package api

import (
	"time"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// Version is the API version, sent both ways in the VersionHeader.
const (
	Version       = "1"
	VersionHeader = "Cairn-Api-Version"
	// PathPrefix begins every path.
	PathPrefix = "/v1/"
)

// Error is every error answer: a code and a sentence. A seal that failed
// after it was recorded also carries its ledger record.
type Error struct {
	Code    string  `json:"code"`
	Message string  `json:"message"`
	Record  *Record `json:"record,omitempty"`
	// Lost lists, for TARGET_DAMAGED, each object of the target the store
	// cannot give back.
	Lost []LostObject `json:"lost,omitempty"`
}

// LostObject is an object a refused restore needed (restore/ckpt's).
type LostObject = ckpt.LostObject

// CodeTargetDamaged refuses a restore whose target the store cannot give
// back whole; nothing was changed.
const CodeTargetDamaged = "TARGET_DAMAGED"

// Status is the daemon's answer to GET /v1/status.
type Status struct {
	PID        int               `json:"pid"`
	Version    string            `json:"version"`
	Started    time.Time         `json:"started"`
	StateDir   string            `json:"stateDir"`
	Socket     string            `json:"socket"`
	Config     string            `json:"config,omitempty"`
	ConfigErr  string            `json:"configError,omitempty"` // a reload that was refused: the old config runs
	Roots      []string          `json:"roots"`
	Workspaces []WorkspaceStatus `json:"workspaces"`
	// Workers are the per-owner processes of a root daemon (shown to root only).
	Workers []WorkerStatus `json:"workers,omitempty"`
	// Refused are folders a watch root matched that cairn will not serve, with why (root only).
	Refused []RefusedWorkspace `json:"refused,omitempty"`
	// NotWatched are the asking user's own folders that a watch root
	// matched and cairn does not watch (a per-owner share of a root's
	// cap, a refusal), with why: what Refused shows root, for that user.
	NotWatched []RefusedWorkspace `json:"notWatched,omitempty"`
}

// WorkerStatus is one worker process of a root daemon: it does every file
// operation for the workspaces of one owner, as that owner.
type WorkerStatus struct {
	UID        uint32 `json:"uid"`
	User       string `json:"user,omitempty"`
	PID        int    `json:"pid,omitempty"`
	State      string `json:"state"` // starting, running, restarting
	Error      string `json:"error,omitempty"`
	Restarts   int    `json:"restarts"`
	Workspaces int    `json:"workspaces"`
	// Dropped counts what the supervisor refused from this worker, by kind
	// (status, event, metric, log: status rows or replies, events, metric
	// series, log lines); DroppedWhy is the last reason. See
	// docs/worker-protocol.md.
	Dropped    map[string]int64 `json:"dropped,omitempty"`
	DroppedWhy string           `json:"droppedWhy,omitempty"`
}

// RefusedWorkspace is a folder a watch root matched and cairn refused.
type RefusedWorkspace struct {
	Dir    string `json:"dir"`
	Reason string `json:"reason"`
}

// WorkspaceStatus is one watched workspace.
type WorkspaceStatus struct {
	Dir      string `json:"dir"`
	Layout   string `json:"layout"`
	WorkTree string `json:"workTree,omitempty"`
	Store    string `json:"store,omitempty"`
	// State is starting, watching, degraded (watch limit hit: every seal a
	// full reconcile, plus periodic ones), failed (the store cannot be opened,
	// or the last seal failed: Error says why, RetryAt when it is tried
	// again), or gone (the workspace folder was removed).
	State     string    `json:"state"`
	Error     string    `json:"error,omitempty"`
	Watches   int       `json:"watches"`
	Pending   int       `json:"pending"` // changed paths not yet sealed
	Last      string    `json:"lastCheckpoint,omitempty"`
	LastState string    `json:"lastState,omitempty"`
	LastTime  time.Time `json:"lastTime,omitempty"`
	Seals     int       `json:"seals"` // checkpoints sealed by this daemon since it started
	Failures  int       `json:"failures"`
	Rolling   bool      `json:"rollingBack,omitempty"` // a restore or rollback is under way

	// Unwatched counts folders (each with its subtree) the watch does not
	// cover, UnwatchedDirs names the first of them. While any is unwatched,
	// every seal is a full reconcile.
	Unwatched     int      `json:"unwatched,omitempty"`
	UnwatchedDirs []string `json:"unwatchedDirs,omitempty"`
	// StaleUpTo (degraded, with autosave on) is how long a change in an
	// unwatched folder may go unseen: a full reconcile runs that often
	// ("10s", reconcile_interval). LastReconcile and NextReconcile are the
	// last and next ones; NextRewatch the next attempt at a complete watch.
	StaleUpTo     string    `json:"staleUpTo,omitempty"`
	LastReconcile time.Time `json:"lastReconcile,omitzero"`
	NextReconcile time.Time `json:"nextReconcile,omitzero"`
	NextRewatch   time.Time `json:"nextRewatch,omitzero"`
	// RetryAt is when a failed seal is tried again, its changes kept.
	RetryAt time.Time `json:"retryAt,omitzero"`
	// Skipped names the files left out of checkpoints for their size, as last seen.
	Skipped []PathIssue `json:"skipped,omitempty"`
	// Notice is something to know that is no error now: the store was
	// deleted and recreated, so the checkpoints before it are lost.
	Notice string `json:"notice,omitempty"`

	// Progress is how far a long seal under way has come (a first seal, a
	// full reconcile); nil when none runs.
	Progress *Progress `json:"progress,omitempty"`
	// The store (docs/operating.md, "Maintenance"): checkpoints kept (usable ledger
	// records), its bytes on disk and loose objects as last measured (at
	// open, after each seal and after each maintenance), and the last
	// maintenance.
	Kept            int                `json:"kept"`
	StoreBytes      int64              `json:"storeBytes,omitempty"`
	LooseObjects    int64              `json:"looseObjects"`
	LastMaintenance *MaintenanceResult `json:"lastMaintenance,omitempty"`
	// Budget is the last size-budget pass (max_store_size, max_total_size).
	Budget *Budget `json:"budget,omitempty"`
	// AutosavePaused says why autosaves are paused: "disk almost full: N
	// free, floor M". Lifecycle and manual checkpoints still seal.
	AutosavePaused string `json:"autosavePaused,omitempty"`
	// Replication is the push to the fleet remote; nil when not configured.
	Replication *ReplicationStatus `json:"replication,omitempty"`
	// Foreign names the folders inside or above the workspace that someone
	// other than its owner can write (README, "Security"), the first
	// ForeignShown of them; ForeignMore counts the rest.
	Foreign     []ForeignFolder `json:"foreign,omitempty"`
	ForeignMore int             `json:"foreignMore,omitempty"`
	// StoreExposed names the parts of the store (its folder, its ledger)
	// other users can reach through their modes, with the chmod that
	// closes them; cairn does not change an existing store's modes itself.
	StoreExposed string `json:"storeExposed,omitempty"`
}

// ForeignShown is how many foreign-writable folders a workspace's status names.
const ForeignShown = 20

// ForeignFolder is a folder someone other than a workspace's owner can write.
type ForeignFolder struct {
	Path string `json:"path"`
	// Why: "owned by uid 1002", "writable by everyone", "writable by group devs (bob, carol)".
	Why string `json:"why"`
	// Above: an ancestor of the workspace, not a folder in it.
	Above bool `json:"above,omitempty"`
	// LeftOut: a workspace served as root leaves it out of its checkpoints
	// and restores.
	LeftOut bool `json:"leftOut,omitempty"`
}

// CheckpointRequest is POST /v1/checkpoint: seal one checkpoint now.
type CheckpointRequest struct {
	Workspace string `json:"workspace"`
	Label     string `json:"label,omitempty"`
	// Status, with CodonID and RunID, seals a lifecycle checkpoint
	// (rig-setup, completed, error, skipped, exit); empty seals a manual one.
	Status    string `json:"status,omitempty"`
	CodonID   string `json:"codonId,omitempty"`
	CodonName string `json:"codonName,omitempty"`
	RunID     string `json:"runId,omitempty"`
}

// PathIssue and Record are the ledger's own types (restore/ckpt): the wire
// carries exactly what the ledger records.
type (
	PathIssue = ckpt.PathIssue
	Record    = ckpt.Record
)

// Progress is how far a workspace's long operation has come: Op says what
// it is ("sealing baseline", "reconciling", "maintenance: prune"), Done of
// Total files read (Unit "steps": maintenance steps begun), and their Bytes
// when known; Since is when it began. Also the data of a "progress" event.
type Progress struct {
	Op    string    `json:"op"`
	Done  int       `json:"done"`
	Total int       `json:"total"`
	Unit  string    `json:"unit,omitempty"` // "" is files
	Bytes int64     `json:"bytes,omitempty"`
	Since time.Time `json:"since"`
}

// Units is what Done and Total count: "files" unless Unit says.
func (p Progress) Units() string {
	if p.Unit == "" {
		return "files"
	}
	return p.Unit
}

// Percent is Done of Total in whole percent (0 when Total is 0).
func (p Progress) Percent() int {
	if p.Total <= 0 {
		return 0
	}
	return min(100, p.Done*100/p.Total)
}
