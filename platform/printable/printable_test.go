package printable

import (
	"encoding/json"
	"strconv"
	"testing"
	"unicode/utf8"
)

func TestString(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"plain/path.go", "plain/path.go"},
		{"café/naïve", "café/naïve"},
		{"日本語/ファイル", "日本語/ファイル"},
		{"emoji 🪨 ok", "emoji 🪨 ok"},
		{`back\slash`, `back\slash`},
		{"\x1b]0;pwned\x07", `\x1b]0;pwned\a`},
		{"\x1b[2J", `\x1b[2J`},
		{"a\nb\tc\rd", `a\nb\tc\rd`},
		{"nul\x00 del\x7f", `nul\x00 del\x7f`},
		{"\b\f\v", `\b\f\v`},
		{"c1 \u0085 \u009b", `c1 \u0085 \u009b`},
		{"evil\u202egpj.exe", `evil\u202egpj.exe`},
		{"\u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069", `\u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069`},
		{"\u200e\u200f\u061c", `\u200e\u200f\u061c`},
		{"line\u2028para\u2029", `line\u2028para\u2029`},
		{"bad \xff\xfe utf8", `bad \xff\xfe utf8`},
		{"cut \xe6\x97", `cut \xe6\x97`},
		{"\u00a0nbsp and \u200b zero width stay", "\u00a0nbsp and \u200b zero width stay"},
	} {
		got := String(c.in)
		if got != c.want {
			t.Errorf("String(%q) = %q, want %q", c.in, got, c.want)
		}
		if again := String(got); again != got {
			t.Errorf("String is not idempotent on %q: %q then %q", c.in, got, again)
		}
		for _, r := range got {
			if Unsafe(r) || r == utf8.RuneError {
				t.Errorf("String(%q) = %q still holds %U", c.in, got, r)
			}
		}
	}
}

// TestStringLikeGo: every unsafe rune is escaped as strconv.Quote would.
func TestStringLikeGo(t *testing.T) {
	for r := rune(0); r < 0x3000; r++ {
		if !Unsafe(r) {
			continue
		}
		q := strconv.Quote(string(r))
		if got := String(string(r)); got != q[1:len(q)-1] {
			t.Errorf("String(%U) = %q, Go quotes it %s", r, got, q)
		}
	}
}

func TestLines(t *testing.T) {
	in := "@@ -1 +1 @@\n-\told\x1b[2J\n+\tnew\u202e\r\n"
	want := "@@ -1 +1 @@\n-\told\\x1b[2J\n+\tnew\\u202e\\r\n"
	if got := Lines(in); got != want {
		t.Errorf("Lines(%q) = %q, want %q", in, got, want)
	}
}

func TestJSON(t *testing.T) {
	name := "ws\x1b]0;pwned\x07\u202e\u0085\x7f\nnaïve 日本"
	b, err := json.MarshalIndent(map[string]any{"dir": name, "n": 1}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got := JSON(b)
	for _, r := range string(got) {
		if Unsafe(r) && r != '\n' {
			t.Errorf("JSON left %U raw in %s", r, got)
		}
	}
	var back map[string]any
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatalf("JSON made invalid JSON %s: %v", got, err)
	}
	if back["dir"] != name {
		t.Errorf("round trip: %q, want %q", back["dir"], name)
	}
	if plain := []byte(`{"a": "b"}`); string(JSON(plain)) != string(plain) {
		t.Errorf("JSON changed %s", plain)
	}
	if got := string(JSON([]byte("\"\xff\""))); got != `"\ufffd"` {
		t.Errorf("JSON of invalid UTF-8: %s", got)
	}
}
