package workspace

import (
	"path"
	"testing"

	"github.com/cairn-dev/cairn/agent/config"

	"github.com/cairn-dev/cairn/snapshot"
)

// excludeTree is a work tree of files, with what the excludes of
// TestExcludesWatchAgreesWithSelection must leave out of a checkpoint.
var excludeTree = map[string]bool{ // path -> excluded
	"main.go":                    false,
	"a.log":                      true,
	"node_modules/x.js":          true,
	"src/node_modules/x.js":      true,
	"src/node_modules/deep/y.js": true,
	"src/node_modules_notes.txt": false,
	"src/logs/run.log":           true,
	"src/logs/keep.txt":          false,
	"build/out.o":                true,
	"src/build/out.o":            false,
	"docs/tmp/draft.md":          true,
	"src/docs/tmp/draft.md":      false,
	"docs/readme.md":             false,
	"cache/blob":                 true,
	"src/cache/deep/blob":        true,
	"src/cache.go":               false,
}

var excludeSettings = []string{"node_modules", "*.log", "/build", "docs/tmp", "cache/"}

// TestExcludesWatchAgreesWithSelection: the configured excludes follow
// .gitignore semantics in the selection a seal uses and in the watch filter,
// and the two agree: a file is out of the checkpoint exactly when the watch
// leaves it (or a folder above it) out.
func TestExcludesWatchAgreesWithSelection(t *testing.T) {
	w := &Workspace{set: config.Settings{Excludes: excludeSettings}}
	sel, err := snapshot.NewSelector(w.Patterns([]string{"**"}))
	if err != nil {
		t.Fatal(err)
	}
	hank := &hankLayout{w: w, workTree: "/x/agentRoot"} // a Hankweave execution directory with agentRoot/
	for p, excluded := range excludeTree {
		if got := !sel.Match(p); got != excluded {
			t.Errorf("selection: %s excluded = %v, want %v", p, got, excluded)
		}
		if got := watchSkips(w.skip, p); got != excluded {
			t.Errorf("watch: %s left out = %v, want %v", p, got, excluded)
		}
		if got := watchSkips(hank.skip, "agentRoot/"+p); got != excluded {
			t.Errorf("hankweave watch: agentRoot/%s left out = %v, want %v", p, got, excluded)
		}
	}
	// Folders the watch leaves out, and ones it keeps.
	for dir, want := range map[string]bool{
		"node_modules": true, "src/node_modules": true, "src/logs": false,
		"build": true, "src/build": false, "docs/tmp": true, "src/docs/tmp": false,
		"cache": true, "src/cache": true, "src": false,
	} {
		if got := w.skip(dir, true); got != want {
			t.Errorf("watch: folder %s left out = %v, want %v", dir, got, want)
		}
	}
	// A folder-only exclude ("cache/") keeps a file of that name.
	if w.skip("src/cache", false) || !sel.Match("src/cache") {
		t.Errorf("a file named cache is left out by the folder-only exclude cache/")
	}
}

// watchSkips reports whether a watch filter leaves the file p out, itself
// or through a folder above it (the watcher does not enter a skipped folder).
func watchSkips(skip func(string, bool) bool, p string) bool {
	for dir := path.Dir(p); dir != "."; dir = path.Dir(dir) {
		if skip(dir, true) {
			return true
		}
	}
	return skip(p, false)
}
