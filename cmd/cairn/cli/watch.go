package cli

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/cairn-dev/cairn/platform/printable"
)

func init() {
	register("watch", "ask the running daemon to watch a workspace", func(ctx context.Context, e *env, args []string) error {
		return runWatch(ctx, e, args, false)
	})
	register("unwatch", "ask the running daemon to stop watching a workspace", func(ctx context.Context, e *env, args []string) error {
		return runWatch(ctx, e, args, true)
	})
}

func runWatch(ctx context.Context, e *env, args []string, unwatch bool) error {
	name := map[bool]string{false: "watch", true: "unwatch"}[unwatch]
	fs := newFlags(name, name+" <dir> [--socket PATH] [--json]", e)
	var df daemonFlags
	df.register(fs)
	asJSON := fs.Bool("json", false, "print the result as JSON")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		fs.Usage()
		return usageErr("%s takes one workspace directory", name)
	}
	abs, err := realAbs(pos[0])
	if err != nil {
		return err
	}
	c := df.client()
	if !c.Running(ctx) {
		return fmt.Errorf("no daemon answers on %s; start one with: cairn daemon --watch %s", c.Socket, abs)
	}
	if err := c.Watch(ctx, abs, unwatch); err != nil {
		return refusal(err)
	}
	if *asJSON {
		// JSON's own quoting: Go's %q writes \x1b, which JSON has not.
		b, _ := json.Marshal(abs)
		fmt.Fprintf(e.stdout, "{\"workspace\": %s, \"watching\": %v}\n", printable.JSON(b), !unwatch)
	} else if unwatch {
		fmt.Fprintf(e.stdout, "no longer watching %s\n", printable.String(abs))
	} else {
		fmt.Fprintf(e.stdout, "watching %s\n", printable.String(abs))
	}
	return nil
}
