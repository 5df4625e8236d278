package api

import "time"

// ReplicationStatus is a workspace's replication to its fleet remote
// (docs/operating.md, "Fleet replication").
type ReplicationStatus struct {
	Remote string `json:"remote"` // without credentials
	Host   string `json:"host"`
	Key    string `json:"key"`
	// State is idle (up to date or waiting for its interval), pushing,
	// failing (LastError says why; NextRetry is the next attempt) or off
	// (refused: LastError says why, nothing is retried).
	State string `json:"state"`
	// LastPushed is the newest checkpoint the remote holds as far as this
	// daemon knows, LastPushedTime when it was pushed.
	LastPushed     string    `json:"lastPushed,omitempty"`
	LastPushedTime time.Time `json:"lastPushedTime,omitzero"`
	// LagCheckpoints counts checkpoints not pushed yet; LagSeconds is the
	// age of the oldest of them (OldestUnpushed).
	LagCheckpoints int       `json:"lagCheckpoints"`
	LagSeconds     int64     `json:"lagSeconds"`
	OldestUnpushed time.Time `json:"oldestUnpushed,omitzero"`
	// Pushes are git push calls that succeeded since the daemon started,
	// Failures the attempts that failed.
	Pushes   int `json:"pushes"`
	Failures int `json:"failures"`
	// Refs is how many refs the workspace has on the remote.
	Refs          int       `json:"refs"`
	LastError     string    `json:"lastError,omitempty"`
	LastErrorTime time.Time `json:"lastErrorTime,omitzero"`
	NextRetry     time.Time `json:"nextRetry,omitzero"`
	// Conflicts are refs left out because another writer moved them on
	// the remote: never overwritten, tried again when the local ref moves.
	Conflicts []string `json:"conflicts,omitempty"`
}
