package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	"github.com/mattn/go-isatty"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/client"
	"github.com/cairn-dev/cairn/restore"
	"github.com/cairn-dev/cairn/snapshot"
)

func init() {
	register("restore", "restore a workspace (or some paths) to a checkpoint", runRestore)
}

// daemon returns a client when a daemon answers on the socket, and the
// workspace's absolute path.
func daemonFor(ctx context.Context, sock, stateDir, dir string) (*client.Client, string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, "", err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	c := client.New(socketPath(sock, stateDir))
	if !c.Running(ctx) {
		return nil, abs, nil
	}
	return c, abs, nil
}

// fallBack reports whether a daemon's answer means "not a workspace it
// watches for you": the command then works on the store directly.
func fallBack(err error) bool {
	var ce *client.Error
	return errors.As(err, &ce) && ce.Status == http.StatusForbidden
}

// refusal turns a daemon's or the engine's refusal into ExitRefused.
func refusal(err error) error {
	if err == nil {
		return nil
	}
	var ce *client.Error
	if errors.As(err, &ce) {
		if ce.Status == http.StatusConflict {
			return &exitError{ExitRefused, errors.New(ce.Message)}
		}
		if ce.Status == http.StatusBadRequest || ce.Status == http.StatusNotFound {
			return errors.New(ce.Message)
		}
		return err
	}
	var amb *restore.AmbiguousError
	var un *restore.UnusableError
	if errors.Is(err, agent.ErrCodonRunning) || errors.As(err, &amb) || errors.As(err, &un) {
		return &exitError{ExitRefused, err}
	}
	return err
}

// progressTo prints steps on a terminal.
func progressTo(e *env) func(step, total int, msg string) {
	if f, ok := e.stderr.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
		return func(step, total int, msg string) { fmt.Fprintf(e.stderr, "[%d/%d] %s\n", step, total, msg) }
	}
	return nil
}

// restoreFlags are the flags of the commands that go through the daemon:
// show and diff register the common ones, and every restoring command
// (restore, rollback, undo) the same full set through registerRestoring.
type restoreFlags struct {
	sf     storeFlags
	sock   *string
	asJSON *bool
	dry    *bool      // restoring commands only
	paths  stringList // restoring commands only
}

func (rf *restoreFlags) register(fs *flag.FlagSet) {
	rf.sf.register(fs)
	rf.sock = fs.String("socket", "", "daemon socket (default: $CAIRN_SOCKET or the per-user default)")
	rf.asJSON = fs.Bool("json", false, "print the result as JSON")
}

// restoringUsage is the flags registerRestoring adds, for usage lines.
const restoringUsage = "[--dry-run] [--path P]... [--json] [--socket S]"

// registerRestoring adds the flags every restoring command shares.
func (rf *restoreFlags) registerRestoring(fs *flag.FlagSet) {
	rf.register(fs)
	rf.dry = fs.Bool("dry-run", false, "print the plan; change nothing")
	fs.Var(&rf.paths, "path", "restore only this file or folder (repeatable)")
}

// direct runs fn on the workspace's store, without a daemon.
func (rf *restoreFlags) direct(ctx context.Context, dir string, fn func(st *snapshot.Store) (api.RestoreResult, error)) (api.RestoreResult, error) {
	st, err := rf.sf.open(ctx, dir, nil)
	if err != nil {
		return api.RestoreResult{}, err
	}
	defer st.Close()
	return fn(st)
}

// op is the restore the restoring flags ask for, to target t.
func (rf *restoreFlags) op(e *env, t restore.Target) agent.RestoreOp {
	return agent.RestoreOp{Target: t, Paths: rf.paths, DryRun: *rf.dry, Continue: true, Progress: progressTo(e)}
}

func runRestore(ctx context.Context, e *env, args []string) error {
	fs := newFlags("restore", "restore <dir> <target> "+restoringUsage, e)
	var rf restoreFlags
	rf.registerRestoring(fs)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		fs.Usage()
		return usageErr("restore takes a workspace directory and a target (c7, a SHA prefix, codon:ID[:type], last-success, @TIME)")
	}
	t, err := restore.ParseTarget(pos[1])
	if err != nil {
		return usageErr("%v", err)
	}
	c, abs, err := daemonFor(ctx, *rf.sock, rf.sf.stateDir, pos[0])
	if err != nil {
		return err
	}
	var res api.RestoreResult
	if c != nil {
		res, err = c.Restore(ctx, api.RestoreRequest{Workspace: abs, Target: pos[1], Paths: rf.paths, DryRun: *rf.dry})
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

func printRestore(e *env, dir string, res api.RestoreResult, asJSON bool) error {
	if asJSON {
		b, _ := json.MarshalIndent(res, "", "  ")
		fmt.Fprintln(e.stdout, string(b))
	} else {
		p := restore.Plan{Target: restore.Checkpoint{ID: res.Target.ID, SHA: res.Target.SHA, Kind: res.Target.Kind,
			Label: res.Target.Label, CodonID: res.Target.CodonID, CodonName: res.Target.CodonName, RunID: res.Target.RunID},
			Kept: res.Kept}
		for _, f := range res.Write {
			p.Write = append(p.Write, restore.PlanFile{Path: f.Path, Size: f.Size, Action: f.Action})
		}
		for _, f := range res.Delete {
			p.Delete = append(p.Delete, restore.PlanFile{Path: f.Path, Size: f.Size, Action: f.Action})
		}
		if res.DryRun {
			_ = restore.FormatPlan(e.stdout, p)
			fmt.Fprintln(e.stdout, "dry run: nothing changed")
		} else {
			fmt.Fprintln(e.stdout, restore.Summary(p))
			if res.PreRestore != nil {
				fmt.Fprintf(e.stdout, "the work tree before is checkpoint %s (%s); undo with: cairn undo %s\n",
					res.PreRestore.ID, short(res.PreRestore.SHA), dir)
			}
			if res.Continued != nil {
				fmt.Fprintf(e.stdout, "state.json: run %s continues from %s\n", res.Continued.ToRun, short(res.Continued.CheckpointSHA))
			} else if res.StateNote != "" {
				fmt.Fprintln(e.stdout, res.StateNote)
			}
		}
	}
	if len(res.Diff) > 0 {
		for _, d := range res.Diff {
			fmt.Fprintf(e.stderr, "  differs: %q: %s\n", d.Path, d.Reason)
		}
		return &exitError{ExitIncomplete, fmt.Errorf("the work tree differs from the target in %d paths", len(res.Diff))}
	}
	return nil
}
