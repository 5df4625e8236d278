package cli

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/autodev"
	"github.com/cairn-dev/cairn/agent/checkpoints"
	"github.com/cairn-dev/cairn/platform"
	"github.com/cairn-dev/cairn/restore"
	"github.com/cairn-dev/cairn/restore/ckpt"
	"github.com/cairn-dev/cairn/snapshot"
)

// layoutAutodev is the in-repository layout (README.md, "AutoDev's
// in-repository mode").
const layoutAutodev = "autodev"

// bareError is printed as it is, without "cairn: ": the seed's exact lines.
type bareError struct{ msg string }

func (e bareError) Error() string { return e.msg }

// autodevWords reports whether a daemon's message is one of the autodev
// layout's restore lines, printed as they are.
func autodevWords(msg string) bool {
	return strings.HasPrefix(msg, "Restore failed: ") || msg == autodev.MsgRunLive
}

// errNotAutodev refuses what the autodev layout does not have.
var errNotAutodev = errors.New("not in the autodev layout: its checkpoints are commits in the folder's own repository (use list, checkpoint, restore, undo, or git itself)")

// autodevBackend works on the repository itself (--layout autodev, no daemon
// watching the folder), as the user running the command.
type autodevBackend struct {
	f    *storeFlags
	real string
}

func (b autodevBackend) repo(ctx context.Context) (*autodev.Repo, error) {
	if err := notAsRootFor(b.real); err != nil {
		return nil, err
	}
	state := b.f.stateDir
	if state == "" {
		state = platform.DefaultStateDir()
	}
	return autodev.Open(ctx, b.real, filepath.Join(state, "autodev", snapshot.PlainStoreName(b.real)))
}

func (b autodevBackend) list(ctx context.Context) (ledger, error) {
	r, err := b.repo(ctx)
	if err != nil {
		return ledger{}, err
	}
	l, err := r.List(ctx)
	if err != nil {
		return ledger{}, err
	}
	out := ledger{head: l.Head, layout: layoutAutodev, off: l.Off}
	for _, e := range l.Entries {
		out.recs = append(out.recs, e.Record())
	}
	return out, nil
}

func (b autodevBackend) checkpoint(ctx context.Context, req snapshot.SealRequest) (ckpt.Record, error) {
	r, err := b.repo(ctx)
	if err != nil {
		return ckpt.Record{}, err
	}
	label := req.Label
	if label == "" {
		label = req.CodonName
	}
	e, _, err := r.Checkpoint(ctx, autodev.Request{Kind: autodev.KindTask, Label: label, Task: req.CodonID})
	if e.ID == "" {
		return ckpt.Record{}, err
	}
	return e.Record(), err
}

// noPartial refuses, before the repository is opened, what the layout's
// restores cannot do.
func noPartial(o restoreOpts) error {
	if o.dry || len(o.paths) > 0 {
		return usageErr("the autodev layout restores the whole tree (git reset --hard): no --dry-run, no --path")
	}
	return nil
}

// restore and undo take the path every layout's restores take
// (checkpoints.RunAutodev: restore.Run over the repository).
func (b autodevBackend) restore(ctx context.Context, _ string, t restore.Target, o restoreOpts) (api.RestoreResult, error) {
	return b.restoring(ctx, false, t, o)
}

func (b autodevBackend) undo(ctx context.Context, o restoreOpts) (api.RestoreResult, error) {
	return b.restoring(ctx, true, restore.Target{}, o)
}

func (b autodevBackend) restoring(ctx context.Context, undo bool, t restore.Target, o restoreOpts) (api.RestoreResult, error) {
	if err := noPartial(o); err != nil {
		return api.RestoreResult{}, err
	}
	r, err := b.repo(ctx)
	if err != nil {
		return api.RestoreResult{}, err
	}
	res, err := checkpoints.RunAutodev(ctx, r, undo, restore.Op{Target: t, Progress: o.progress})
	if err != nil {
		return api.RestoreResult{}, err
	}
	return res, nil
}

func (b autodevBackend) show(context.Context, string, int) (api.Diff, error) {
	return api.Diff{}, errNotAutodev
}

func (b autodevBackend) diff(context.Context, []string, bool) (api.Diff, error) {
	return api.Diff{}, errNotAutodev
}

func (b autodevBackend) rollback(context.Context, api.Command, restore.Target, restoreOpts) (api.RestoreResult, error) {
	return api.RestoreResult{}, errNotAutodev
}

func (b autodevBackend) pin(context.Context, string, bool) (api.PinResult, error) {
	return api.PinResult{}, errNotAutodev
}

func (b autodevBackend) prune(context.Context, api.PruneRequest) (api.PruneResult, error) {
	return api.PruneResult{}, errNotAutodev
}

func (b autodevBackend) gc(context.Context, bool, time.Duration) (api.MaintenanceResult, error) {
	return api.MaintenanceResult{}, errNotAutodev
}
