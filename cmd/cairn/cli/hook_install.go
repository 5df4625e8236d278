package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/cairn-dev/cairn/agent/hankweave"
	"github.com/cairn-dev/cairn/platform"
)

// settingsHooks is what cairn adds to the hooks of an agent's JSON settings
// (Claude Code, Gemini CLI: hooks → event → [{matcher?, hooks: [{type:
// "command", command, ...}]}]). `cairn` must be on the agent's PATH.
type settingsHooks struct {
	folder  string                 // a project's settings are DIR/<folder>/settings.json
	userDir func() (string, error) // the folder of the user's settings.json
	command string                 // the hook command; an entry running it is cairn's
	events  []string               // the events hooked, in the order they are added
	// toolEvent is the event before a tool runs; its group gets matcher,
	// the agent's file-changing tools.
	toolEvent, matcher string
	timeout            int    // in the agent's unit; the hook gives up after its own bound
	name               string // the entry's name, where the agent shows one
	// onOff is the object whose "enabled": false turns every hook off
	// (Gemini CLI's hooksConfig); install says so when the file sets it.
	onOff string
}

// claudeSettings are cairn's entries in Claude Code's settings.
var claudeSettings = settingsHooks{
	folder: ".claude", userDir: claudeUserDir,
	command:   "cairn hook claude-code",
	events:    []string{"SessionStart", "UserPromptSubmit", "PreToolUse", "Stop", "SessionEnd"},
	toolEvent: "PreToolUse", matcher: "Edit|Write|MultiEdit|NotebookEdit|Bash",
	timeout: 10, // seconds
}

// geminiSettings are cairn's entries in Gemini CLI's settings: its matcher
// is a regular expression tested against the tool's name, anchored here.
var geminiSettings = settingsHooks{
	folder: ".gemini", userDir: geminiUserDir,
	command:   "cairn hook gemini",
	events:    []string{"SessionStart", "BeforeAgent", "BeforeTool", "AfterAgent", "SessionEnd"},
	toolEvent: "BeforeTool", matcher: "^(write_file|replace|run_shell_command)$",
	timeout: 10000, // milliseconds
	name:    "cairn",
	onOff:   "hooksConfig",
}

func runHookInstall(ctx context.Context, e *env, args []string, uninstall bool) error {
	verb := "install"
	if uninstall {
		verb = "uninstall"
	}
	fs := newFlags("hook "+verb, "hook "+verb+" claude-code|gemini|codex [DIR] [--user]", e)
	user := fs.Bool("user", false, "the user's settings (~/.claude/settings.json, ~/.gemini/settings.json) instead of DIR's project settings")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 1 || len(pos) > 2 {
		fs.Usage()
		return usageErr("hook %s takes an agent (claude-code, gemini or codex) and at most a directory", verb)
	}
	switch pos[0] {
	case "claude-code", "gemini":
		s := claudeSettings
		if pos[0] == "gemini" {
			s = geminiSettings
		}
		path, err := s.path(pos[1:], *user)
		if err != nil {
			return err
		}
		return editFile(e, path, uninstall, s.edit)
	case "codex":
		if len(pos) == 2 {
			return usageErr("Codex's notify is a user setting: hook %s codex takes no directory", verb)
		}
		path, err := codexConfigPath()
		if err != nil {
			return err
		}
		return editFile(e, path, uninstall, editCodexConfig)
	}
	return usageErr("hook %s: unknown agent %q (claude-code, gemini or codex)", verb, pos[0])
}

// claudeUserDir is $CLAUDE_CONFIG_DIR, else ~/.claude.
func claudeUserDir() (string, error) {
	if d := os.Getenv("CLAUDE_CONFIG_DIR"); filepath.IsAbs(d) {
		return d, nil
	}
	home, err := os.UserHomeDir()
	return filepath.Join(home, ".claude"), err
}

// geminiUserDir is ~/.gemini, the home being $GEMINI_CLI_HOME when set.
func geminiUserDir() (string, error) {
	home := os.Getenv("GEMINI_CLI_HOME")
	var err error
	if !filepath.IsAbs(home) {
		home, err = os.UserHomeDir()
	}
	return filepath.Join(home, ".gemini"), err
}

// path is DIR/<folder>/settings.json (DIR: the current folder), or with
// --user the settings.json in userDir.
func (s settingsHooks) path(dirArg []string, user bool) (string, error) {
	if user {
		if len(dirArg) > 0 {
			return "", usageErr("--user takes no directory")
		}
		d, err := s.userDir()
		if err != nil {
			return "", err
		}
		return filepath.Join(d, "settings.json"), nil
	}
	dir := "."
	if len(dirArg) > 0 {
		dir = dirArg[0]
	}
	if err := notAsRootFor(dir); err != nil {
		return "", err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("%s: not a directory", abs)
	}
	return filepath.Join(abs, s.folder, "settings.json"), nil
}

// codexConfigPath is $CODEX_HOME/config.toml, else ~/.codex/config.toml.
func codexConfigPath() (string, error) {
	if d := os.Getenv("CODEX_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "config.toml"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, ".codex", "config.toml"), nil
}

// errRefusedEdit is an edit cairn will not make; its message says why.
type errRefusedEdit struct{ msg string }

func (e errRefusedEdit) Error() string { return e.msg }

// editFile applies edit to the file at path (missing: empty) and writes the
// result back atomically when it changed. A link is followed: the file it
// names is edited (dotfile managers link settings files).
func editFile(e *env, path string, uninstall bool, edit func(old []byte, uninstall bool) ([]byte, string, error)) error {
	if os.Geteuid() == 0 {
		if err := rootMayEdit(path); err != nil {
			return err
		}
	} else if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	old, mode, err := readSmall(path)
	if err != nil {
		return err
	}
	out, what, err := edit(old, uninstall)
	var refused errRefusedEdit
	if errors.As(err, &refused) {
		return &exitError{ExitRefused, fmt.Errorf("%s: %s", path, refused.msg)}
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if out != nil {
		if err := writeAtomic(path, out, mode); err != nil {
			return err
		}
	}
	fmt.Fprintf(e.stdout, "%s: %s\n", path, what)
	return nil
}

// rootMayEdit refuses, as root, a settings file that a user could steer
// (README "Security": root never follows a path a user controls): the file
// and every folder above it that exists must be root's, and none a link.
func rootMayEdit(path string) error {
	for p := path; ; p = filepath.Dir(p) {
		fi, err := os.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return err
		case fi.Mode()&fs.ModeSymlink != 0:
			return &exitError{ExitRefused, fmt.Errorf("%s is a link: as root, cairn edits no file a link leads to; run it as the settings' owner", p)}
		default:
			if uid, ok := platform.InfoOwner(fi); ok && uid != 0 {
				return &exitError{ExitRefused, fmt.Errorf("%s belongs to uid %d: as root, cairn does not edit a user's files; run it as that user", p, uid)}
			}
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// readSmall reads a settings file: nil for a missing one, with its mode.
func readSmall(path string) ([]byte, os.FileMode, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0o644, nil
	}
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	if !fi.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("%s: not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, 16<<20+1))
	if err == nil && len(b) > 16<<20 {
		err = fmt.Errorf("%s: larger than 16 MiB", path)
	}
	return b, fi.Mode().Perm(), err
}

// writeAtomic writes b to path through a temporary file renamed over it,
// making the folder if needed; the file keeps mode.
func writeAtomic(path string, b []byte, mode os.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	_, err = tmp.Write(b)
	if err == nil {
		err = tmp.Chmod(mode)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// edit adds (uninstall: removes) cairn's hook entries in an agent's
// settings file. Keys keep their order and values their text; the file is
// re-indented with two spaces. It returns nil when nothing changes.
func (s settingsHooks) edit(old []byte, uninstall bool) ([]byte, string, error) {
	if len(bytes.TrimSpace(old)) == 0 {
		old = []byte("{}")
	}
	top, err := parseObject(old)
	if err != nil {
		return nil, "", errRefusedEdit{"not a JSON object (" + err.Error() + "): fix it first, nothing was changed"}
	}
	var hooks hankweave.RawObject
	if raw, ok := top.Get("hooks"); ok {
		if hooks, err = parseObject(raw); err != nil {
			return nil, "", errRefusedEdit{`"hooks" is not a JSON object: nothing was changed`}
		}
	}
	var changed []string
	for _, ev := range s.events {
		var groups []json.RawMessage
		if raw, ok := hooks.Get(ev); ok {
			if err := json.Unmarshal(raw, &groups); err != nil {
				return nil, "", errRefusedEdit{fmt.Sprintf("hooks.%s is not a JSON array: nothing was changed", ev)}
			}
		}
		var done bool
		if uninstall {
			groups, done = s.without(groups)
		} else if !s.has(groups) {
			groups, done = append(groups, s.group(ev)), true
		}
		if !done {
			continue
		}
		changed = append(changed, ev)
		if len(groups) == 0 {
			hooks.Delete(ev)
			continue
		}
		b, err := hankweave.MarshalNoEscape(groups)
		if err != nil {
			return nil, "", err
		}
		hooks.Set(ev, b)
	}
	if len(changed) == 0 {
		if uninstall {
			return nil, "no cairn hooks to remove", nil
		}
		return nil, "cairn hooks already installed" + s.offNote(top), nil
	}
	if hooks.Len() == 0 {
		top.Delete("hooks")
	} else {
		b, err := hankweave.MarshalNoEscape(hooks)
		if err != nil {
			return nil, "", err
		}
		top.Set("hooks", b)
	}
	b, err := hankweave.MarshalNoEscape(top)
	if err != nil {
		return nil, "", err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return nil, "", err
	}
	out.WriteByte('\n')
	if uninstall {
		return out.Bytes(), "removed cairn hooks: " + strings.Join(changed, ", "), nil
	}
	return out.Bytes(), "added cairn hooks: " + strings.Join(changed, ", ") + s.offNote(top), nil
}

// offNote is a warning when the settings turn the agent's hooks off.
func (s settingsHooks) offNote(top hankweave.RawObject) string {
	raw, ok := top.Get(s.onOff)
	if s.onOff == "" || !ok {
		return ""
	}
	var sw struct{ Enabled *bool }
	if json.Unmarshal(raw, &sw) != nil || sw.Enabled == nil || *sw.Enabled {
		return ""
	}
	return fmt.Sprintf("; note: %s.enabled is false in this file, so the agent runs no hook until it is true", s.onOff)
}

// hookGroup is one matcher group of a hooks event.
type hookGroup struct {
	Matcher string        `json:"matcher,omitempty"`
	Hooks   []hookCommand `json:"hooks"`
}

type hookCommand struct {
	Type    string `json:"type"`
	Command string `json:"command"`
	Name    string `json:"name,omitempty"`
	Timeout int    `json:"timeout,omitempty"`
}

// group is cairn's group for event.
func (s settingsHooks) group(event string) json.RawMessage {
	g := hookGroup{Hooks: []hookCommand{{Type: "command", Command: s.command, Name: s.name, Timeout: s.timeout}}}
	if event == s.toolEvent {
		g.Matcher = s.matcher
	}
	b, _ := hankweave.MarshalNoEscape(g)
	return b
}

// isCairn reports whether a hook entry is cairn's command.
func (s settingsHooks) isCairn(raw json.RawMessage) bool {
	var h struct {
		Type, Command string
	}
	return json.Unmarshal(raw, &h) == nil && h.Type == "command" && strings.TrimSpace(h.Command) == s.command
}

// groupHooks is a group's hook entries, kept raw; ok is false for a group
// of a shape cairn does not know (left alone).
func groupHooks(raw json.RawMessage) (hankweave.RawObject, []json.RawMessage, bool) {
	g, err := parseObject(raw)
	if err != nil {
		return g, nil, false
	}
	hs, ok := g.Get("hooks")
	var list []json.RawMessage
	if !ok || json.Unmarshal(hs, &list) != nil {
		return g, nil, false
	}
	return g, list, true
}

func (s settingsHooks) has(groups []json.RawMessage) bool {
	for _, raw := range groups {
		if _, list, ok := groupHooks(raw); ok {
			for _, h := range list {
				if s.isCairn(h) {
					return true
				}
			}
		}
	}
	return false
}

// without drops cairn's hook entries from every group, and a group left
// with none; other entries and groups stay as they were.
func (s settingsHooks) without(groups []json.RawMessage) ([]json.RawMessage, bool) {
	var out []json.RawMessage
	changed := false
	for _, raw := range groups {
		g, list, ok := groupHooks(raw)
		if !ok {
			out = append(out, raw)
			continue
		}
		var kept []json.RawMessage
		for _, h := range list {
			if !s.isCairn(h) {
				kept = append(kept, h)
			}
		}
		if len(kept) == len(list) {
			out = append(out, raw)
			continue
		}
		changed = true
		if len(kept) == 0 {
			continue
		}
		b, _ := hankweave.MarshalNoEscape(kept)
		g.Set("hooks", b)
		nb, _ := hankweave.MarshalNoEscape(g)
		out = append(out, nb)
	}
	return out, changed
}

// parseObject reads a JSON object with its members in order and their
// values' text (hankweave.RawObject); anything else is an error.
func parseObject(b []byte) (hankweave.RawObject, error) {
	o, err := hankweave.ParseRawObject(b)
	if err == nil && !o.IsObject() {
		err = errors.New("not a JSON object")
	}
	return o, err
}
