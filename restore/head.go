package restore

import (
	"strings"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// HeadMark ends the listing line of the checkpoint the work tree is at.
const HeadMark = "← HEAD"

// HeadMarker returns the id of the checkpoint that gets HeadMark in the
// listing, given the ledger and the current position: the full SHA the work
// tree was last sealed from or restored to. Of several records of that
// commit, the newest wins (the most recent thing the tree was at). No
// position, or one no restorable record holds, marks nothing: "".
func HeadMarker(cps []ckpt.Record, position string) string {
	position = strings.ToLower(strings.TrimSpace(position))
	if position == "" {
		return ""
	}
	id := ""
	var best ckpt.Record
	for _, c := range cps {
		if !c.Usable() || strings.ToLower(c.SHA) != position {
			continue
		}
		if id == "" || older(best, c) {
			best, id = c, c.ID
		}
	}
	return id
}
