package api

import "time"

// Budget is a workspace's size budget as its last budget pass saw it
// (docs/operating.md, "Budgets and disk space").
type Budget struct {
	// MaxBytes is the budget that applied: max_store_size, or less when
	// max_total_size asked this store for its share of an excess.
	MaxBytes int64 `json:"maxBytes"`
	// Projected is what the store weighs once maintenance has collected
	// what the pass dropped (its estimate; StoreBytes is the measure).
	Projected int64     `json:"projected"`
	Dropped   int       `json:"dropped"` // checkpoints the last pass dropped for size
	At        time.Time `json:"at"`
	// ProtectedOver says the checkpoints nothing may drop (position, newest
	// of each kind, current runs, state.json's SHAs, pins) weigh more than
	// the budget alone: the data is kept.
	ProtectedOver string `json:"protectedOver,omitempty"`
}

// PruneRequest is POST /v1/prune: apply the retention policies and the size
// budgets now (DryRun: only say what would go). MaxStoreSize, when not 0,
// replaces the workspace's max_store_size for this request.
type PruneRequest struct {
	Workspace    string `json:"workspace"`
	DryRun       bool   `json:"dryRun,omitempty"`
	MaxStoreSize int64  `json:"maxStoreSize,omitempty"`
}

// PruneDrop is one ref a prune drops and the checkpoints on it.
type PruneDrop struct {
	Ref     string    `json:"ref"`
	Unit    string    `json:"unit"` // single, run
	IDs     []string  `json:"ids"`
	Kind    string    `json:"kind"` // of the newest checkpoint on it
	Time    time.Time `json:"time"` // of the newest checkpoint on it
	Rule    string    `json:"rule"`
	Skipped string    `json:"skipped,omitempty"` // not dropped after all, and why
}

// PruneResult answers a prune: what goes (or went), the store's bytes
// before, the projection once maintenance collected it, and, for a real
// run, the bytes measured after the maintenance it ran.
type PruneResult struct {
	Workspace     string             `json:"workspace"`
	DryRun        bool               `json:"dryRun"`
	Drops         []PruneDrop        `json:"drops"`
	BytesBefore   int64              `json:"bytesBefore"`
	Projected     int64              `json:"projected"`
	BytesAfter    int64              `json:"bytesAfter,omitempty"`
	MaxStoreBytes int64              `json:"maxStoreBytes,omitempty"`
	ProtectedOver string             `json:"protectedOver,omitempty"`
	Maintenance   *MaintenanceResult `json:"maintenance,omitempty"`
}
