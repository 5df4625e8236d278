package cli

import (
	"os"
	"path/filepath"
	"testing"
)

// TestDoctorWatchExcludes: the doctor counts the folders the daemon watches
// with the excludes read as .gitignore lines, as the agent's watch filter
// and the selection read them (agent.TestExcludesWatchAgreesWithSelection).
func TestDoctorWatchExcludes(t *testing.T) {
	excludes := []string{"node_modules", "*.log", "/build", "docs/tmp", "cache/"}
	folders := map[string]bool{ // folder -> left out of the watch
		"src":                   false,
		"src/logs":              false,
		"node_modules":          true,
		"node_modules/pkg":      true,
		"src/node_modules":      true,
		"src/node_modules/deep": true,
		"build":                 true,
		"src/build":             false,
		"docs":                  false,
		"docs/tmp":              true,
		"src/docs":              false,
		"src/docs/tmp":          false,
		"cache":                 true,
		"src/cache":             true,
		"old.log":               true,
	}
	for _, hank := range []bool{false, true} {
		for dir, want := range folders {
			rel := dir
			if hank {
				rel = "agentRoot/" + dir
			}
			if got := skipWatch(rel, hank, hank, excludes); got != want {
				t.Errorf("skipWatch(%s, hankweave %v) = %v, want %v", rel, hank, got, want)
			}
		}
	}

	root := t.TempDir()
	watched := 1 // the root
	for dir, out := range folders {
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		if !out {
			watched++
		}
	}
	if err := os.WriteFile(filepath.Join(root, "src", "cache.go"), nil, 0o644); err != nil { // a file, not a folder
		t.Fatal(err)
	}
	if got := watchFolders(root, root, "plain", excludes); got != watched {
		t.Errorf("watchFolders = %d, want %d", got, watched)
	}
}
