package snapshot

import (
	"strings"
)

// ExcludeGlob translates one configured exclude, written as a .gitignore
// line, into a pattern of the selection dialect (see Selector: a doublestar
// glob on slash-separated relative paths, a glob matching a folder holding
// everything under it). The selection subtracts it as "!" + ExcludeGlob(e);
// the watch filter asks ExcludeMatch, which reads the same glob, so the two
// agree.
//
//   - No slash, or only a trailing one: the name matches at any depth.
//     "node_modules" -> "**/node_modules" (node_modules, src/node_modules and
//     everything under them); "*.log" -> "**/*.log" (a.log, src/logs/run.log).
//   - A leading "/" (or "./") anchors at the top of the work tree:
//     "/build" -> "build" (build/x, not src/build/x).
//   - A slash in the middle anchors too, as in .gitignore: "docs/tmp" ->
//     "docs/tmp" (not src/docs/tmp); "**/docs/tmp" and "src/**" are unchanged.
//   - A trailing "/" matches folders only: "build/" -> "**/build/*" (what is
//     under any folder named build), so a file named build stays; the watch
//     filter leaves the folder itself out (ExcludeMatch with isDir).
//
// Surrounding spaces are trimmed; an empty pattern gives "" (nothing). A
// leading "!" (re-include, in .gitignore) is not part of this dialect: config
// validation refuses it, and ExcludeGlob returns such a pattern unchanged.
func ExcludeGlob(pattern string) string {
	g, dirOnly := excludeRule(pattern)
	if g == "" || !dirOnly {
		return g
	}
	return g + "/*"
}

// ExcludeMatch reports whether the configured exclude pattern (a .gitignore
// line, see ExcludeGlob) covers the slash-separated work-tree path rel:
// rel itself matches, or a folder above it does. isDir says rel is a folder;
// a pattern with a trailing "/" matches folders only.
func ExcludeMatch(pattern, rel string, isDir bool) bool {
	g, dirOnly := excludeRule(pattern)
	if g == "" {
		return false
	}
	if dirOnly && !isDir {
		g += "/*" // only what is under a matching folder, as the selection reads it
	}
	return matchAny([]string{g}, rel)
}

// excludeRule is the glob of an exclude before the folder-only suffix, and
// whether it matches folders only.
func excludeRule(pattern string) (glob string, dirOnly bool) {
	p := strings.TrimSpace(pattern)
	if strings.HasPrefix(p, "!") {
		return p, false
	}
	dirOnly = strings.HasSuffix(p, "/")
	p = strings.TrimRight(p, "/")
	anchored := false
	for {
		if q, ok := strings.CutPrefix(p, "./"); ok {
			p, anchored = q, true
		} else if q, ok := strings.CutPrefix(p, "/"); ok {
			p, anchored = q, true
		} else {
			break
		}
	}
	if p == "" {
		return "", false
	}
	if !anchored && !strings.Contains(p, "/") && p != "**" {
		p = "**/" + p
	}
	return p, dirOnly
}
