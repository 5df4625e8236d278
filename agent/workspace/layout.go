package workspace

import (
	"context"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/agent/autodev"
	"github.com/cairn-dev/cairn/agent/hankweave"
	"github.com/cairn-dev/cairn/snapshot"
	"github.com/cairn-dev/cairn/watcher"
)

// layout is what a workspace does differently for its layout, chosen once
// each time the workspace opens its store: what it watches, what a watched
// change means, what an autosave holds and what the runtime's lifecycle
// asks for. Every method runs on the workspace's goroutine, except that the
// watch filter runs on the watcher's.
type layout interface {
	// watch is the root of the workspace's one watch and its filter (rel
	// is from the root).
	watch() (root string, skip func(rel string, isDir bool) bool)
	// take interprets a change taken from the watch: a change of the work
	// tree (rel is then from the work tree), of a runtime control file
	// (noted for the lifecycle), or of neither.
	take(c watcher.Change) (rel string, k changeKind)
	// selection is the patterns (excludes added) of a seal that is no
	// lifecycle checkpoint: nil for the store's own. ok is false while
	// nothing says what to checkpoint (no plan yet). reread reads the
	// runtime's state first, as nothing has yet.
	selection(reread bool) (patterns []string, ok bool)
	// pass runs the lifecycle: at the start of a watch (startup), on a
	// control change, after lost events, at a retry and when the channel it
	// returned last fires. It returns when to run again, or nil.
	pass(ctx context.Context, wt *watcher.Watcher, startup bool) <-chan time.Time
	// ownSeals reports whether the layout seals checkpoints of its own
	// (lifecycle markers): a failed seal is then always retried, since a
	// retry's pass seals them again.
	ownSeals() bool
}

// changeKind is what a watched change is to the workspace.
type changeKind int

const (
	changeNone    changeKind = iota // a barrier's mark
	changeWork                      // a work-tree path: dirty for the next seal
	changeControl                   // a runtime control file: the lifecycle may have moved
)

// newLayout picks the layout of a store just opened.
func newLayout(w *Workspace, st *snapshot.Store) layout {
	if st.Layout() == snapshot.LayoutHankweave {
		return &hankLayout{w: w, workTree: st.WorkTree(), h: newHankState(w.dir)}
	}
	return &plainLayout{w: w, workTree: st.WorkTree()}
}

// plainLayout watches the work tree alone and has no lifecycle: a
// checkpoint holds the configured patterns.
type plainLayout struct {
	w        *Workspace
	workTree string
}

func (l *plainLayout) watch() (string, func(string, bool) bool) { return l.workTree, l.w.skip }

func (l *plainLayout) take(c watcher.Change) (string, changeKind) { return c.Path, changeWork }

func (l *plainLayout) selection(bool) ([]string, bool) { return nil, true }

func (l *plainLayout) pass(context.Context, *watcher.Watcher, bool) <-chan time.Time { return nil }

func (l *plainLayout) ownSeals() bool { return false }

// hankLayout watches the execution directory: the work tree and the
// runtime's control files in one queue, so a marker is ordered exactly
// against the file changes around it. The runtime's plan selects what a
// checkpoint holds.
type hankLayout struct {
	w        *Workspace
	workTree string // the execution directory itself, or its agentRoot/
	h        *hankState
}

// sub reports whether the work tree is agentRoot/, not the execution directory.
func (l *hankLayout) sub() bool { return l.workTree != l.w.dir }

func (l *hankLayout) watch() (string, func(string, bool) bool) { return l.w.dir, l.skip }

// skip is the watch filter: the work tree minus what is never checkpointed,
// plus the runtime's state, lock and journal.
func (l *hankLayout) skip(rel string, isDir bool) bool {
	if rel == ".hankweave" || rel == ".hankweave/events" {
		return false
	}
	if strings.HasPrefix(rel, ".hankweave/") {
		return !isControl(rel)
	}
	if l.sub() {
		if rel == "agentRoot" {
			return false
		}
		r, ok := strings.CutPrefix(rel, "agentRoot/")
		if !ok {
			return true
		}
		rel = r
	}
	return l.w.skip(rel, isDir)
}

func (l *hankLayout) take(c watcher.Change) (string, changeKind) {
	if !l.sub() {
		if !isControl(c.Path) {
			return c.Path, changeWork
		}
	} else if r, ok := strings.CutPrefix(c.Path, "agentRoot/"); ok {
		return r, changeWork
	}
	l.h.saw(c)
	return "", changeControl
}

func (l *hankLayout) selection(reread bool) ([]string, bool) {
	if reread {
		if st, err := hankweave.ReadState(l.w.dir); err == nil {
			l.h.last = st
		}
	}
	pats, ok := l.h.currentPatterns()
	return l.w.Patterns(pats), ok
}

func (l *hankLayout) pass(ctx context.Context, wt *watcher.Watcher, startup bool) <-chan time.Time {
	return l.lifecycle(ctx, wt, startup)
}

func (l *hankLayout) ownSeals() bool { return true }

// isControl reports whether rel (from the execution directory) is a runtime
// file whose change may be a lifecycle marker.
func isControl(rel string) bool {
	switch rel {
	case ".hankweave/state.json", ".hankweave/runtime.lock", ".hankweave/events/events.jsonl", ".hankweave/events/events.jsonl.zst":
		return true
	}
	return false
}

// autodevLayout keeps checkpoints as commits in the user's own repository
// (agent/autodev; served by serveAutodev, autodev.go). Autosaves are
// off, so it watches only the runtime's control files, whose completed
// codons become checkpoints; git itself finds what changed when one is made.
type autodevLayout struct {
	w            *Workspace
	repo         *autodev.Repo
	since        time.Time // markers that ended before watching began predate it
	baselineDue  bool      // no baseline decided yet (the repository was not ready)
	lifecycleDue bool      // a marker's checkpoint failed: try again at the next poll
	noted        string    // what status and the log last said about the repository
}

func (l *autodevLayout) watch() (string, func(string, bool) bool) { return l.w.dir, l.skip }

func (l *autodevLayout) skip(rel string, isDir bool) bool {
	return rel != ".hankweave" && rel != ".hankweave/events" && !isControl(rel)
}

func (l *autodevLayout) take(c watcher.Change) (string, changeKind) {
	if isControl(c.Path) {
		return "", changeControl
	}
	return "", changeNone
}

func (l *autodevLayout) selection(bool) ([]string, bool) { return nil, false }

func (l *autodevLayout) pass(ctx context.Context, _ *watcher.Watcher, _ bool) <-chan time.Time {
	l.lifecycle(ctx)
	return nil
}

func (l *autodevLayout) ownSeals() bool { return true }
