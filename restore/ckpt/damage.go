package ckpt

import (
	"fmt"
	"strings"
)

// LostObject is an object a restore needs that the store cannot give back:
// missing, or present but unreadable (a damaged pack or loose object).
type LostObject struct {
	SHA     string `json:"sha"`
	Type    string `json:"type"`           // commit, tree or blob
	Path    string `json:"path,omitempty"` // where the target holds it; empty for the commit and its root tree
	Problem string `json:"problem"`        // missing, unreadable: <git's words>, content does not match its id, …
}

// TargetDamagedError refuses a restore whose target the store cannot give
// back whole. It is returned before the work tree is touched: nothing was
// written or deleted.
type TargetDamagedError struct {
	Target string       // the commit asked for
	Lost   []LostObject // by path
	// PreRestore is the pre-restore checkpoint sealed before the damage was
	// found (a blob needed only for a file changed since the last seal), or
	// empty: the refusal came before it.
	PreRestore string
}

func (e *TargetDamagedError) Error() string {
	var b strings.Builder
	t := e.Target
	if len(t) > 7 {
		t = t[:7]
	}
	n := "1 object"
	if len(e.Lost) != 1 {
		n = fmt.Sprintf("%d objects", len(e.Lost))
	}
	fmt.Fprintf(&b, "checkpoint %s is damaged: the store cannot give back %s it needs; restore refused, the work tree is untouched", t, n)
	if e.PreRestore != "" {
		fmt.Fprintf(&b, " (the pre-restore checkpoint %s holds it as it is)", e.PreRestore)
	}
	for _, l := range e.Lost {
		switch {
		case l.Path != "":
			fmt.Fprintf(&b, "\n  %s %q %s: %s", l.Type, l.Path, l.SHA, l.Problem)
		case l.Type == "tree":
			fmt.Fprintf(&b, "\n  tree (the root) %s: %s", l.SHA, l.Problem)
		default:
			fmt.Fprintf(&b, "\n  %s %s: %s", l.Type, l.SHA, l.Problem)
		}
	}
	return b.String()
}
