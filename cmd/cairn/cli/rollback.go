package cli

import (
	"context"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/restore"
	"github.com/cairn-dev/cairn/snapshot"
)

func init() {
	register("rollback", "roll a workspace back to a codon, the last success or a checkpoint SHA", runRollback)
	register("undo", "undo the last restore (return to the newest pre-restore checkpoint)", runUndo)
}

func runRollback(ctx context.Context, e *env, args []string) error {
	fs := newFlags("rollback", "rollback <dir> (--codon ID [--type T] | --last-success | --sha S) "+restoringUsage, e)
	var rf restoreFlags
	rf.registerRestoring(fs)
	codon := fs.String("codon", "", "codon id")
	typ := fs.String("type", "end", "checkpoint type with --codon: start, end, rig-setup, completed, error, skipped")
	last := fs.Bool("last-success", false, "roll back to the last success")
	sha := fs.String("sha", "", "roll back to the checkpoint with this SHA (prefix of 4+ hex digits)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	n := 0
	for _, set := range []bool{*codon != "", *last, *sha != ""} {
		if set {
			n++
		}
	}
	if len(pos) != 1 || n != 1 {
		fs.Usage()
		return usageErr("rollback takes one workspace directory and exactly one of --codon, --last-success, --sha")
	}
	cmd := api.Command{ID: "cli"}
	data := api.RollbackData{Paths: rf.paths, DryRun: *rf.dry}
	var t restore.Target
	switch {
	case *codon != "":
		cmd.Type = api.CmdRollbackToCodon
		data.CodonID, data.CheckpointType = *codon, *typ
		t = restore.ByCodon(*codon, *typ)
	case *last:
		cmd.Type = api.CmdRollbackToLastSucc
		t = restore.ByLastSuccess()
	default:
		cmd.Type = api.CmdRollbackToCheckpoint
		data.CheckpointSHA = *sha
		t = restore.BySHA(*sha)
		t.Raw = *sha
	}
	cmd.Data = mustJSON(data)
	c, abs, err := daemonFor(ctx, *rf.sock, rf.sf.stateDir, pos[0])
	if err != nil {
		return err
	}
	cmd.Workspace = abs
	var res api.RestoreResult
	if c != nil {
		err = c.Command(ctx, cmd, &res)
	}
	if c == nil || fallBack(err) {
		res, err = rf.direct(ctx, abs, func(st *snapshot.Store) (api.RestoreResult, error) {
			return agent.RunRestore(ctx, st, st.Dir(), rf.op(e, t))
		})
	}
	if err != nil {
		return refusal(err)
	}
	return printRestore(e, pos[0], res, *rf.asJSON)
}

func runUndo(ctx context.Context, e *env, args []string) error {
	fs := newFlags("undo", "undo <dir> "+restoringUsage, e)
	var rf restoreFlags
	rf.registerRestoring(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		fs.Usage()
		return usageErr("undo takes one workspace directory")
	}
	c, abs, err := daemonFor(ctx, *rf.sock, rf.sf.stateDir, pos[0])
	if err != nil {
		return err
	}
	var res api.RestoreResult
	if c != nil {
		res, err = c.UndoWith(ctx, api.UndoRequest{Workspace: abs, Paths: rf.paths, DryRun: *rf.dry})
	}
	if c == nil || fallBack(err) {
		res, err = rf.direct(ctx, abs, func(st *snapshot.Store) (api.RestoreResult, error) {
			return agent.Undo(ctx, st, st.Dir(), rf.op(e, restore.Target{}))
		})
	}
	if err != nil {
		return refusal(err)
	}
	return printRestore(e, pos[0], res, *rf.asJSON)
}
