package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/cairn-dev/cairn/agent/client"
	"github.com/cairn-dev/cairn/platform"
)

func init() {
	register("status", "show the daemon and every workspace it watches", runStatus)
}

// socketPath is --socket, else CAIRN_SOCKET, else the default for this user.
func socketPath(flagVal, stateDir string) string {
	if flagVal != "" {
		return flagVal
	}
	if stateDir == "" {
		stateDir = platform.DefaultStateDir()
	}
	return platform.DefaultSocket(stateDir)
}

func runStatus(ctx context.Context, e *env, args []string) error {
	fs := newFlags("status", "status [--socket PATH] [--json]", e)
	sock := fs.String("socket", "", "daemon socket (default: $CAIRN_SOCKET or the per-user default)")
	stateDir := fs.String("state-dir", "", "state directory, to find the default socket")
	asJSON := fs.Bool("json", false, "print the status as JSON")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	c := client.New(socketPath(*sock, *stateDir))
	if !c.Running(ctx) {
		return fmt.Errorf("no daemon answers on %s; start one with: cairn daemon --watch DIR", c.Socket)
	}
	st, err := c.Status(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		b, _ := json.MarshalIndent(st, "", "  ")
		fmt.Fprintln(e.stdout, string(b))
		return nil
	}
	fmt.Fprintf(e.stdout, "daemon pid %d, version %s, up %s\nstate dir %s\nsocket    %s\n", st.PID, st.Version,
		time.Since(st.Started).Round(time.Second), st.StateDir, st.Socket)
	if st.Config != "" {
		fmt.Fprintf(e.stdout, "config    %s\n", st.Config)
	}
	if st.ConfigErr != "" {
		fmt.Fprintf(e.stdout, "config reload refused (old config runs): %s\n", st.ConfigErr)
	}
	if len(st.Workspaces) == 0 {
		fmt.Fprintln(e.stdout, "no workspaces watched")
	}
	bad := false
	for _, w := range st.Workspaces {
		fmt.Fprintf(e.stdout, "\n%s  [%s, %s]\n  watches %d, pending %d, sealed %d, failures %d\n", w.Dir, w.State, w.Layout, w.Watches, w.Pending, w.Seals, w.Failures)
		if w.Last != "" {
			fmt.Fprintf(e.stdout, "  last checkpoint %s (%s) %s\n", w.Last, w.LastState, age(time.Since(w.LastTime)))
		}
		if w.Error != "" {
			bad = true
			fmt.Fprintf(e.stdout, "  error: %s\n", w.Error)
		}
	}
	if bad {
		fmt.Fprintln(e.stderr, "some workspaces report errors")
	}
	return nil
}
