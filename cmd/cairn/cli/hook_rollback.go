package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// turnCheckpoint finds the checkpoint before turn n of a coding agent's
// session (README.md, "Coding agents (Claude Code, Gemini CLI, Codex)"): the
// newest usable rig-setup checkpoint of codon turn-n in the session's run
// (Claude Code's UserPromptSubmit, Gemini CLI's BeforeAgent), else, for an
// agent that marks only a turn's end (Codex), the end of turn n-1. session names the run by its session or
// thread id, or the run id itself; empty means the newest session's run.
func turnCheckpoint(ctx context.Context, sf *storeFlags, dir string, n int, session string) (ckpt.Record, error) {
	if n < 1 {
		return ckpt.Record{}, usageErr("--turn counts from 1")
	}
	l, err := via(ctx, sf, dir, true, func(b backend) (ledger, error) { return b.list(ctx) })
	if err != nil {
		return ckpt.Record{}, err
	}
	run := sessionRun(l.recs, session) // recs are newest first
	if run == "" {
		if session != "" {
			return ckpt.Record{}, &exitError{ExitRefused, fmt.Errorf("no coding agent session %q in this workspace's checkpoints", session)}
		}
		return ckpt.Record{}, &exitError{ExitRefused, fmt.Errorf("no coding agent session in this workspace's checkpoints")}
	}
	find := func(codon string, kind ckpt.Kind) (ckpt.Record, bool) {
		for _, r := range l.recs {
			if r.RunID == run && r.CodonID == codon && r.Kind == kind && r.Usable() {
				return r, true
			}
		}
		return ckpt.Record{}, false
	}
	if r, ok := find(turnCodon(n), ckpt.KindRigSetup); ok {
		return r, nil
	}
	if n > 1 {
		if r, ok := find(turnCodon(n-1), ckpt.KindCompleted); ok {
			return r, nil
		}
	}
	return ckpt.Record{}, &exitError{ExitRefused, fmt.Errorf("no checkpoint before turn %d of run %s", n, run)}
}

// sessionRun is the run a session names: a run id of a hook (cc-…,
// gemini-…, codex…) equal to session, or to a hook prefix and session; with
// session empty, the newest such run.
func sessionRun(recs []ckpt.Record, session string) string {
	for _, r := range recs {
		if !isHookRun(r.RunID) {
			continue
		}
		if session == "" {
			return r.RunID
		}
		s := safeID(session)
		if r.RunID == session || r.RunID == claudeRunPrefix+s || r.RunID == geminiRunPrefix+s || r.RunID == codexRunPrefix+"-"+s {
			return r.RunID
		}
	}
	return ""
}

func isHookRun(run string) bool {
	return strings.HasPrefix(run, claudeRunPrefix) || strings.HasPrefix(run, geminiRunPrefix) ||
		run == codexRunPrefix || strings.HasPrefix(run, codexRunPrefix+"-")
}
