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
	return ShowWith(ctx, st, rec, snapshot.DiffOptions{}, Paging{})
}

// ShowWith is Show with the diff's options (the files, a patch, some
// paths) and a page of its files.
func ShowWith(ctx context.Context, st *snapshot.Store, rec ckpt.Record, o snapshot.DiffOptions, p Paging) (api.Diff, error) {
	ar := rec
	out := api.Diff{A: rec.Parent, B: rec.SHA, Record: &ar}
	err := DiffPage(ctx, st, &out, o, p)
	return out, err
}

// Paging asks for one page of a diff's files and for counts by folder, so a
// checkpoint of 100,000 files is answered in pieces.
type Paging struct {
	Offset, Limit int    // Limit 0: every file
	Folders       bool   // count the files by folder
	Folder        string // only the files under this folder, and its children counted ("": the top)
}

// On reports whether p asks for anything.
func (p Paging) On() bool { return p.Limit > 0 || p.Offset > 0 || p.Folders }

// DiffPage fills d (whose A and B are set: B empty is the work tree) with
// the diff o asks for, its files paged and counted as p asks. Paged, the
// files are listed by name first (no blob read) and only the page's get
// their line counts; Stat is then a one-line count of what changed.
func DiffPage(ctx context.Context, st *snapshot.Store, d *api.Diff, o snapshot.DiffOptions, p Paging) error {
	if !p.On() {
		res, err := st.DiffWith(ctx, d.A, d.B, o)
		d.Stat, d.Patch, d.Files = res.Stat, res.Patch, res.Files
		return err
	}
	names := o
	names.Files, names.NamesOnly, names.Patch = true, true, false
	res, err := st.DiffWith(ctx, d.A, d.B, names)
	if err != nil {
		return err
	}
	files := res.Files
	if p.Folder != "" {
		files = ckpt.Under(files, p.Folder)
	}
	if p.Folders {
		d.Folders = ckpt.GroupFiles(files, p.Folder)
	}
	d.Total, d.Offset = len(files), min(max(p.Offset, 0), len(files))
	d.Stat = ckpt.CountLine(files)
	page := ckpt.Page(files, p.Offset, p.Limit)
	if len(page) == 0 {
		d.Files = []api.FileChange{}
		return nil
	}
	counted := o
	counted.Files, counted.NamesOnly, counted.Paths = true, false, make([]string, len(page))
	for i, f := range page {
		counted.Paths[i] = f.Path
	}
	cres, err := st.DiffWith(ctx, res.TreeA, res.TreeB, counted)
	d.Files, d.Patch = cres.Files, cres.Patch
	return err
}
