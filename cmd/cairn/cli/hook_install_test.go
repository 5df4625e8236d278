package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const otherHooks = `{
  "model": "opus",
  "permissions": {"allow": ["Bash(npm test:*)"]},
  "hooks": {
    "PreToolUse": [
      {"matcher": "Bash", "hooks": [{"type": "command", "command": "~/bin/guard.sh && echo <ok>"}]}
    ],
    "Notification": [{"hooks": [{"type": "command", "command": "notify-send claude"}]}]
  },
  "env": {"B": "1", "A": "2"}
}
`

// topKeys is the order of an object's keys in a JSON text.
func topKeys(t *testing.T, b []byte) []string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(string(b)))
	var keys []string
	depth := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		switch v := tok.(type) {
		case json.Delim:
			if v == '{' || v == '[' {
				depth++
			} else {
				depth--
			}
		case string:
			if depth == 1 {
				keys = append(keys, v)
				var skip json.RawMessage
				dec.Decode(&skip)
			}
		}
	}
	return keys
}

func decodeJSON(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	return v
}

// settingsRoundTrip installs agent's hooks in proj's settings at path,
// which hold orig: the top keys keep their order, the texts in keep stay,
// check sees the result; a second install changes nothing and says so;
// uninstall gives back the same settings, keys in order.
func settingsRoundTrip(t *testing.T, agent, proj, path, orig string, keys, keep []string, check func(installed []byte)) {
	t.Helper()
	os.MkdirAll(filepath.Dir(path), 0o755)
	if err := os.WriteFile(path, []byte(orig), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := mustCairn(t, nil, "hook", "install", agent, proj); strings.Contains(out, "note") {
		t.Errorf("install warns: %s", out)
	}
	installed, _ := os.ReadFile(path)
	if got := topKeys(t, installed); !reflect.DeepEqual(got, keys) {
		t.Errorf("top keys reordered: %v\n%s", got, installed)
	}
	for _, k := range keep {
		if !strings.Contains(string(installed), k) {
			t.Errorf("%s changed:\n%s", k, installed)
		}
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want the file's own 0600", fi.Mode().Perm())
	}
	check(installed)
	out := mustCairn(t, nil, "hook", "install", agent, proj)
	if again, _ := os.ReadFile(path); string(again) != string(installed) || !strings.Contains(out, "already") {
		t.Errorf("a second install changed the file, or did not say so: %s", out)
	}
	mustCairn(t, nil, "hook", "uninstall", agent, proj)
	removed, _ := os.ReadFile(path)
	if !reflect.DeepEqual(decodeJSON(t, removed), decodeJSON(t, []byte(orig))) {
		t.Errorf("uninstall did not give back the settings:\n%s", removed)
	}
	if !reflect.DeepEqual(topKeys(t, removed), keys) {
		t.Errorf("uninstall reordered keys:\n%s", removed)
	}
}

// TestHookInstallClaudeCodeRoundTrip: install merges cairn's entries into a
// project's settings that already hold other hooks, keeps every other key,
// value and order; a second install changes nothing; uninstall gives back
// the same settings; --user edits ~/.claude/settings.json.
func TestHookInstallClaudeCodeRoundTrip(t *testing.T) {
	proj := t.TempDir()
	path := filepath.Join(proj, ".claude", "settings.json")
	settingsRoundTrip(t, "claude-code", proj, path, otherHooks, []string{"model", "permissions", "hooks", "env"},
		[]string{`"B": "1",`, `~/bin/guard.sh && echo <ok>`}, func(installed []byte) {
			var s struct {
				Hooks map[string][]struct {
					Matcher string
					Hooks   []struct{ Type, Command string }
				}
			}
			json.Unmarshal(installed, &s)
			for _, ev := range []string{"SessionStart", "UserPromptSubmit", "PreToolUse", "Stop", "SessionEnd"} {
				groups := s.Hooks[ev]
				last := groups[len(groups)-1]
				if len(last.Hooks) != 1 || last.Hooks[0].Command != "cairn hook claude-code" {
					t.Errorf("%s: no cairn hook: %+v", ev, groups)
				}
				if ev == "PreToolUse" && (len(groups) != 2 || last.Matcher != "Edit|Write|MultiEdit|NotebookEdit|Bash") {
					t.Errorf("PreToolUse: %+v", groups)
				}
			}
		})

	// A hook the user added to cairn's group stays on uninstall.
	home := t.TempDir()
	env := []string{"HOME=" + home, "CLAUDE_CONFIG_DIR="}
	mustCairn(t, env, "hook", "install", "claude-code", "--user")
	user := filepath.Join(home, ".claude", "settings.json")
	b, _ := os.ReadFile(user)
	b = []byte(strings.Replace(string(b), `"command": "cairn hook claude-code",`, `"command": "cairn hook claude-code", "x": 1}, {"type": "command", "command": "mine",`, 1))
	os.WriteFile(user, b, 0o644)
	mustCairn(t, env, "hook", "uninstall", "claude-code", "--user")
	b, _ = os.ReadFile(user)
	if strings.Contains(string(b), "cairn hook") || !strings.Contains(string(b), `"mine"`) {
		t.Errorf("uninstall of a shared group:\n%s", b)
	}

	// Not JSON: refused, unchanged.
	os.WriteFile(path, []byte("{ not json"), 0o644)
	if _, errOut, code := cairn(t, nil, "hook", "install", "claude-code", proj); code != 5 || !strings.Contains(errOut, "not a JSON object") {
		t.Errorf("bad settings: exit %d, %s", code, errOut)
	}
	if b, _ := os.ReadFile(path); string(b) != "{ not json" {
		t.Errorf("bad settings changed: %s", b)
	}
}

const geminiOtherHooks = `{
  "general": {"vimMode": true},
  "hooksConfig": {"enabled": true},
  "hooks": {
    "BeforeTool": [
      {"matcher": "write_file|replace", "hooks": [{"name": "secret-scan", "type": "command", "command": "$GEMINI_PROJECT_DIR/.gemini/hooks/scan.sh && echo <ok>", "timeout": 5000}]}
    ],
    "disabled": ["auto-test"]
  },
  "ui": {"theme": "GitHub"}
}
`

// TestHookInstallGeminiRoundTrip: install merges cairn's entries into a
// project's .gemini/settings.json that already holds other hooks (and the
// hooks object's own keys), keeping every other key, value and order; a
// second install changes nothing; uninstall gives back the same settings;
// --user edits ~/.gemini/settings.json ($GEMINI_CLI_HOME/.gemini); settings
// that turn hooks off are named in install's answer.
func TestHookInstallGeminiRoundTrip(t *testing.T) {
	proj := t.TempDir()
	path := filepath.Join(proj, ".gemini", "settings.json")
	settingsRoundTrip(t, "gemini", proj, path, geminiOtherHooks, []string{"general", "hooksConfig", "hooks", "ui"},
		[]string{`scan.sh && echo <ok>`, `"disabled": [`}, func(installed []byte) {
			var s struct {
				Hooks map[string]json.RawMessage
			}
			json.Unmarshal(installed, &s)
			for _, ev := range []string{"SessionStart", "BeforeAgent", "BeforeTool", "AfterAgent", "SessionEnd"} {
				var groups []struct {
					Matcher string
					Hooks   []struct {
						Type, Command, Name string
						Timeout             int
					}
				}
				json.Unmarshal(s.Hooks[ev], &groups)
				last := groups[len(groups)-1]
				if len(last.Hooks) != 1 || last.Hooks[0].Command != "cairn hook gemini" || last.Hooks[0].Type != "command" ||
					last.Hooks[0].Name != "cairn" || last.Hooks[0].Timeout != 10000 {
					t.Errorf("%s: no cairn hook: %+v", ev, groups)
				}
				if ev == "BeforeTool" && (len(groups) != 2 || last.Matcher != "^(write_file|replace|run_shell_command)$") {
					t.Errorf("BeforeTool: %+v", groups)
				}
				if ev != "BeforeTool" && last.Matcher != "" {
					t.Errorf("%s: matcher %q", ev, last.Matcher)
				}
			}
		})

	// --user, with hooks turned off: installed, and said.
	home := t.TempDir()
	env := []string{"HOME=" + t.TempDir(), "GEMINI_CLI_HOME=" + home}
	user := filepath.Join(home, ".gemini", "settings.json")
	os.Mkdir(filepath.Dir(user), 0o700)
	os.WriteFile(user, []byte(`{"hooksConfig": {"enabled": false}}`), 0o644)
	if out := mustCairn(t, env, "hook", "install", "gemini", "--user"); !strings.Contains(out, "hooksConfig.enabled is false") {
		t.Errorf("hooks off: install did not say so: %s", out)
	}
	if b, _ := os.ReadFile(user); !strings.Contains(string(b), `"command": "cairn hook gemini"`) {
		t.Errorf("--user: %s", b)
	}
	mustCairn(t, env, "hook", "uninstall", "gemini", "--user")
	if b, _ := os.ReadFile(user); !reflect.DeepEqual(decodeJSON(t, b), decodeJSON(t, []byte(`{"hooksConfig": {"enabled": false}}`))) {
		t.Errorf("--user uninstall: %s", b)
	}
}

// TestHookInstallCodexRoundTrip: install adds cairn's notify among the
// root keys of Codex's config.toml, once; a different notify is refused
// and left alone; uninstall gives back the file byte for byte.
func TestHookInstallCodexRoundTrip(t *testing.T) {
	home := t.TempDir()
	env := []string{"CODEX_HOME=" + home}
	path := filepath.Join(home, "config.toml")
	orig := "# my codex\nmodel = \"gpt-5-codex\"\napproval_policy = \"on-request\"\n\n[profiles.fast]\nmodel = \"o4-mini\"\n"
	os.WriteFile(path, []byte(orig), 0o600)
	mustCairn(t, env, "hook", "install", "codex")
	b, _ := os.ReadFile(path)
	want := "# my codex\nmodel = \"gpt-5-codex\"\napproval_policy = \"on-request\"\n\n" +
		"notify = [\"cairn\", \"hook\", \"codex\"] # added by cairn hook install\n[profiles.fast]\nmodel = \"o4-mini\"\n"
	if string(b) != want {
		t.Fatalf("after install:\n%s\nwant:\n%s", b, want)
	}
	if out := mustCairn(t, env, "hook", "install", "codex"); !strings.Contains(out, "already") {
		t.Errorf("second install: %s", out)
	}
	if b2, _ := os.ReadFile(path); string(b2) != want {
		t.Errorf("second install changed the file:\n%s", b2)
	}
	mustCairn(t, env, "hook", "uninstall", "codex")
	if b, _ := os.ReadFile(path); string(b) != orig {
		t.Fatalf("after uninstall:\n%q\nwant:\n%q", b, orig)
	}

	// Another notify program: refused politely, file untouched; uninstall leaves it.
	other := "notify = [\"python3\", \"/home/me/notify.py\"]\n"
	os.WriteFile(path, []byte(other), 0o600)
	if _, errOut, code := cairn(t, env, "hook", "install", "codex"); code != 5 || !strings.Contains(errOut, "already set") {
		t.Errorf("other notify: exit %d, %s", code, errOut)
	}
	mustCairn(t, env, "hook", "uninstall", "codex")
	if b, _ := os.ReadFile(path); string(b) != other {
		t.Errorf("another notify changed: %s", b)
	}

	// No config yet: made, with the line alone.
	os.Remove(path)
	mustCairn(t, env, "hook", "install", "codex")
	if b, _ := os.ReadFile(path); !strings.HasPrefix(string(b), "notify = [\"cairn\", \"hook\", \"codex\"]") {
		t.Errorf("new config: %q", b)
	}
}

// TestHookInstallAsRootRefusesUserPaths: as root, install follows no link
// and edits no file or folder a user owns (a local user's attempt to steer
// root's write: a .claude or .gemini link to elsewhere, a settings folder
// the user owns).
func TestHookInstallAsRootRefusesUserPaths(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	for _, a := range []struct{ agent, folder string }{{"claude-code", ".claude"}, {"gemini", ".gemini"}} {
		proj := t.TempDir() // root's
		target := t.TempDir()
		os.Symlink(target, filepath.Join(proj, a.folder))
		if _, errOut, code := cairn(t, nil, "hook", "install", a.agent, proj); code != 5 || !strings.Contains(errOut, "link") {
			t.Errorf("%s: linked %s: exit %d, %s", a.agent, a.folder, code, errOut)
		}
		if _, err := os.Stat(filepath.Join(target, "settings.json")); err == nil {
			t.Errorf("%s: root wrote through the link", a.agent)
		}
		// A user's HOME under sudo: --user refuses a settings folder the user owns.
		home := t.TempDir()
		os.Mkdir(filepath.Join(home, a.folder), 0o755)
		os.Chown(filepath.Join(home, a.folder), 12345, 12345)
		env := []string{"HOME=" + home, "CLAUDE_CONFIG_DIR=", "GEMINI_CLI_HOME="}
		if _, errOut, code := cairn(t, env, "hook", "install", a.agent, "--user"); code != 5 || !strings.Contains(errOut, "uid 12345") {
			t.Errorf("%s: user-owned %s: exit %d, %s", a.agent, a.folder, code, errOut)
		}
		if _, err := os.Stat(filepath.Join(home, a.folder, "settings.json")); err == nil {
			t.Errorf("%s: root wrote into a user's folder", a.agent)
		}
	}
}
