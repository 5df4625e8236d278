package api

// PinRequest is the body of POST /v1/pin and /v1/unpin: the workspace and
// a checkpoint target (ledger id, SHA prefix, codon:…, @time; a full SHA
// for an unpin whose checkpoint is gone).
type PinRequest struct {
	Workspace string `json:"workspace"`
	Target    string `json:"target"`
}

// PinResult answers a pin or an unpin: the checkpoint (its full SHA, and its
// ledger record when it has one), whether it is pinned now, and whether the
// request changed anything.
type PinResult struct {
	Workspace string  `json:"workspace"`
	SHA       string  `json:"sha"`
	Record    *Record `json:"record,omitempty"`
	Pinned    bool    `json:"pinned"`
	Changed   bool    `json:"changed"`
}
