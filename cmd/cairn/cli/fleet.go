package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cairn-dev/cairn/agent/replicate"
	"github.com/cairn-dev/cairn/platform/printable"
	"github.com/cairn-dev/cairn/snapshot"
)

func init() {
	register("fleet", "read a replication remote: list its hosts and workspaces, fetch one into a local store", runFleet).subs = []string{"list", "fetch"}
}

const fleetUsage = "usage: cairn fleet list --remote R [--json]\n       cairn fleet fetch --remote R --from <host>/<workspace> <dir> [--json]\n"

func runFleet(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(e.stderr, fleetUsage)
		return usageErr("fleet needs a subcommand: list or fetch")
	}
	switch args[0] {
	case "list":
		return runFleetList(ctx, e, args[1:])
	case "fetch":
		return runFleetFetch(ctx, e, args[1:])
	case "-h", "--help", "help":
		fmt.Fprint(e.stdout, fleetUsage)
		return nil
	}
	fmt.Fprint(e.stderr, fleetUsage)
	return usageErr("unknown fleet subcommand %q (want list or fetch)", args[0])
}

// remoteFlag is --remote, made usable: a local path absolute.
func remoteFlag(raw string) (string, error) {
	if raw == "" {
		return "", usageErr("--remote is required: the replication remote (a URL or path git accepts)")
	}
	return replicate.NormalizeRemote(raw)
}

func runFleetList(ctx context.Context, e *env, args []string) error {
	fs := newFlags("fleet list", "fleet list --remote R [--host H] [--json]", e)
	rawRemote := fs.String("remote", "", "the replication remote: any URL or path git accepts")
	host := fs.String("host", "", "list only this host's workspaces")
	asJSON := fs.Bool("json", false, "print the workspaces and their manifests as JSON")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		fs.Usage()
		return usageErr("fleet list takes no arguments")
	}
	remote, err := remoteFlag(*rawRemote)
	if err != nil {
		return err
	}
	list, err := replicate.ListFleet(ctx, remote, *host, replicate.ReadAsUser())
	if err != nil {
		return err
	}
	if *asJSON {
		b, _ := json.MarshalIndent(struct {
			Remote     string                     `json:"remote"`
			Workspaces []replicate.FleetWorkspace `json:"workspaces"`
		}{replicate.Redact(remote), list}, "", "  ")
		fmt.Fprintln(e.stdout, string(printable.JSON(b)))
		return nil
	}
	printFleet(e.stdout, replicate.Redact(remote), list, time.Now())
	return nil
}

// printFleet is the table of fleet list.
func printFleet(w io.Writer, remote string, list []replicate.FleetWorkspace, now time.Time) {
	if len(list) == 0 {
		fmt.Fprintf(w, "no replicated workspaces on %s\n", printable.String(remote))
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "HOST\tWORKSPACE\tKEY\tLAYOUT\tCHECKPOINTS\tNEWEST\tPUSHED\tNOTE")
	for _, ws := range list {
		path, layout, count, newest, pushed := "—", "—", "—", "—", "—"
		if m := ws.Manifest; m != nil {
			path, layout, count = orDash(m.Workspace), orDash(m.Layout), fmt.Sprint(m.Checkpoints)
			if n := m.Newest; n != nil {
				newest = n.ID + " " + n.Kind
				if !n.Time.IsZero() {
					newest += " " + age(now.Sub(n.Time))
				}
			}
			if !m.Pushed.IsZero() {
				pushed = age(now.Sub(m.Pushed))
			}
		}
		note := ws.Note
		if ws.Manifest == nil {
			note = fmt.Sprintf("%s; %s", note, plural(ws.Refs, "ref", ""))
		}
		p := printable.String // each cell: a tab or a control in one would break the table
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p(ws.Host), p(path), p(ws.Key), p(layout), p(count), p(newest), p(pushed), p(oneLineNote(note)))
	}
	tw.Flush()
}

// oneLineNote keeps a note (git's message, maybe) from breaking the table.
func oneLineNote(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// fleetFetchResult is fleet fetch --json.
type fleetFetchResult struct {
	Workspace   string `json:"workspace"` // the local folder
	From        string `json:"from"`      // host/key
	Source      string `json:"source,omitempty"`
	Remote      string `json:"remote"`
	Checkpoints int    `json:"checkpoints"`
	Position    string `json:"position,omitempty"`
	Store       string `json:"store"`
}

func runFleetFetch(ctx context.Context, e *env, args []string) error {
	fs := newFlags("fleet fetch", "fleet fetch --remote R --from <host>/<workspace> <dir> [--json]", e)
	var df daemonFlags
	df.register(fs)
	rawRemote := fs.String("remote", "", "the replication remote: any URL or path git accepts")
	from := fs.String("from", "", "the workspace: <host>/<key>, <host>/<original path> or <host>/<folder name>")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		fs.Usage()
		return usageErr("fleet fetch takes one directory: where the workspace's checkpoints go")
	}
	host, name, _ := strings.Cut(*from, "/")
	if host == "" || name == "" {
		return usageErr("--from wants <host>/<workspace key or path> (see cairn fleet list)")
	}
	remote, err := remoteFlag(*rawRemote)
	if err != nil {
		return err
	}
	as := replicate.ReadAsUser()

	// The remote first: a wrong one, or a wrong name, creates nothing.
	list, err := replicate.ListFleet(ctx, remote, host, as)
	if err != nil {
		return err
	}
	ws, err := replicate.FindWorkspace(list, *from)
	if err != nil {
		return fmt.Errorf("%s: %w", replicate.Redact(remote), err)
	}
	if ws.Refs <= 1 && ws.Manifest != nil {
		return fmt.Errorf("%s on %s holds no checkpoints, only its manifest", ws.Name(), replicate.Redact(remote))
	}

	dir := pos[0]
	if err := notWatchedByDaemon(ctx, &df, dir); err != nil {
		return err
	}
	if err := notAsRootFor(dir); err != nil {
		return err
	}
	created := false
	if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
		mkdir := os.MkdirAll
		if os.Geteuid() == 0 {
			// Root creates only the last folder, in a parent that is root's
			// own and reached through no link (notAsRootFor), never a path
			// through a user's folders.
			if err := notAsRootFor(filepath.Dir(dir)); err != nil {
				return err
			}
			mkdir = os.Mkdir
		}
		if err := mkdir(dir, 0o755); err != nil {
			return err
		}
		created = true
	}
	stop := newProgress(e, *asJSON).ticking(ctx, "fetching "+ws.Name()+" from "+remote)
	n, st, err := fetchInto(ctx, &df, dir, remote, ws, as)
	stop()
	if err != nil {
		if created {
			_ = os.Remove(dir) // only while still empty
		}
		return err
	}
	defer st.Close()
	if n == 0 {
		return fmt.Errorf("%s on %s holds no checkpoints: nothing was fetched into %s", ws.Name(), replicate.Redact(remote), st.Dir())
	}

	res := fleetFetchResult{Workspace: st.Dir(), From: ws.Name(), Remote: replicate.Redact(remote),
		Checkpoints: n, Store: st.GitDir()}
	if ws.Manifest != nil {
		res.Source = ws.Manifest.Workspace
		if p := st.Position(); p != "" && p == ws.Manifest.Position {
			res.Position = p
		}
	}
	if *asJSON {
		b, _ := json.MarshalIndent(res, "", "  ")
		fmt.Fprintln(e.stdout, string(printable.JSON(b)))
		return nil
	}
	src := ""
	if res.Source != "" {
		src = " (" + res.Source + ")"
	}
	p := printable.String
	fmt.Fprintf(e.stdout, "fetched %s of %s%s from %s into %s\n", plural(n, "checkpoint", ""), p(res.From), p(src), p(res.Remote), p(res.Workspace))
	fmt.Fprintf(e.stdout, "the files are not written: see them with `cairn list %[1]s`, bring one back with `cairn restore %[1]s <id>`, then `cairn watch %[1]s` to go on checkpointing\n", p(res.Workspace))
	return nil
}

// fetchInto opens (creating) the plain store of dir and fills it from the
// remote; a store with checkpoints is refused, not merged.
func fetchInto(ctx context.Context, df *daemonFlags, dir, remote string, ws replicate.FleetWorkspace, as replicate.ReadAs) (int, *snapshot.Store, error) {
	st, err := snapshot.Open(ctx, dir, snapshot.Options{Layout: snapshot.LayoutPlain, StateDir: df.stateDir})
	if err != nil {
		return 0, nil, err
	}
	n, err := replicate.FetchWorkspace(ctx, st, remote, ws, as)
	if errors.Is(err, snapshot.ErrNotEmpty) {
		err = &exitError{ExitRefused, fmt.Errorf("%s already has checkpoints (%w); fleet fetch fills only an empty store, "+
			"since the fetched ids would collide with its own: fetch into another folder", st.Dir(), err)}
	}
	if err != nil {
		st.Close()
		return 0, nil, err
	}
	return n, st, nil
}

// notWatchedByDaemon refuses a folder a running daemon watches: its
// workspace would go on sealing into the store while the fetch fills it.
func notWatchedByDaemon(ctx context.Context, df *daemonFlags, dir string) error {
	real, err := realAbs(dir)
	if err != nil {
		return err
	}
	if _, err := os.Stat(real); err != nil {
		return nil // a folder that does not exist is watched by no one
	}
	c := df.client()
	if !c.Running(ctx) {
		return nil
	}
	if _, err := c.List(ctx, real); err == nil {
		return &exitError{ExitRefused, fmt.Errorf("the daemon on %s watches %s: run `cairn unwatch %s`, fetch, then `cairn watch %s`",
			c.Socket, real, real, real)}
	} else if !notWatched(err) {
		return fmt.Errorf("ask the daemon on %s about %s: %w", c.Socket, real, err)
	}
	return nil
}
