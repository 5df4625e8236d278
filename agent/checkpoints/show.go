package checkpoints

import (
	"context"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/restore"
	"github.com/cairn-dev/cairn/restore/ckpt"
	"github.com/cairn-dev/cairn/snapshot"
)

// ResolveArg resolves a target given in a query (ledger id, SHA prefix, …) to a full SHA.
func ResolveArg(ctx context.Context, st *snapshot.Store, arg string) (ckpt.Record, error) {
	t, err := restore.ParseTarget(arg)
	if err != nil {
		return ckpt.Record{}, err
	}
	return ResolveTarget(ctx, st, t)
}

// Show is a record and the files it changed from its parent, with a diffstat.
func Show(ctx context.Context, st *snapshot.Store, rec ckpt.Record) (api.Diff, error) {
	return ShowWith(ctx, st, rec, snapshot.DiffOptions{})
}

// ShowWith is Show with the diff's options: the files, a patch, some paths.
func ShowWith(ctx context.Context, st *snapshot.Store, rec ckpt.Record, o snapshot.DiffOptions) (api.Diff, error) {
	ar := rec
	out := api.Diff{A: rec.Parent, B: rec.SHA, Record: &ar}
	res, err := st.DiffWith(ctx, rec.Parent, rec.SHA, o)
	out.Stat, out.Patch, out.Files = res.Stat, res.Patch, res.Files
	return out, err
}
