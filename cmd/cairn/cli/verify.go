package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/checkpoints"
	"github.com/cairn-dev/cairn/platform/printable"
)

func init() {
	register("verify", "compare a checkpoint with what git would record now, and check its objects", runVerify)
}

func runVerify(ctx context.Context, e *env, args []string) error {
	fs := newFlags("verify", "verify <dir> [<id>] [--json]   (no id: the newest checkpoint with a commit)", e)
	var sf storeFlags
	sf.register(fs, reading)
	asJSON := fs.Bool("json", false, "print the result as JSON")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 && len(pos) != 2 {
		fs.Usage()
		return usageErr("verify takes a workspace directory and, optionally, a checkpoint")
	}
	id := ""
	if len(pos) == 2 {
		id = pos[1]
	}
	v, err := via(ctx, &sf, pos[0], true, func(b backend) (api.Verification, error) { return b.verify(ctx, id) })
	if err != nil {
		return refusal(err)
	}
	if *asJSON {
		out, _ := json.MarshalIndent(v, "", "  ")
		fmt.Fprintln(e.stdout, string(printable.JSON(out)))
	} else {
		printVerification(e, v)
	}
	if v.Clean() {
		return nil
	}
	var why []string
	if n := len(v.Differences); n > 0 {
		why = append(why, fmt.Sprintf("differs from the work tree in %s", plural(n, "path", "")))
	}
	if n := len(v.Missing); n > 0 {
		why = append(why, fmt.Sprintf("names %s the store lacks", plural(n, "object", "")))
	}
	if n := len(v.Unreadable); n > 0 {
		why = append(why, fmt.Sprintf("%s could not be read", plural(n, "path", "")))
	}
	return &exitError{ExitIncomplete, fmt.Errorf("checkpoint %s %s", verifyName(v), strings.Join(why, "; "))}
}

func verifyName(v api.Verification) string {
	if v.ID != "" {
		return v.ID
	}
	return short12(v.SHA)
}

func short12(sha string) string { return sha[:min(len(sha), 12)] }

// side is one side of a difference: mode and short blob, or absent.
func side(mode, blob string) string {
	if mode == "" {
		return "absent"
	}
	return mode + " " + short12(blob)
}

func printVerification(e *env, v api.Verification) {
	p := printable.String // paths are %q-quoted, which escapes them too
	fmt.Fprintf(e.stdout, "%s %s: %s, selection %s\n", p(verifyName(v)), p(v.SHA), plural(v.Files, "file", ""), p(strings.Join(v.Patterns, " ")))
	for _, d := range v.Differences {
		fmt.Fprintf(e.stdout, "  %s %q: checkpoint %s, disk %s\n", p(d.Status), d.Path,
			p(side(d.CheckpointMode, d.CheckpointBlob)), p(side(d.DiskMode, d.DiskBlob)))
	}
	for _, m := range v.Missing {
		where := ""
		if m.Path != "" {
			where = fmt.Sprintf(" (%q)", m.Path)
		}
		fmt.Fprintf(e.stdout, "  missing %s %s%s\n", p(m.Type), p(m.SHA), where)
	}
	for _, u := range v.Unreadable {
		fmt.Fprintf(e.stdout, "  unreadable %q: %s\n", u.Path, p(u.Reason))
	}
	for _, s := range v.Skipped {
		fmt.Fprintf(e.stdout, "  skipped %q: %s\n", s.Path, p(s.Reason))
	}
	if v.Clean() {
		fmt.Fprintln(e.stdout, "ok: the checkpoint holds what git would record now, and every object it names is in the store")
	}
}

func (b daemonBackend) verify(ctx context.Context, id string) (api.Verification, error) {
	return b.c.Verify(ctx, b.real, id)
}

// verify without a daemon reads the store with its default patterns (**);
// a Hankweave workspace's plan (state.json) selects as the daemon's does,
// but the daemon's configured patterns and excludes are not known here.
func (b localBackend) verify(ctx context.Context, id string) (api.Verification, error) {
	st, err := b.f.openExisting(ctx, b.real)
	if err != nil {
		return api.Verification{}, err
	}
	defer st.Close()
	return checkpoints.Verify(ctx, st, id, nil)
}

func (b autodevBackend) verify(context.Context, string) (api.Verification, error) {
	return api.Verification{}, errNotAutodev
}
