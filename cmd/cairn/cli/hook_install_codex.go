package cli

import (
	"bytes"
	"fmt"
	"reflect"
	"regexp"
	"strings"

	"github.com/BurntSushi/toml"
)

// codexNotifyLine is the line cairn adds to Codex's config.toml.
const codexNotifyLine = `notify = ["cairn", "hook", "codex"] # added by cairn hook install`

// ourNotifyLine matches a notify line setting exactly cairn's command.
var ourNotifyLine = regexp.MustCompile(`^\s*notify\s*=\s*\[\s*"cairn"\s*,\s*"hook"\s*,\s*"codex"\s*,?\s*\]\s*(#.*)?$`)

// editCodexConfig sets (uninstall: removes) notify in Codex's config.toml
// by editing one line, and checks the edit by decoding the file before and
// after: the result must hold exactly the same settings, notify aside. A
// different notify is left alone, politely refused.
func editCodexConfig(old []byte, uninstall bool) ([]byte, string, error) {
	before, err := decodeTOML(old)
	if err != nil {
		return nil, "", errRefusedEdit{"not valid TOML (" + err.Error() + "): fix it first, nothing was changed"}
	}
	cur, set := before["notify"]
	ours := set && reflect.DeepEqual(cur, []any{"cairn", "hook", "codex"})
	if set && !ours {
		if uninstall {
			return nil, fmt.Sprintf("notify is %v, not cairn's: left alone", cur), nil
		}
		return nil, "", errRefusedEdit{fmt.Sprintf("notify is already set to %v; Codex runs one notify program: "+
			"remove it, or call `cairn hook codex \"$1\"` from your own program", cur)}
	}
	lines := strings.SplitAfter(string(old), "\n")
	var out string
	switch {
	case uninstall && !set:
		return nil, "no cairn notify to remove", nil
	case uninstall:
		n, at := 0, -1
		for i, l := range lines {
			if ourNotifyLine.MatchString(strings.TrimRight(l, "\r\n")) {
				n, at = n+1, i
			}
		}
		if n != 1 {
			return nil, "", errRefusedEdit{"notify is cairn's but not on one line cairn can remove: remove it by hand"}
		}
		out = strings.Join(append(lines[:at:at], lines[at+1:]...), "")
	case ours:
		return nil, "cairn notify already installed", nil
	default:
		out = insertRootKey(lines, codexNotifyLine+"\n")
	}
	after, err := decodeTOML([]byte(out))
	want := map[string]any{}
	for k, v := range before {
		want[k] = v
	}
	if uninstall {
		delete(want, "notify")
	} else {
		want["notify"] = []any{"cairn", "hook", "codex"}
	}
	if err != nil || !reflect.DeepEqual(after, want) {
		return nil, "", errRefusedEdit{fmt.Sprintf("cairn could not edit this file safely; set it by hand: %s", codexNotifyLine)}
	}
	if uninstall {
		return []byte(out), "removed cairn's notify", nil
	}
	return []byte(out), "added " + codexNotifyLine, nil
}

// insertRootKey puts line among the root keys: before the first table
// header, else at the end (the caller checks the result).
func insertRootKey(lines []string, line string) string {
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "[") {
			return strings.Join(lines[:i], "") + line + strings.Join(lines[i:], "")
		}
	}
	body := strings.Join(lines, "")
	if body != "" && !strings.HasSuffix(body, "\n") {
		body += "\n"
	}
	return body + line
}

func decodeTOML(b []byte) (map[string]any, error) {
	m := map[string]any{}
	_, err := toml.NewDecoder(bytes.NewReader(b)).Decode(&m)
	return m, err
}
