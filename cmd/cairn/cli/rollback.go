package cli

import (
	"context"
	"encoding/json"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/restore"
)

func init() {
	register("rollback", "roll a workspace back to a codon, the last success or a checkpoint SHA", runRollback)
	register("undo", "undo the last restore (return to the newest pre-restore checkpoint)", runUndo)
}

func runRollback(ctx context.Context, e *env, args []string) error {
	fs := newFlags("rollback", "rollback <dir> (--codon ID [--type T] | --last-success | --sha S | --turn N [--session S]) "+restoringUsage, e)
	var rf restoreFlags
	rf.register(fs)
	codon := fs.String("codon", "", "codon id")
	typ := fs.String("type", "end", "checkpoint type with --codon: start, end, rig-setup, completed, error, skipped")
	last := fs.Bool("last-success", false, "roll back to the last success")
	sha := fs.String("sha", "", "roll back to the checkpoint with this SHA (prefix of 4+ hex digits)")
	turn := fs.Int("turn", 0, "roll back to before this turn of a coding agent's session (Claude Code, Gemini CLI, Codex hooks)")
	session := fs.String("session", "", "with --turn: the session (default: the newest)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	n := 0
	for _, set := range []bool{*codon != "", *last, *sha != "", *turn != 0} {
		if set {
			n++
		}
	}
	if len(pos) != 1 || n != 1 {
		fs.Usage()
		return usageErr("rollback takes one workspace directory and exactly one of --codon, --last-success, --sha, --turn")
	}
	if *session != "" && *turn == 0 {
		return usageErr("--session needs --turn")
	}
	if *turn != 0 { // a coding agent's turn: the checkpoint before it, by SHA
		r, err := turnCheckpoint(ctx, &rf.sf, pos[0], *turn, *session)
		if err != nil {
			return err
		}
		*sha = r.SHA
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
	res, err := via(ctx, &rf.sf, pos[0], true, func(b backend) (api.RestoreResult, error) {
		return pathsChecked(pos[0], t.String(), rf.opts(e), func(o restoreOpts) (api.RestoreResult, error) {
			data.DryRun = o.dry
			c := cmd
			c.Data = mustJSON(data)
			return b.rollback(ctx, c, t, o)
		})
	})
	if err != nil {
		return refusal(err)
	}
	return printRestore(e, pos[0], res, &rf)
}

func runUndo(ctx context.Context, e *env, args []string) error {
	fs := newFlags("undo", "undo <dir> "+restoringUsage, e)
	var rf restoreFlags
	rf.register(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		fs.Usage()
		return usageErr("undo takes one workspace directory")
	}
	res, err := via(ctx, &rf.sf, pos[0], true, func(b backend) (api.RestoreResult, error) {
		return pathsChecked(pos[0], "the newest pre-restore checkpoint", rf.opts(e), func(o restoreOpts) (api.RestoreResult, error) {
			return b.undo(ctx, o)
		})
	})
	if err != nil {
		return refusal(err)
	}
	return printRestore(e, pos[0], res, &rf)
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}
