package cli

import (
	"context"
	"fmt"
	"runtime"

	"github.com/cairn-dev/cairn/agent/config"
	"github.com/cairn-dev/cairn/platform"
)

func init() {
	register("config", "check a config file without starting the daemon: cairn config check [FILE]", runConfig).subs = []string{"check"}
}

// runConfig is `cairn config check [FILE]` (as nginx -t, promtool check
// config): the file parsed and validated as the daemon does, its errors as
// file:line: reason, exit 2 on an error, "ok" and 0 otherwise.
func runConfig(ctx context.Context, e *env, args []string) error {
	fs := newFlags("config", "config check [FILE] [--user]", e)
	user := fs.Bool("user", false, "check the per-user service's config by default (default: root's is the system service's)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 || pos[0] != "check" || len(pos) > 2 {
		fs.Usage()
		return usageErr("config takes check and at most one file")
	}
	mode := platform.CurrentMode()
	if *user {
		mode = platform.ModeUser
	}
	path := platform.PathsFor(runtime.GOOS, mode).Config
	if len(pos) == 2 {
		path = pos[1]
	}
	c, err := config.Load(path)
	if err != nil {
		return &exitError{ExitUsage, bareError{err.Error()}} // file:line: reason
	}
	n := len(c.Watch)
	fmt.Fprintf(e.stdout, "%s: ok (%s)\n", path, plural(n, "watch entry", "watch entries"))
	return nil
}
