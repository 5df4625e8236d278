package sealbench

import (
	"context"
	"fmt"

	"github.com/cairn-dev/cairn/snapshot"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// cairnStore is cairn's own store over a work tree, as the benchmark drives
// it: through the snapshot package's public API only.
type cairnStore struct {
	st *snapshot.Store
}

// openCairn opens (creating it if need be) the plain-layout store of
// workTree under stateDir, its incremental seals by the in-process engine
// (named: the default engine is git, which the other store measures).
// Opening is never timed: a store is opened once per workspace, sealed many
// times.
func openCairn(ctx context.Context, workTree, stateDir string) (*cairnStore, error) {
	return openCairnEngine(ctx, workTree, stateDir, snapshot.EngineInproc)
}

// openCairnEngine is openCairn with the engine of incremental seals named
// ("": the default).
func openCairnEngine(ctx context.Context, workTree, stateDir, engine string) (*cairnStore, error) {
	st, err := snapshot.Open(ctx, workTree, snapshot.Options{Layout: snapshot.LayoutPlain, StateDir: stateDir, Engine: engine})
	if err != nil {
		return nil, err
	}
	return &cairnStore{st: st}, nil
}

// seal seals one checkpoint: incremental over changed, or a full reconcile
// when changed is nil.
func (c *cairnStore) seal(ctx context.Context, label string, changed []string) (ckpt.Record, error) {
	rec, err := c.st.Seal(ctx, snapshot.SealRequest{Kind: ckpt.KindManual, Label: label, Changed: changed})
	if err != nil {
		return rec, err
	}
	if rec.State == ckpt.StateFailed {
		return rec, fmt.Errorf("sealbench: cairn seal failed: %s", rec.Error)
	}
	return rec, nil
}

// reconcile is the daemon's full reconcile (an autosave that skips an
// unchanged tree): the empty record when nothing changed.
func (c *cairnStore) reconcile(ctx context.Context) (ckpt.Record, error) {
	rec, err := c.st.Seal(ctx, snapshot.SealRequest{Kind: ckpt.KindAutosave, SkipUnchanged: true})
	if err == nil && rec.State == ckpt.StateFailed {
		err = fmt.Errorf("sealbench: cairn reconcile failed: %s", rec.Error)
	}
	return rec, err
}

func (c *cairnStore) close() error { return c.st.Close() }

// treeOf returns the tree of a checkpoint cairn sealed, so the benchmark can
// check cairn and the references recorded the same thing.
func (c *cairnStore) treeOf(ctx context.Context, sha string) (string, error) {
	tree, ok := c.st.Resolve(ctx, sha+"^{tree}")
	if !ok {
		return "", fmt.Errorf("sealbench: tree of cairn's %s: not in the store", sha)
	}
	return tree, nil
}

// objects is a runner on cairn's store's objects, for reading trees:
// ls-tree reads objects only, never the store's index.
func (c *cairnStore) objects(ctx context.Context) *snapshot.Git {
	return c.st.ObjectsGit()
}
