package cli

import "fmt"

// plural is "1 checkpoint", "2 checkpoints": n and the word, singular for
// one; many is the plural ("" adds an s).
func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	if many == "" {
		many = one + "s"
	}
	return fmt.Sprintf("%d %s", n, many)
}

// suffix is " "+s, or nothing for an empty s.
func suffix(s string) string {
	if s == "" {
		return ""
	}
	return " " + s
}
