package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/restore/ckpt"
)

// agentKind is the agent whose hook is running.
type agentKind int

const (
	agentClaude agentKind = iota
	agentCodex
	agentGemini
)

// Run id prefixes: a Claude Code session is run cc-<session id>, a Gemini
// CLI session gemini-<session id>, a Codex thread codex-<thread id> (codex
// when its notification names none).
const (
	claudeRunPrefix = "cc-"
	geminiRunPrefix = "gemini-"
	codexRunPrefix  = "codex"
)

// maxLabel is how many characters of a prompt or command a label keeps.
const maxLabel = 72

// stdinInput is the hook input of Claude Code and Gemini CLI: one JSON
// object on stdin, with the same field names (the fields cairn reads;
// testdata/hooks/README.md says where each is documented).
type stdinInput struct {
	SessionID      string          `json:"session_id"`
	TranscriptPath string          `json:"transcript_path"`
	Cwd            string          `json:"cwd"`
	Event          string          `json:"hook_event_name"`
	Timestamp      string          `json:"timestamp"`   // Gemini CLI
	Prompt         string          `json:"prompt"`      // UserPromptSubmit, BeforeAgent
	ToolName       string          `json:"tool_name"`   // PreToolUse, BeforeTool
	ToolInput      json.RawMessage `json:"tool_input"`  // PreToolUse, BeforeTool
	ToolUseID      string          `json:"tool_use_id"` // PreToolUse
	Source         string          `json:"source"`      // SessionStart: startup, resume, clear, compact
	Reason         string          `json:"reason"`      // SessionEnd
}

// stdinAgent is an agent whose hook reads stdinInput: what it calls its
// events and which of its tools change files.
type stdinAgent struct {
	name      string // its subcommand and name in messages
	runPrefix string // a session is run <runPrefix><session id>
	// prompt, tool and stop are its events for a prompt submitted (before
	// the turn), a tool about to run, and the turn's end; both agents call
	// a session's ends SessionStart and SessionEnd.
	prompt, tool, stop string
	fileTools          map[string]bool // a tool event of one seals the state before it runs
	shellTool          string          // the file tool whose input is a command
	projectEnv         string          // the variable naming the project's root, for a direct seal
	// noOpinion is what the hook prints on stdout, the agent's "go on"
	// (testdata/hooks/README.md says why each).
	noOpinion string
}

// claudeAgent is Claude Code (README.md, "Coding agents").
var claudeAgent = stdinAgent{
	name: "claude-code", runPrefix: claudeRunPrefix,
	prompt: "UserPromptSubmit", tool: "PreToolUse", stop: "Stop",
	fileTools:  map[string]bool{"Edit": true, "Write": true, "MultiEdit": true, "NotebookEdit": true, "Bash": true},
	shellTool:  "Bash",
	projectEnv: "CLAUDE_PROJECT_DIR",
}

// geminiAgent is Gemini CLI: its tools that write files are write_file,
// replace and run_shell_command (its tools reference).
var geminiAgent = stdinAgent{
	name: "gemini", runPrefix: geminiRunPrefix,
	prompt: "BeforeAgent", tool: "BeforeTool", stop: "AfterAgent",
	fileTools:  map[string]bool{"write_file": true, "replace": true, "run_shell_command": true},
	shellTool:  "run_shell_command",
	projectEnv: "GEMINI_PROJECT_DIR",
	noOpinion:  "{}",
}

// stdinAgentOf is the stdinAgent of agent k; false for Codex.
func stdinAgentOf(k agentKind) (stdinAgent, bool) {
	switch k {
	case agentClaude:
		return claudeAgent, true
	case agentGemini:
		return geminiAgent, true
	}
	return stdinAgent{}, false
}

// codexInput is Codex's notification: JSON, the notify program's one argument.
type codexInput struct {
	Type          string   `json:"type"`
	ThreadID      string   `json:"thread-id"`
	TurnID        string   `json:"turn-id"`
	Cwd           string   `json:"cwd"`
	InputMessages []string `json:"input-messages"`
	LastAssistant string   `json:"last-assistant-message"`
}

// hookStep is what one event asks of the daemon: a checkpoint of the
// workspace holding cwd. A zero step (no cwd) asks nothing.
type hookStep struct {
	cwd string
	req api.CheckpointRequest // Workspace is filled in once found
	// label, when set, makes req.Label once the workspace's root is known
	// (a tool's file is named relative to it).
	label func(root string) string
}

// turnCounter reads and advances a session's turn count (hook_state.go).
type turnCounter interface {
	load(run string) (turnState, error)
	save(run string, st turnState) error
}

// errIgnored marks input that asks for nothing (another event, another
// notification type): not a problem worth a line.
var errIgnored = errors.New("nothing to do for this event")

// stdinStep turns one hook input of agent a (Claude Code, Gemini CLI) into
// its checkpoint. A turn counter failure is reported with the step, which
// still goes out.
func stdinStep(a stdinAgent, raw []byte, tc turnCounter) (hookStep, error) {
	var in stdinInput
	if err := json.Unmarshal(raw, &in); err != nil {
		return hookStep{}, fmt.Errorf("%s: malformed hook input: %w", a.name, err)
	}
	if in.Cwd == "" || !filepath.IsAbs(in.Cwd) {
		return hookStep{}, fmt.Errorf("%s: hook input without an absolute cwd", a.name)
	}
	run := a.runPrefix + safeID(in.SessionID)
	step := hookStep{cwd: in.Cwd, req: api.CheckpointRequest{RunID: run}}
	var cerr error
	switch in.Event {
	case a.prompt:
		st, err := tc.load(run)
		cerr = err
		st.Turn++
		st.Prompt = labelLine(in.Prompt)
		if err := tc.save(run, st); err != nil {
			cerr = err
		}
		step.req = turnRequest(run, st, ckpt.KindRigSetup)
	case a.tool:
		if !a.fileTools[in.ToolName] {
			return hookStep{}, errIgnored
		}
		st, err := tc.load(run)
		cerr = err
		step.label = func(root string) string {
			l := toolLabel(in.ToolName, in.ToolName == a.shellTool, in.ToolInput, root)
			if st.Turn > 0 {
				l = labelLine(fmt.Sprintf("turn %d: %s", st.Turn, l))
			}
			return l
		}
		step.req.Label = step.label(in.Cwd)
	case a.stop:
		st, err := tc.load(run)
		cerr = err
		if st.Turn == 0 { // the hook came in mid-session: no turn to end
			step.req.Label = "end of a turn"
			break
		}
		step.req = turnRequest(run, st, ckpt.KindCompleted)
	case "SessionStart":
		step.req.Label = sessionLabel("session start", in.Source)
	case "SessionEnd":
		step.req.Label = sessionLabel("session end", in.Reason)
	default:
		return hookStep{}, errIgnored
	}
	return step, cerr
}

// codexStep turns one Codex notification into its checkpoint: the end of
// the thread's next turn, labelled with the request.
func codexStep(raw []byte, tc turnCounter) (hookStep, error) {
	var in codexInput
	if err := json.Unmarshal(raw, &in); err != nil {
		return hookStep{}, fmt.Errorf("codex: malformed notification: %w", err)
	}
	if in.Type != "agent-turn-complete" {
		return hookStep{}, errIgnored
	}
	if in.Cwd == "" || !filepath.IsAbs(in.Cwd) {
		return hookStep{}, fmt.Errorf("codex: notification without an absolute cwd")
	}
	run := codexRunPrefix
	if in.ThreadID != "" {
		run += "-" + safeID(in.ThreadID)
	}
	st, cerr := tc.load(run)
	st.Turn++
	st.Prompt = ""
	if len(in.InputMessages) > 0 {
		st.Prompt = labelLine(in.InputMessages[0])
	}
	if err := tc.save(run, st); err != nil {
		cerr = err
	}
	return hookStep{cwd: in.Cwd, req: turnRequest(run, st, ckpt.KindCompleted)}, cerr
}

// turnRequest is the lifecycle checkpoint of turn st.Turn: codon turn-N.
func turnRequest(run string, st turnState, kind ckpt.Kind) api.CheckpointRequest {
	label := st.Prompt
	if label == "" {
		label = "turn " + strconv.Itoa(st.Turn)
	}
	return api.CheckpointRequest{Status: string(kind), CodonID: turnCodon(st.Turn),
		CodonName: "turn " + strconv.Itoa(st.Turn), RunID: run, Label: label}
}

// turnCodon is turn n's codon id.
func turnCodon(n int) string { return "turn-" + strconv.Itoa(n) }

// toolLabel is "tool target": a file tool's path (relative to root when
// beneath it), a shell tool's command's first line.
func toolLabel(tool string, shell bool, input json.RawMessage, root string) string {
	var ti struct {
		FilePath     string `json:"file_path"`
		NotebookPath string `json:"notebook_path"`
		Command      string `json:"command"`
	}
	_ = json.Unmarshal(input, &ti) // a shape we do not know labels with the tool alone
	target := ti.Command
	if !shell {
		target = ti.FilePath
		if target == "" {
			target = ti.NotebookPath
		}
		if filepath.IsAbs(target) && beneath(target, root) {
			if rel, err := filepath.Rel(root, target); err == nil && rel != "." {
				target = rel
			}
		}
	}
	return withDetail(tool, target)
}

// sessionLabel is "session start (startup)": the event and why.
func sessionLabel(what, why string) string {
	if w := labelLine(why); w != "" {
		return labelLine(what + " (" + w + ")")
	}
	return what
}

func withDetail(what, detail string) string {
	if d := labelLine(detail); d != "" {
		return labelLine(what + " " + d)
	}
	return what
}

// labelLine is s's first non-blank line, trimmed, without control or
// format characters, cut to maxLabel characters (… marks a cut).
func labelLine(s string) string {
	line := ""
	for l := range strings.SplitSeq(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			line = l
			break
		}
	}
	line = strings.Map(func(r rune) rune {
		switch {
		case r == '\t':
			return ' '
		case r == utf8.RuneError, !unicode.IsPrint(r) && r != ' ':
			return -1
		}
		return r
	}, line)
	if utf8.RuneCountInString(line) > maxLabel {
		line = strings.TrimSpace(string([]rune(line)[:maxLabel-1])) + "…"
	}
	return line
}

// safeID is id with every character but letters, digits, - and _ made _,
// at most 64 of them: a run id git accepts in a branch name.
func safeID(id string) string {
	b := []byte(id)
	if len(b) > 64 {
		b = b[:64]
	}
	for i, c := range b {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
		if !ok {
			b[i] = '_'
		}
	}
	if len(b) == 0 {
		return "nosession"
	}
	return string(b)
}
