// Package printable makes text from a user's tree safe to print: a folder
// name, a label, a path or git's output shown on a terminal, in the panel or
// in the log cannot move the cursor, retitle the window, clear the screen or
// reorder what follows it (README.md, "Security").
package printable

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Unsafe reports whether r may not be printed as it is: a C0 control
// (newline and tab included), DEL, a C1 control, a Unicode bidirectional
// control or mark (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069),
// or a line or paragraph separator (U+2028, U+2029).
func Unsafe(r rune) bool {
	switch {
	case r < 0x20, r >= 0x7f && r <= 0x9f:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, r == 0x2028, r == 0x2029:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// String returns s with every unsafe rune (Unsafe) written as a Go escape
// without quotes (\n, \t, \x1b, \u202e), and every byte that is not valid
// UTF-8 as \xNN. Everything else, accents, CJK and emoji included, is left
// as it is, and so is the backslash: a name without controls prints
// unchanged, and String(String(s)) == String(s), so text escaped once (by a
// daemon) and again (by the CLI) reads the same.
func String(s string) string {
	if clean(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b.WriteString(`\x`)
			b.WriteString(hex2(s[i]))
		case Unsafe(r):
			b.WriteString(escape(r))
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// Lines is String for text of several lines (a patch, a diffstat): it
// keeps newlines and tabs, and escapes the rest as String does.
func Lines(s string) string {
	parts := strings.Split(s, "\n")
	for i, p := range parts {
		fields := strings.Split(p, "\t")
		for j, f := range fields {
			fields[j] = String(f)
		}
		parts[i] = strings.Join(fields, "\t")
	}
	return strings.Join(parts, "\n")
}

// JSON returns JSON text b with every unsafe rune other than the newline,
// carriage return and tab written as a \uXXXX escape, and invalid UTF-8 as
// \ufffd (what encoding/json makes of it). Those runes can stand only
// inside a JSON string, where the escape means the same rune: the JSON
// decodes to exactly the values it did, and prints safely. encoding/json
// and zerolog escape C0 controls already, but leave DEL, C1 controls and
// bidirectional controls raw.
func JSON(b []byte) []byte {
	if jsonClean(b) {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			out = append(out, `\ufffd`...)
		case Unsafe(r) && r != '\n' && r != '\r' && r != '\t':
			out = append(out, `\u`...)
			out = append(out, hex4(r)...)
		default:
			out = append(out, b[i:i+n]...)
		}
		i += n
	}
	return out
}

// clean reports whether s needs no escape.
func clean(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f || c >= 0x80 {
			return cleanSlow(s)
		}
	}
	return true
}

func cleanSlow(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if Unsafe(r) {
			return false
		}
	}
	return true
}

func jsonClean(b []byte) bool {
	for _, c := range b {
		if (c < 0x20 && c != '\n' && c != '\r' && c != '\t') || c == 0x7f || c >= 0x80 {
			return false
		}
	}
	return true
}

// escape is r as Go writes it in a quoted string.
func escape(r rune) string {
	switch r {
	case '\a':
		return `\a`
	case '\b':
		return `\b`
	case '\f':
		return `\f`
	case '\n':
		return `\n`
	case '\r':
		return `\r`
	case '\t':
		return `\t`
	case '\v':
		return `\v`
	}
	if r < 0x80 {
		return `\x` + hex2(byte(r))
	}
	return `\u` + hex4(r)
}

func hex2(c byte) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[c>>4], digits[c&0xf]})
}

func hex4(r rune) string {
	s := strconv.FormatInt(int64(r), 16)
	return strings.Repeat("0", 4-len(s)) + s
}
