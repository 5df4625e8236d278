package api

import "time"

// StoreStats describe a store on disk (docs/operating.md, "Maintenance").
type StoreStats struct {
	Bytes        int64 `json:"bytes"`
	LooseObjects int64 `json:"looseObjects"`
	LooseBytes   int64 `json:"looseBytes"`
	Packs        int64 `json:"packs"`
	PackBytes    int64 `json:"packBytes"`
	PackedObjs   int64 `json:"packedObjects"`
}

// MaintenanceResult is one maintenance run: what it did, or why it was
// skipped (Skipped) or failed (Error). POST /v1/gc answers one.
type MaintenanceResult struct {
	Workspace  string     `json:"workspace,omitempty"`
	Start      time.Time  `json:"start"`
	DurationMS int64      `json:"durationMs"`
	Steps      []string   `json:"steps,omitempty"` // pack-refs, prune, repack geometric|incremental|full
	Skipped    string     `json:"skipped,omitempty"`
	Error      string     `json:"error,omitempty"`
	Before     StoreStats `json:"before"`
	After      StoreStats `json:"after"`
}

// GCRequest is POST /v1/gc: run maintenance on a workspace's store now.
type GCRequest struct {
	Workspace string `json:"workspace"`
	// Full repacks everything and drops unreachable packed objects past
	// the grace period (slower; the daemon does it weekly by itself).
	Full bool `json:"full,omitempty"`
}
