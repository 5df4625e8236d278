package cli

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/platform/printable"
)

// Coding agents' hooks (README.md, "Coding agents (Claude Code, Gemini CLI,
// Codex)"): `cairn hook claude-code`, `cairn hook gemini` and `cairn hook
// codex` turn an agent's lifecycle events into labelled checkpoints; `cairn
// hook install|uninstall` edit the agent's own settings.

func init() {
	register("hook", "seal checkpoints from a coding agent's hooks (claude-code, gemini, codex); install, uninstall", runHook).subs =
		[]string{"claude-code", "gemini", "codex", "install", "uninstall"}
}

// defaultHookWait is how long a hook waits for its checkpoint at most.
const defaultHookWait = 2 * time.Second

func runHook(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(e.stderr, hookUsage)
		return usageErr("hook needs a subcommand")
	}
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprint(e.stdout, hookUsage)
		return nil
	case "claude-code":
		hookGuard(ctx, e, args[1:], agentClaude)
		return nil // a hook never fails the agent: see hookGuard
	case "gemini":
		hookGuard(ctx, e, args[1:], agentGemini)
		return nil
	case "codex":
		hookGuard(ctx, e, args[1:], agentCodex)
		return nil
	case "install":
		return runHookInstall(ctx, e, args[1:], false)
	case "uninstall":
		return runHookInstall(ctx, e, args[1:], true)
	}
	if strings.HasPrefix(args[0], "-") {
		return &usageError{fmt.Sprintf("cairn hook: unknown flag %s; see 'cairn help hook'", printable.String(dashes(args[0])))}
	}
	fmt.Fprint(e.stderr, hookUsage)
	return usageErr("hook: unknown subcommand %q", args[0])
}

// hookUsage is `cairn hook`'s help.
const hookUsage = `usage: cairn hook <subcommand>
  claude-code                 Claude Code's hook command: its event JSON on stdin
  gemini                      Gemini CLI's hook command: its event JSON on stdin
  codex '<json>'              Codex's notify program: its JSON as the one argument
  install claude-code|gemini|codex [DIR] [--user]
  uninstall claude-code|gemini|codex [DIR] [--user]
A hook always exits 0 and prints nothing on stdout ({} for Gemini CLI, its
"no opinion"); it waits for its checkpoint at most --wait (default 2s, or
$CAIRN_HOOK_WAIT).
`

// hookWait is the bound: the flag, else $CAIRN_HOOK_WAIT, else 2 s; never
// more than a minute (an agent's own hook timeout is about that).
func hookWait(flagVal string) time.Duration {
	v := flagVal
	if v == "" {
		v = os.Getenv("CAIRN_HOOK_WAIT")
	}
	if v == "" {
		return defaultHookWait
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		if ms, err2 := strconv.Atoi(v); err2 == nil {
			d, err = time.Duration(ms)*time.Millisecond, nil
		}
	}
	if err != nil || d <= 0 {
		return defaultHookWait
	}
	return min(d, time.Minute)
}

// hookDirect reports whether a hook seals the store itself when no daemon
// answers: the flag, or CAIRN_HOOK_DIRECT=1.
func hookDirect(flagVal bool) bool {
	if flagVal {
		return true
	}
	v := os.Getenv("CAIRN_HOOK_DIRECT")
	return v == "1" || v == "true" || v == "yes"
}
