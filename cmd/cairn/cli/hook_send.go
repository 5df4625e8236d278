package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/platform/printable"
	"github.com/cairn-dev/cairn/restore/ckpt"
	"github.com/cairn-dev/cairn/snapshot"
)

// hookGuard runs one agent hook so that it never harms the agent: whatever
// happens it returns (the command exits 0), writes on stdout only the
// agent's "no opinion" (nothing; Gemini CLI's {}), at most one line on
// stderr, and gives up after the wait bound (plus a moment to say so).
func hookGuard(ctx context.Context, e *env, args []string, agent agentKind) {
	name, usage, noOpinion := "codex", "hook codex '<json>' [--wait D] [--direct]", ""
	if a, ok := stdinAgentOf(agent); ok {
		name, usage, noOpinion = a.name, "hook "+a.name+" [--wait D] [--direct] < event.json", a.noOpinion
	}
	fs := newFlags("hook "+name, usage, e)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {} // one line at most: the error says what is wrong
	var df daemonFlags
	df.register(fs)
	waitFlag := fs.String("wait", "", "wait for the checkpoint at most this long (default 2s, or $CAIRN_HOOK_WAIT)")
	direct := fs.Bool("direct", false, "with no daemon, seal the store directly (or CAIRN_HOOK_DIRECT=1)")
	pos, err := parse(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return // a person asked: the help is on stdout
	}
	if noOpinion != "" {
		defer fmt.Fprint(e.stdout, noOpinion)
	}
	wait := hookWait(*waitFlag)
	say := func(msg string) {
		if msg != "" {
			fmt.Fprintln(e.stderr, "cairn hook: "+printable.String(strings.ReplaceAll(msg, "\n", " ")))
		}
	}
	if err != nil {
		say(err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	done := make(chan string, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Sprint("internal error: ", r)
			}
		}()
		done <- hookOnce(ctx, agent, pos, &df, hookDirect(*direct))
	}()
	select {
	case msg := <-done:
		say(msg)
	case <-time.After(wait + 250*time.Millisecond):
		say(fmt.Sprintf("gave up after %s", wait))
	}
}

// hookOnce reads the agent's input, advances the turn count and asks for
// the checkpoint; it returns what went wrong, "" when nothing did (or
// nothing was to be done).
func hookOnce(ctx context.Context, agent agentKind, pos []string, df *daemonFlags, direct bool) string {
	var raw []byte
	a, fromStdin := stdinAgentOf(agent)
	if fromStdin {
		if len(pos) != 0 {
			return a.name + " takes its input on stdin, no arguments"
		}
		b, err := io.ReadAll(io.LimitReader(os.Stdin, 64<<20))
		if err != nil {
			return "reading stdin: " + err.Error()
		}
		raw = b
	} else {
		if len(pos) != 1 {
			return "codex takes its notification JSON as the one argument"
		}
		raw = []byte(pos[0])
	}
	dir, err := hookStateDir()
	tc := fileTurns{dir: dir}
	if err != nil {
		tc.dir = ""
	}
	var step hookStep
	var problem error
	if fromStdin {
		step, problem = stdinStep(a, raw, tc)
	} else {
		step, problem = codexStep(raw, tc)
	}
	if errors.Is(problem, errIgnored) {
		return ""
	}
	if step.cwd == "" {
		return problem.Error()
	}
	if err := sendStep(ctx, df, step, direct, agent); err != nil {
		problem = errors.Join(problem, err)
	}
	if problem != nil {
		return problem.Error()
	}
	return ""
}

// sendStep asks the daemon watching step.cwd, or the workspace holding it,
// for the checkpoint. No daemon: nothing, or (direct) a seal of the store
// itself. A daemon that watches no workspace holding cwd: nothing.
func sendStep(ctx context.Context, df *daemonFlags, step hookStep, direct bool, agent agentKind) error {
	c := df.client()
	defer c.Close()
	if !c.Running(ctx) {
		if direct {
			return sealDirect(ctx, df, step, agent)
		}
		return nil
	}
	st, err := c.Status(ctx)
	if err != nil {
		return fmt.Errorf("daemon status: %w", err)
	}
	ws := holdingWorkspace(st.Workspaces, step.cwd)
	if ws == "" {
		return nil // not a workspace cairn watches for this user
	}
	req := step.req
	req.Workspace = ws
	if step.label != nil {
		req.Label = step.label(ws)
	}
	_, err = c.Checkpoint(ctx, req)
	if err != nil {
		return fmt.Errorf("checkpoint of %s: %w", ws, err)
	}
	return nil
}

// holdingWorkspace is the deepest watched workspace that is cwd or holds
// it (paths compared with links resolved), "" when none does.
func holdingWorkspace(wss []api.WorkspaceStatus, cwd string) string {
	real := cwd
	if r, err := filepath.EvalSymlinks(cwd); err == nil {
		real = r
	}
	best, bestLen := "", -1
	for _, w := range wss {
		if w.State == "gone" {
			continue
		}
		for _, d := range []string{w.Dir, resolved(w.Dir)} {
			if beneath(real, d) && len(d) > bestLen {
				best, bestLen = w.Dir, len(d)
			}
		}
	}
	return best
}

func resolved(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// beneath reports whether p is dir or lies below it (absolute paths).
func beneath(p, dir string) bool {
	return filepath.IsAbs(dir) && filepath.IsAbs(p) && within(p, dir)
}

// sealDirect seals the store of the project itself, under the store's lock,
// as the direct path of `cairn checkpoint` does: the project is the one the
// agent names ($CLAUDE_PROJECT_DIR, $GEMINI_PROJECT_DIR) when cwd lies in
// it, else cwd.
func sealDirect(ctx context.Context, df *daemonFlags, step hookStep, agent agentKind) error {
	dir := step.cwd
	a, ok := stdinAgentOf(agent)
	if p := os.Getenv(a.projectEnv); ok && filepath.IsAbs(p) && beneath(resolved(step.cwd), resolved(p)) {
		dir = p
	}
	if step.label != nil {
		step.req.Label = step.label(dir)
	}
	sf := storeFlags{daemonFlags: *df, layout: "auto", maxSize: 100 << 20}
	st, err := sf.open(ctx, dir)
	if err != nil {
		return fmt.Errorf("direct seal of %s: %w", dir, err)
	}
	defer st.Close()
	req := snapshot.SealRequest{Kind: ckpt.KindManual, Label: step.req.Label, RunID: step.req.RunID}
	if step.req.Status != "" {
		req.Kind, req.CodonID, req.CodonName = ckpt.Kind(step.req.Status), step.req.CodonID, step.req.CodonName
	}
	if _, err := st.Seal(ctx, req); err != nil {
		return fmt.Errorf("direct seal of %s: %w", dir, err)
	}
	return nil
}
