package cli

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

const evilLog = "ws\x1b]0;pwned\x07\x1b[2J\u202e\u0085\x7f\nfake"

// logWithEvilText logs evil text the ways the daemon does: a message, a
// string field, an error, a nested value and a field name.
func logWithEvilText(l zerolog.Logger) {
	l.Warn().Str("workspace", evilLog).Interface("issues", []map[string]string{{"path": evilLog, "reason": "r"}}).
		Str("k"+evilLog, "v").Msg("note: " + evilLog)
}

var colour = regexp.MustCompile("\x1b\\[[0-9;]*m")

// TestConsoleLogEscapes: the console format a terminal gets holds no
// control from a logged value but its own colours.
func TestConsoleLogEscapes(t *testing.T) {
	var b bytes.Buffer
	logWithEvilText(zerolog.New(consoleLog(&b)))
	out := colour.ReplaceAllString(b.String(), "")
	for _, bad := range []string{"\x1b", "\x07", "\u202e", "\u0085", "\x7f"} {
		if strings.Contains(out, bad) {
			t.Errorf("console log holds %q raw: %q", bad, out)
		}
	}
	if strings.Count(out, "\n") != 1 {
		t.Errorf("console log is not one line: %q", out)
	}
}

// TestJSONLogEscapes: the JSON log holds no raw control either, and is
// the same JSON.
func TestJSONLogEscapes(t *testing.T) {
	var b bytes.Buffer
	logWithEvilText(zerolog.New(jsonLog{&b}))
	for _, bad := range []string{"\x1b", "\x07", "\u202e", "\u0085", "\x7f"} {
		if strings.Contains(b.String(), bad) {
			t.Errorf("JSON log holds %q raw: %q", bad, b.String())
		}
	}
	var ev map[string]any
	if err := json.Unmarshal(b.Bytes(), &ev); err != nil || ev["workspace"] != evilLog || ev["message"] != "note: "+evilLog {
		t.Errorf("JSON log line does not carry the exact text (%v): %s", err, b.String())
	}
}
