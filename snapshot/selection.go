package snapshot

import (
	"fmt"
	"path"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// Selector decides which work-tree paths a checkpoint holds, by the pattern
// dialect of README.md ("What a checkpoint holds"): doublestar globs on
// slash-separated relative paths, a bare directory name matching everything
// under it, `!` patterns subtracting wherever they stand, and no positive
// pattern selecting nothing.
type Selector struct {
	pos, neg []string
	all      bool // a lone "**": skip matching
	key      string
}

// NewSelector validates and compiles patterns.
func NewSelector(patterns []string) (*Selector, error) {
	s := &Selector{}
	for _, raw := range patterns {
		p := strings.TrimSpace(raw)
		neg := strings.HasPrefix(p, "!")
		if neg {
			p = p[1:]
		}
		p = strings.TrimPrefix(p, "./")
		p = strings.TrimLeft(p, "/")
		p = strings.TrimSuffix(p, "/")
		if p == "" {
			continue
		}
		if !doublestar.ValidatePattern(p) {
			return nil, fmt.Errorf("invalid pattern %q", raw)
		}
		if neg {
			s.neg = append(s.neg, p)
		} else {
			s.pos = append(s.pos, p)
		}
	}
	s.all = len(s.neg) == 0 && len(s.pos) > 0
	for _, p := range s.pos {
		if p != "**" {
			s.all = false
		}
	}
	s.key = strings.Join(s.pos, "\x00") + "\x01" + strings.Join(s.neg, "\x00")
	return s, nil
}

// Key identifies the selection, so the store knows when its index was built
// under other patterns.
func (s *Selector) Key() string { return s.key }

// Match reports whether the selector holds the relative path p.
func (s *Selector) Match(p string) bool {
	if s.all {
		return true
	}
	return matchAny(s.pos, p) && !matchAny(s.neg, p)
}

func matchAny(patterns []string, p string) bool {
	for _, pat := range patterns {
		if doublestar.MatchUnvalidated(pat, p) {
			return true
		}
		// A pattern naming a directory holds everything under it.
		for dir := path.Dir(p); dir != "."; dir = path.Dir(dir) {
			if doublestar.MatchUnvalidated(pat, dir) {
				return true
			}
		}
	}
	return false
}

// Excluded reports whether p is never checkpointed, whatever any pattern says:
// a `.git` component, anything `.hankweave*`, and the runtime's input and
// archive folders at the top. Compared case-insensitively, component by component.
func Excluded(p string) bool {
	first := true
	for p != "" {
		var c string
		c, p, _ = strings.Cut(p, "/")
		if excludedName(c, first) {
			return true
		}
		first = false
	}
	return false
}

// excludedName is Excluded for one component of a path (top: the first),
// for a walk that has checked the folders above it already.
func excludedName(c string, top bool) bool {
	lc := strings.ToLower(c)
	if lc == ".git" || strings.HasPrefix(lc, ".hankweave") {
		return true
	}
	return top && (lc == "read_only_data_source" || lc == "rigarchive")
}

// cleanRel checks a work-tree-relative path from a caller and returns it in
// the form git prints: slash-separated, no leading "./", no "..".
func cleanRel(p string) (string, error) {
	if p == "" || strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("path %q: want a path relative to the work tree", p)
	}
	c := path.Clean(p)
	if c == "." || c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("path %q is outside the work tree", p)
	}
	return c, nil
}
