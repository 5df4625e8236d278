package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/mattn/go-isatty"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/autodev"
	"github.com/cairn-dev/cairn/agent/client"
	"github.com/cairn-dev/cairn/platform"
	"github.com/cairn-dev/cairn/platform/printable"
	"github.com/cairn-dev/cairn/restore"
	"github.com/cairn-dev/cairn/restore/ckpt"
	"github.com/cairn-dev/cairn/snapshot"
)

func init() {
	register("restore", "restore a workspace (or some paths) to a checkpoint", runRestore)
}

// codeUnknownCheckpoint is the daemon's code for a target no checkpoint matches.
const codeUnknownCheckpoint = "UNKNOWN_CHECKPOINT"

// refusal turns a daemon's or the engine's refusal into ExitRefused: an
// unknown checkpoint is refused too, however it is reached.
func refusal(err error) error {
	if err == nil {
		return nil
	}
	var ce *client.Error
	if errors.As(err, &ce) && autodevWords(ce.Message) {
		code := ExitFailure
		if ce.Status == http.StatusConflict || ce.Code == codeUnknownCheckpoint {
			code = ExitRefused
		}
		return &exitError{code, bareError{ce.Message}}
	}
	var ae *autodev.RestoreError
	if errors.As(err, &ae) {
		code := ExitFailure
		if ae.Live || ae.Unknown || errors.Is(err, autodev.ErrNotRepo) {
			code = ExitRefused
		}
		return &exitError{code, bareError{ae.Error()}}
	}
	if errors.As(err, &ce) {
		if ce.Status == http.StatusConflict || ce.Code == codeUnknownCheckpoint {
			return &exitError{ExitRefused, errors.New(ce.Message)}
		}
		if ce.Status == http.StatusBadRequest || ce.Status == http.StatusNotFound {
			return errors.New(ce.Message)
		}
		return err
	}
	var amb *restore.AmbiguousError
	var un *restore.UnusableError
	var dmg *ckpt.TargetDamagedError
	if errors.Is(err, restore.ErrCodonRunning) || restore.IsNotFound(err) || errors.As(err, &amb) || errors.As(err, &un) || errors.As(err, &dmg) ||
		errors.Is(err, snapshot.ErrCannotHoldInTheWay) {
		return &exitError{ExitRefused, err}
	}
	return err
}

// progressTo prints steps on a terminal.
func progressTo(e *env) func(step, total int, msg string) {
	if f, ok := e.stderr.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
		return func(step, total int, msg string) {
			fmt.Fprintf(e.stderr, "[%d/%d] %s\n", step, total, printable.String(msg))
		}
	}
	return nil
}

// restoreFlags are the flags every restoring command (restore, rollback,
// undo) shares.
type restoreFlags struct {
	sf     storeFlags
	asJSON *bool
	dry    *bool
	files  *bool
	paths  stringList
}

// restoringUsage is the flags restoreFlags adds, for usage lines.
const restoringUsage = "[--dry-run] [--files] [--path P]... [--json] [--socket S]"

func (rf *restoreFlags) register(fs *flag.FlagSet) {
	rf.sf.register(fs, writing)
	rf.asJSON = fs.Bool("json", false, "print the result as JSON")
	rf.dry = fs.Bool("dry-run", false, "print the plan; change nothing")
	rf.files = fs.Bool("files", false, "list every file of a plan (over 200 files, it is counted by folder)")
	fs.Var(&rf.paths, "path", "restore only this file or folder (repeatable)")
}

// opts are the restore the flags ask for.
func (rf *restoreFlags) opts(e *env) restoreOpts {
	return restoreOpts{paths: rf.paths, dry: *rf.dry, progress: progressTo(e)}
}

func runRestore(ctx context.Context, e *env, args []string) error {
	fs := newFlags("restore", "restore <dir> <target> "+restoringUsage, e)
	var rf restoreFlags
	rf.register(fs)
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
	res, err := via(ctx, &rf.sf, pos[0], true, func(b backend) (api.RestoreResult, error) {
		return pathsChecked(pos[0], pos[1], rf.opts(e), func(o restoreOpts) (api.RestoreResult, error) {
			return b.restore(ctx, pos[1], t, o)
		})
	})
	if err != nil {
		return refusal(err)
	}
	return printRestore(e, pos[0], res, &rf)
}

func printRestore(e *env, dir string, res api.RestoreResult, rf *restoreFlags) error {
	if *rf.asJSON {
		b, _ := json.MarshalIndent(res, "", "  ")
		fmt.Fprintln(e.stdout, string(printable.JSON(b)))
	} else if res.Layout == layoutAutodev {
		fmt.Fprintln(e.stdout, printable.String(res.Message))
	} else {
		p := ckpt.Plan{Target: res.Target, Write: res.Write, Delete: res.Delete, Kept: res.Kept}
		if res.DryRun {
			format := restore.FormatPlanBrief
			if *rf.files {
				format = restore.FormatPlan
			}
			_ = format(e.stdout, p) // escapes its paths
			fmt.Fprintln(e.stdout, "dry run: nothing changed")
		} else {
			pr := printable.String
			fmt.Fprintln(e.stdout, pr(restore.Summary(p)))
			if res.PreRestore != nil {
				fmt.Fprintf(e.stdout, "the work tree before is checkpoint %s (%s); undo with: cairn undo %s\n",
					pr(res.PreRestore.ID), pr(short(res.PreRestore.SHA)), pr(dir))
			}
			if res.Continued != nil {
				fmt.Fprintf(e.stdout, "state.json: run %s continues from %s\n", pr(res.Continued.ToRun), pr(short(res.Continued.CheckpointSHA)))
			} else if res.StateNote != "" {
				fmt.Fprintln(e.stdout, pr(res.StateNote))
			}
		}
	}
	for _, l := range res.LeftOut {
		fmt.Fprintf(e.stderr, "  left alone: %q: %s\n", l.Path, l.Reason)
	}
	if len(res.Diff) > 0 {
		for _, d := range res.Diff {
			fmt.Fprintf(e.stderr, "  differs: %q: %s\n", d.Path, printable.String(d.Reason))
		}
		return &exitError{ExitIncomplete, fmt.Errorf("the work tree differs from the target in %s", plural(len(res.Diff), "path", ""))}
	}
	return nil
}

// pathsChecked runs a restore limited to --path P... (run), after refusing a
// path that matches nothing: not on disk, and nothing in the target's plan
// under it (a dry run, made only when a path is missing on disk). Without
// it, a typo would say "nothing to change" and exit 0.
func pathsChecked(dir, target string, o restoreOpts, run func(restoreOpts) (api.RestoreResult, error)) (api.RestoreResult, error) {
	missing := missingOnDisk(dir, o.paths)
	if len(missing) == 0 {
		return run(o)
	}
	dry := o
	dry.dry, dry.progress = true, nil
	res, err := run(dry)
	if err != nil || res.Layout == layoutAutodev {
		return res, err
	}
	for _, m := range missing {
		if !planTouches(res, m) {
			if target == "" {
				target = "the target"
			}
			return res, &exitError{ExitRefused, fmt.Errorf("--path %s matches nothing: no such file or folder in %s or in the work tree", m, target)}
		}
	}
	if o.dry {
		return res, nil
	}
	return run(o)
}

// missingOnDisk are the paths (relative to the workspace, slash-separated)
// with nothing at them in the workspace at dir. They are looked up beneath
// the workspace without following a link; as root, only in a workspace
// root owns (root never reads a user's tree: README, "Security").
func missingOnDisk(dir string, paths []string) []string {
	if len(paths) == 0 {
		return nil
	}
	real, err := realAbs(dir)
	if err != nil {
		return nil
	}
	t, err := platform.OpenTree(real)
	if err != nil {
		return nil
	}
	defer t.Close()
	if os.Geteuid() == 0 && !rootOwns(real) {
		return nil
	}
	var missing []string
	for _, p := range paths {
		rel := p
		if filepath.IsAbs(rel) {
			if rel, err = filepath.Rel(real, rel); err != nil {
				continue
			}
		}
		rel = filepath.ToSlash(filepath.Clean(rel))
		if rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
			continue // the engine refuses or restores the whole tree
		}
		if _, err := t.Lstat(rel); errors.Is(err, fs.ErrNotExist) {
			missing = append(missing, rel)
		}
	}
	return missing
}

// planTouches reports whether the plan writes, deletes or leaves out a file
// at rel or under it.
func planTouches(res api.RestoreResult, rel string) bool {
	under := func(p string) bool { return p == rel || strings.HasPrefix(p, rel+"/") }
	for _, l := range [][]api.PlanFile{res.Write, res.Delete} {
		for _, f := range l {
			if under(f.Path) {
				return true
			}
		}
	}
	for _, l := range res.LeftOut {
		if under(l.Path) {
			return true
		}
	}
	return false
}

// rootOwns reports whether root owns the folder at path (not followed).
func rootOwns(path string) bool {
	d, err := platform.OpenDirNoFollow(path)
	if err != nil {
		return false
	}
	defer d.Close()
	uid, _, _, _, err := platform.DirInfo(d)
	return err == nil && uid == 0
}
