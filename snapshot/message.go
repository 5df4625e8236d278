package snapshot

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// message is the runtime's commit message, then cairn's trailers
// (docs/cairn-formats.md, "Commit messages").
// parent, when not empty, is written as the Cairn-Parent trailer: the
// logical parent of a checkpoint sealed as a root commit.
func message(req SealRequest, rec ckpt.Record, parent string, now time.Time) string {
	status := req.Status
	if status == "" {
		status = string(req.Kind)
	}
	var b strings.Builder
	if req.CodonID != "" {
		fmt.Fprintf(&b, "%s:%s [run:%s] %s\n\n", status, rec.CodonID, rec.RunID, rec.CodonName)
		fmt.Fprintf(&b, "Codon: %s\n", rec.CodonName)
	} else if req.subject != "" {
		fmt.Fprintf(&b, "%s\n\n", req.subject)
	} else {
		first := string(req.Kind)
		if rec.Label != "" {
			first += ": " + rec.Label
		}
		fmt.Fprintf(&b, "%s\n\n", first)
	}
	fmt.Fprintf(&b, "Status: %s\n", status)
	fmt.Fprintf(&b, "Timestamp: %s\n", isoTime(now))
	if req.Duration > 0 {
		fmt.Fprintf(&b, "Duration: %dms\n", req.Duration.Milliseconds())
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "%s: %s\n", trailerID, rec.ID)
	fmt.Fprintf(&b, "%s: %s\n", trailerKind, req.Kind)
	if rec.Label != "" {
		fmt.Fprintf(&b, "%s: %s\n", trailerLabel, rec.Label)
	}
	if rec.RunID != "" {
		fmt.Fprintf(&b, "%s: %s\n", trailerRun, rec.RunID)
	}
	if rec.CodonID != "" {
		fmt.Fprintf(&b, "%s: %s\n", trailerCodon, rec.CodonID)
	}
	if rec.Attempt > 0 {
		fmt.Fprintf(&b, "%s: %d\n", trailerAttempt, rec.Attempt)
	}
	if parent != "" {
		fmt.Fprintf(&b, "%s: %s\n", trailerParent, parent)
	}
	return b.String()
}

// oneLine keeps a label or id on one line of a commit message.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

// diffCounts counts paths added, modified and removed from parent to commit.
func (s *Store) diffCounts(ctx context.Context, parent, commit string) (added, changed, removed int, err error) {
	out, err := s.git.Run(ctx, nil, "diff-tree", "-r", "-z", "--no-renames", "--name-status", parent, commit)
	if err != nil {
		return 0, 0, 0, err
	}
	f := splitNul(out)
	for i := 0; i+1 < len(f); i += 2 {
		switch f[i] {
		case "A":
			added++
		case "D":
			removed++
		default:
			changed++
		}
	}
	return added, changed, removed, nil
}
