package snapshot

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// TestLeftOut: with tmp/ left out, no seal (full, incremental by either
// engine) enters it, entries an earlier checkpoint held there leave the
// next one, and restores (whole and by path) leave it alone on disk and
// name what they left. tmp/x is a link to a folder outside the work tree by
// then: nothing there is read, written or deleted. How git is kept out is
// written down in agent/foreign_integration_test.go.
func TestLeftOut(t *testing.T) {
	for _, mode := range sealModes {
		t.Run(string(mode), func(t *testing.T) {
			dir, st := newTestStore(t, Options{})
			outside := t.TempDir()
			writeTree(t, dir, map[string]string{"a.txt": "a\n", "tmp/x/old.txt": "old\n"})
			first := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
			writeTree(t, outside, map[string]string{"secret.txt": "secret\n", "old.txt": "outside's\n"})
			removeAll(t, dir, "tmp/x")
			symlink(t, dir, outside, "tmp/x")
			writeTree(t, dir, map[string]string{"tmp/y/new.txt": "new\n", "b.txt": "b\n"})
			st.SetLeftOut(&LeftOut{Dirs: []string{"tmp"}})

			rec := sealWith(t, st, mode, []string{"b.txt", "tmp", "tmp/x", "tmp/x/secret.txt", "tmp/y/new.txt"})
			if got := treePaths(t, st, rec.SHA); !slices.Equal(got, []string{"a.txt", "b.txt"}) {
				t.Fatalf("tree: %v", got)
			}
			for _, opts := range []ckpt.Request{{Target: first.SHA, Paths: []string{"tmp"}}, {Target: first.SHA}} {
				res, err := st.Restore(context.Background(), opts)
				if err != nil {
					t.Fatalf("restore %v: %v", opts.Paths, err)
				}
				var left []string
				for _, l := range res.LeftOut {
					left = append(left, l.Path)
				}
				if !slices.Contains(left, "tmp/x/old.txt") {
					t.Errorf("restore %v: left out %v", opts.Paths, left)
				}
				if fi, err := os.Lstat(filepath.Join(dir, "tmp/x")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
					t.Errorf("restore %v: tmp/x is no longer the link: %v %v", opts.Paths, fi, err)
				}
				if b, err := os.ReadFile(filepath.Join(dir, "tmp/y/new.txt")); err != nil || string(b) != "new\n" {
					t.Errorf("restore %v: tmp/y/new.txt: %q %v", opts.Paths, b, err)
				}
			}
			ents, _ := os.ReadDir(outside)
			if len(ents) != 2 {
				t.Errorf("the folder outside now holds %d entries", len(ents))
			}
			if b, _ := os.ReadFile(filepath.Join(outside, "old.txt")); string(b) != "outside's\n" {
				t.Errorf("outside's old.txt: %q", b)
			}
			if out := gitOut(t, st, strings.NewReader("secret\n"), "hash-object", "--stdin"); len(out) > 0 {
				if _, err := st.git.Run(context.Background(), nil, "cat-file", "-e", strings.TrimSpace(string(out))); err == nil {
					t.Error("the file behind the link was sealed")
				}
			}
		})
	}
}

// TestEscapeExclude: a left-out folder's pattern matches that folder only.
func TestEscapeExclude(t *testing.T) {
	for in, want := range map[string]string{
		"tmp": "tmp", "a*b": `a\*b`, "!x/#y": `\!x/\#y`, "q?[z]": `q\?\[z\]`, "new\nline": "new?line", "sp ace": `sp\ ace`, `b\s`: `b\\s`,
	} {
		if got := escapeExclude(in); got != want {
			t.Errorf("escapeExclude(%q) = %q, want %q", in, got, want)
		}
	}
}
