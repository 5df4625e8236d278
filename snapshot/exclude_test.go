package snapshot

import (
	"slices"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

func TestExcludeGlob(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"node_modules", "**/node_modules"},
		{"*.log", "**/*.log"},
		{"  *.log ", "**/*.log"},
		{".env", "**/.env"},
		{"/build", "build"},
		{"./build", "build"},
		{"/*.log", "*.log"},
		{"docs/tmp", "docs/tmp"},
		{"/docs/tmp", "docs/tmp"},
		{"docs/*.md", "docs/*.md"},
		{"**/node_modules", "**/node_modules"},
		{"**/logs/*.log", "**/logs/*.log"},
		{"src/**", "src/**"},
		{"a/**/b", "a/**/b"},
		{"**", "**"},
		{"build/", "**/build/*"},
		{"/build/", "build/*"},
		{"docs/tmp/", "docs/tmp/*"},
		{"build//", "**/build/*"},
		{`\!keep`, `**/\!keep`},
		{"", ""},
		{"/", ""},
		{"  ", ""},
	} {
		if got := ExcludeGlob(c.in); got != c.want {
			t.Errorf("ExcludeGlob(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestExcludeMatch(t *testing.T) {
	for _, c := range []struct {
		pat, rel string
		dir      bool
		want     bool
	}{
		{"node_modules", "node_modules", true, true},
		{"node_modules", "node_modules/x.js", false, true},
		{"node_modules", "src/node_modules", true, true},
		{"node_modules", "src/node_modules/a/x.js", false, true},
		{"node_modules", "src/node_modules_old/x.js", false, false},
		{"node_modules", "src/my_node_modules", true, false},
		{"*.log", "a.log", false, true},
		{"*.log", "src/logs/run.log", false, true},
		{"*.log", "src/logs", true, false},
		{"*.log", "src/logs/run.log.gz", false, false},
		{"*.log", "old.log/x", false, true}, // a folder named so: everything under it
		{"/build", "build", true, true},
		{"/build", "build/out.o", false, true},
		{"/build", "src/build", true, false},
		{"/build", "src/build/out.o", false, false},
		{"docs/tmp", "docs/tmp/a", false, true},
		{"docs/tmp", "src/docs/tmp/a", false, false},
		{"**/docs/tmp", "src/docs/tmp/a", false, true},
		{"a/**/b", "a/x/y/b/f", false, true},
		{"a/**/b", "a/b/f", false, true},
		{"a/**/b", "c/a/b/f", false, false},
		{"build/", "build", true, true},
		{"build/", "build", false, false}, // a file named build stays
		{"build/", "src/build", true, true},
		{"build/", "src/build", false, false},
		{"build/", "src/build/x/y.o", false, true},
		{"/build/", "src/build/y.o", false, false},
		{"", "x", false, false},
		{`\!keep`, "src/!keep", false, true},
	} {
		if got := ExcludeMatch(c.pat, c.rel, c.dir); got != c.want {
			t.Errorf("ExcludeMatch(%q, %q, dir=%v) = %v, want %v", c.pat, c.rel, c.dir, got, c.want)
		}
		// A file path: the selection that subtracts the exclude must say the same.
		if !c.dir && c.pat != "" {
			sel, err := NewSelector([]string{"**", "!" + ExcludeGlob(c.pat)})
			if err != nil {
				t.Fatal(err)
			}
			if sel.Match(c.rel) == c.want {
				t.Errorf("selection with exclude %q holds %q = %v, want %v", c.pat, c.rel, sel.Match(c.rel), !c.want)
			}
		}
	}
}

// TestSealExcludesAtAnyDepth seals with excludes as the agent passes them
// (each subtracted as "!" + ExcludeGlob) and checks what the checkpoint holds.
func TestSealExcludesAtAnyDepth(t *testing.T) {
	excludes := []string{"node_modules", "*.log", "/build", "docs/tmp", "cache/"}
	pats := []string{"**"}
	for _, e := range excludes {
		pats = append(pats, "!"+ExcludeGlob(e))
	}
	for _, engine := range []string{EngineGit, EngineInproc} {
		t.Run(engine, func(t *testing.T) {
			dir, st := newTestStore(t, Options{Patterns: pats, Engine: engine})
			writeTree(t, dir, map[string]string{
				"main.go":                     "a",
				"a.log":                       "b",
				"node_modules/x.js":           "c",
				"src/node_modules/x.js":       "d",
				"src/node_modules/deep/y.js":  "e",
				"src/logs/run.log":            "f",
				"src/logs/keep.txt":           "g",
				"build/out.o":                 "h",
				"src/build/out.o":             "i",
				"docs/tmp/draft.md":           "j",
				"docs/readme.md":              "k",
				"src/docs/tmp/draft.md":       "l",
				"cache/blob":                  "m",
				"src/cache/blob":              "n",
				"src/cache.go":                "o",
				"src/node_modules_notes.txt":  "p",
				"web/node_modules/.bin/tool":  "q",
				"web/node_modules/pkg/a.json": "r",
			})
			want := []string{
				"docs/readme.md",
				"main.go",
				"src/build/out.o",
				"src/cache.go",
				"src/docs/tmp/draft.md",
				"src/logs/keep.txt",
				"src/node_modules_notes.txt",
			}
			rec := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
			if got := treePaths(t, st, rec.SHA); !slices.Equal(got, want) {
				t.Fatalf("full seal holds\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
			}
			// An incremental seal naming excluded paths leaves them out as well.
			writeTree(t, dir, map[string]string{"src/node_modules/new.js": "s", "src/logs/new.log": "t", "src/new.go": "u"})
			rec = mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, Changed: []string{"src/node_modules/new.js", "src/logs/new.log", "src/new.go"}})
			want = append(want, "src/new.go")
			slices.Sort(want)
			if got := treePaths(t, st, rec.SHA); !slices.Equal(got, want) {
				t.Fatalf("incremental seal holds\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
			}
		})
	}
}
