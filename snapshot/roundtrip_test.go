//go:build unix

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

// The round trip of a checkpoint: seal, change the disk, seal again — by a full
// reconcile and by an incremental seal of the touched paths — and the tree in
// git equals the disk byte for byte and mode for mode, and both ways give the
// same tree.

// rtBase is the work tree every round-trip case starts from.
var rtBase = map[string]string{
	"a.txt":              "hello\n",
	"b.txt":              "bee\n",
	"dir/c.txt":          "see\n",
	"dir/sub/d.txt":      "dee\n",
	"tree/x/1.txt":       "one\n",
	"tree/x/2.txt":       "two\n",
	"tree/y/3.txt":       "three\n",
	"file2dir":           "a file that becomes a folder\n",
	"dir2file/inner.txt": "a folder that becomes a file\n",
	"real/f.txt":         "behind a symlink too\n",
}

// binary holds NULs, every high byte, lone CRs and CRLFs: anything a text
// filter or an eol conversion would change.
var binary = func() string {
	b := []byte("\x00\x00PK\x03\x04\r\n\r\x00\n")
	for i := 0; i < 256; i++ {
		b = append(b, byte(i), byte(255-i))
	}
	return string(append(b, 0xff, 0xfe, 0x00))
}()

type rtCase struct {
	name  string
	setup func(t *testing.T, dir string) // beyond rtBase, before the first seal
	// change alters the disk and returns the paths a watcher would report:
	// touched files, deleted ones, and the folders it sees created or removed.
	change func(t *testing.T, dir string) []string
	// added, changed, removed: what the second checkpoint records.
	added, changed, removed int
}

var rtCases = []rtCase{
	{name: "edit same size", change: func(t *testing.T, d string) []string {
		writeFile(t, d, "a.txt", "jello\n", 0o644)
		return []string{"a.txt"}
	}, changed: 1},
	{name: "edit grows nested", change: func(t *testing.T, d string) []string {
		writeFile(t, d, "dir/sub/d.txt", strings.Repeat("longer contents\n", 100), 0o644)
		return []string{"dir/sub/d.txt"}
	}, changed: 1},
	{name: "atomic save over the file", change: func(t *testing.T, d string) []string {
		writeFile(t, d, "a.txt.tmp", "saved by rename\n", 0o644)
		rename(t, d, "a.txt.tmp", "a.txt")
		return []string{"a.txt.tmp", "a.txt"}
	}, changed: 1},
	{name: "add", change: func(t *testing.T, d string) []string {
		writeFile(t, d, "new.txt", "new\n", 0o644)
		return []string{"new.txt"}
	}, added: 1},
	{name: "add in existing folder", change: func(t *testing.T, d string) []string {
		writeFile(t, d, "dir/sub/new.txt", "new\n", 0o644)
		return []string{"dir/sub/new.txt"}
	}, added: 1},
	{name: "delete", change: func(t *testing.T, d string) []string {
		removeAll(t, d, "b.txt")
		return []string{"b.txt"}
	}, removed: 1},
	{name: "delete nested", change: func(t *testing.T, d string) []string {
		removeAll(t, d, "dir/sub/d.txt")
		return []string{"dir/sub/d.txt"}
	}, removed: 1},
	{name: "delete reported by its folder", change: func(t *testing.T, d string) []string {
		removeAll(t, d, "dir/c.txt")
		return []string{"dir"}
	}, removed: 1},
	{name: "rename", change: func(t *testing.T, d string) []string {
		rename(t, d, "b.txt", "renamed.txt")
		return []string{"b.txt", "renamed.txt"}
	}, added: 1, removed: 1},
	{name: "rename into new folder", change: func(t *testing.T, d string) []string {
		rename(t, d, "dir/c.txt", "other/place/c.txt")
		return []string{"dir/c.txt", "other", "other/place", "other/place/c.txt"}
	}, added: 1, removed: 1},
	{name: "rename folder", change: func(t *testing.T, d string) []string {
		rename(t, d, "tree", "grove")
		return []string{"tree", "grove"}
	}, added: 3, removed: 3},
	{name: "chmod +x", change: func(t *testing.T, d string) []string {
		chmod(t, d, "a.txt", 0o755)
		return []string{"a.txt"}
	}, changed: 1},
	{name: "chmod u+x only", change: func(t *testing.T, d string) []string {
		chmod(t, d, "a.txt", 0o744)
		return []string{"a.txt"}
	}, changed: 1},
	{name: "chmod g+x o+x is not executable to git", change: func(t *testing.T, d string) []string {
		chmod(t, d, "a.txt", 0o655)
		return []string{"a.txt"}
	}},
	{name: "chmod -x", setup: func(t *testing.T, d string) {
		writeFile(t, d, "run.sh", "#!/bin/sh\necho hi\n", 0o755)
	}, change: func(t *testing.T, d string) []string {
		chmod(t, d, "run.sh", 0o644)
		return []string{"run.sh"}
	}, changed: 1},
	{name: "chmod +x and edit", change: func(t *testing.T, d string) []string {
		writeFile(t, d, "b.txt", "#!/bin/sh\n", 0o755)
		return []string{"b.txt"}
	}, changed: 1},
	{name: "new empty file", change: func(t *testing.T, d string) []string {
		writeFile(t, d, "empty", "", 0o644)
		return []string{"empty"}
	}, added: 1},
	{name: "truncate to empty", change: func(t *testing.T, d string) []string {
		writeFile(t, d, "a.txt", "", 0o644)
		return []string{"a.txt"}
	}, changed: 1},
	{name: "empty file gets contents", setup: func(t *testing.T, d string) {
		writeFile(t, d, "empty", "", 0o644)
	}, change: func(t *testing.T, d string) []string {
		writeFile(t, d, "empty", "x", 0o644)
		return []string{"empty"}
	}, changed: 1},
	{name: "new binary", change: func(t *testing.T, d string) []string {
		writeFile(t, d, "bin/blob.dat", binary, 0o644)
		return []string{"bin", "bin/blob.dat"}
	}, added: 1},
	{name: "text becomes binary", change: func(t *testing.T, d string) []string {
		writeFile(t, d, "a.txt", binary, 0o644)
		return []string{"a.txt"}
	}, changed: 1},
	{name: "gitattributes never filter the store", change: func(t *testing.T, d string) []string {
		writeFile(t, d, ".gitattributes", "* text=auto eol=crlf\n*.txt text eol=crlf ident\n*.dat filter=lfs diff=lfs merge=lfs\n", 0o644)
		writeFile(t, d, "crlf.txt", "lf only\nline $Id$\n", 0o644)
		writeFile(t, d, "mixed.txt", "a\r\nb\nc\r", 0o644)
		writeFile(t, d, "blob.dat", binary, 0o644)
		return []string{".gitattributes", "crlf.txt", "mixed.txt", "blob.dat"}
	}, added: 4},
	{name: "file becomes folder", change: func(t *testing.T, d string) []string {
		removeAll(t, d, "file2dir")
		writeFile(t, d, "file2dir/inner.txt", "now inside\n", 0o644)
		return []string{"file2dir", "file2dir/inner.txt"}
	}, added: 1, removed: 1},
	{name: "file becomes folder reported by folder", change: func(t *testing.T, d string) []string {
		removeAll(t, d, "file2dir")
		writeFile(t, d, "file2dir/inner.txt", "now inside\n", 0o644)
		return []string{"file2dir"}
	}, added: 1, removed: 1},
	{name: "folder becomes file", change: func(t *testing.T, d string) []string {
		removeAll(t, d, "dir2file")
		writeFile(t, d, "dir2file", "now a file\n", 0o644)
		return []string{"dir2file/inner.txt", "dir2file"}
	}, added: 1, removed: 1},
	{name: "folder becomes file reported by name", change: func(t *testing.T, d string) []string {
		removeAll(t, d, "dir2file")
		writeFile(t, d, "dir2file", "now a file\n", 0o644)
		return []string{"dir2file"}
	}, added: 1, removed: 1},
	{name: "new nested tree reported by its top", change: func(t *testing.T, d string) []string {
		writeTree(t, d, map[string]string{
			"new/top.txt": "t", "new/a/x.txt": "x", "new/a/b/c/deep.txt": "deep", "new/a/b/c/d/e/f/g.bin": binary,
		})
		return []string{"new"}
	}, added: 4},
	{name: "new nested tree reported in full", change: func(t *testing.T, d string) []string {
		writeTree(t, d, map[string]string{"new/top.txt": "t", "new/a/x.txt": "x", "new/a/b/c/deep.txt": "deep"})
		return []string{"new", "new/top.txt", "new/a", "new/a/x.txt", "new/a/b", "new/a/b/c", "new/a/b/c/deep.txt"}
	}, added: 3},
	{name: "delete tree reported by its top", change: func(t *testing.T, d string) []string {
		removeAll(t, d, "tree")
		return []string{"tree"}
	}, removed: 3},
	{name: "delete tree reported in full", change: func(t *testing.T, d string) []string {
		removeAll(t, d, "tree")
		return []string{"tree/x/1.txt", "tree/x/2.txt", "tree/x", "tree/y/3.txt", "tree/y", "tree"}
	}, removed: 3},
	{name: "delete a subtree", change: func(t *testing.T, d string) []string {
		removeAll(t, d, "tree/x")
		return []string{"tree/x/1.txt", "tree/x/2.txt", "tree/x"}
	}, removed: 2},
	{name: "symlinks are not checkpointed", change: func(t *testing.T, d string) []string {
		symlink(t, d, "a.txt", "link.txt")
		symlink(t, d, "nowhere", "dangling")
		symlink(t, d, "/etc", "abs")
		symlink(t, d, "real", "linkdir")
		return []string{"link.txt", "dangling", "abs", "linkdir"}
	}},
	{name: "tracked file becomes symlink", change: func(t *testing.T, d string) []string {
		removeAll(t, d, "b.txt")
		symlink(t, d, "a.txt", "b.txt")
		return []string{"b.txt"}
	}, removed: 1},
	{name: "files under a symlinked folder", setup: func(t *testing.T, d string) {
		symlink(t, d, "real", "linkdir")
	}, change: func(t *testing.T, d string) []string {
		writeFile(t, d, "real/g.txt", "g\n", 0o644)
		// A watcher of the link's target may report the path under the link.
		return []string{"linkdir/g.txt", "linkdir", "real/g.txt"}
	}, added: 1},
	{name: "tracked folder becomes symlink", change: func(t *testing.T, d string) []string {
		removeAll(t, d, "tree/x")
		symlink(t, d, "../real", "tree/x")
		return []string{"tree/x"}
	}, removed: 2},
	{name: "tracked folder becomes symlink reported in full", change: func(t *testing.T, d string) []string {
		removeAll(t, d, "tree/x")
		symlink(t, d, "../real", "tree/x")
		return []string{"tree/x/1.txt", "tree/x/2.txt", "tree/x"}
	}, removed: 2},
	{name: "symlink becomes file", setup: func(t *testing.T, d string) {
		symlink(t, d, "a.txt", "link.txt")
	}, change: func(t *testing.T, d string) []string {
		removeAll(t, d, "link.txt")
		writeFile(t, d, "link.txt", "a file now\n", 0o644)
		return []string{"link.txt"}
	}, added: 1},
	{name: "nothing changed", change: func(t *testing.T, d string) []string {
		return nil
	}},
	{name: "many changes at once", change: func(t *testing.T, d string) []string {
		writeFile(t, d, "a.txt", "edited\n", 0o755)
		removeAll(t, d, "b.txt")
		rename(t, d, "dir/c.txt", "dir/c2.txt")
		removeAll(t, d, "tree/y")
		writeTree(t, d, map[string]string{"fresh/1": "1", "fresh/2": "2"})
		writeFile(t, d, "fresh/bin", binary, 0o700)
		return []string{"a.txt", "b.txt", "dir/c.txt", "dir/c2.txt", "tree/y/3.txt", "tree/y", "fresh"}
	}, added: 4, changed: 1, removed: 3},
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	for _, tc := range rtCases {
		for _, mode := range sealModes {
			t.Run(tc.name+"/"+string(mode), func(t *testing.T) {
				t.Parallel()
				dir, st := newTestStore(t, Options{})
				writeTree(t, dir, rtBase)
				if tc.setup != nil {
					tc.setup(t, dir)
				}
				first := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
				requireOK(t, first)
				assertTreeMatchesDisk(t, st, first.SHA, regularFiles(t, dir))

				touched := tc.change(t, dir)
				second := sealWith(t, st, mode, touched)
				requireOK(t, second)
				if second.Parent != first.SHA {
					t.Errorf("second checkpoint's parent %s, want the first %s", second.Parent, first.SHA)
				}
				assertTreeMatchesDisk(t, st, second.SHA, regularFiles(t, dir))
				requireCounts(t, second, tc.added, tc.changed, tc.removed)

				assertReconcileAgrees(t, st, dir, second)
			})
		}
	}
}

// assertReconcileAgrees checks that the disk as sealed by rec is the tree a
// full reconcile finds (recording no change) and the tree a fresh store's
// first seal of the same folder finds.
func assertReconcileAgrees(t *testing.T, st *Store, dir string, rec ckpt.Record) {
	t.Helper()
	want := treeOf(t, st, rec.SHA)
	again := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
	requireOK(t, again)
	if got := treeOf(t, st, again.SHA); got != want {
		t.Errorf("full reconcile after %s: tree %s, want the same tree %s; diff:\n%s",
			rec.ID, got, want, gitOut(t, st, nil, "diff-tree", "-r", "--name-status", rec.SHA, again.SHA))
	}
	requireCounts(t, again, 0, 0, 0)

	fresh := openTestStore(t, dir, Options{Patterns: st.opts.Patterns, MaxFileSize: st.opts.MaxFileSize})
	frec := mustSeal(t, fresh, SealRequest{Kind: ckpt.KindManual})
	if got := treeOf(t, fresh, frec.SHA); got != want {
		t.Errorf("a fresh store's first seal of the same disk: tree %s, want %s (paths %q, want %q)",
			got, want, treePaths(t, fresh, frec.SHA), treePaths(t, st, rec.SHA))
	}
}

// A checkpoint with nothing changed is still sealed: a new commit whose
// parent is the previous checkpoint and whose tree is the same.
func TestEmptyCheckpoint(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		changed []string
	}{
		{"full", nil},
		{"incremental empty set", []string{}},
		{"incremental unchanged file", []string{"a.txt"}},
		{"incremental unchanged folder", []string{"dir"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir, st := newTestStore(t, Options{})
			writeTree(t, dir, map[string]string{"a.txt": "a", "dir/b.txt": "b"})
			first := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
			second := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, Changed: tc.changed})
			requireOK(t, second)
			if second.SHA == first.SHA {
				t.Fatalf("empty checkpoint not sealed: same commit %s", first.SHA)
			}
			if second.Parent != first.SHA {
				t.Errorf("parent %s, want %s", second.Parent, first.SHA)
			}
			// A checkpoint on its own ref is a root commit naming its parent in a trailer.
			if got := strings.TrimSpace(string(gitOut(t, st, nil, "show", "-s", "--format=%P|%(trailers:key=Cairn-Parent,valueonly)", second.SHA))); got != "|"+first.SHA {
				t.Errorf("commit's parents|Cairn-Parent %q, want %q", got, "|"+first.SHA)
			}
			if a, b := treeOf(t, st, first.SHA), treeOf(t, st, second.SHA); a != b {
				t.Errorf("tree changed with nothing on disk changed: %s -> %s", a, b)
			}
			requireCounts(t, second, 0, 0, 0)
			assertTreeMatchesDisk(t, st, second.SHA, []string{"a.txt", "dir/b.txt"})
			if recs := st.Records(); len(recs) != 2 || recs[1].SHA != second.SHA {
				t.Errorf("ledger holds %d records, last %+v; want 2 ending in %s", len(recs), recs[len(recs)-1], second.SHA)
			}
		})
	}
}

// forModes runs body once per seal mode, each on its own store.
func forModes(t *testing.T, body func(t *testing.T, mode sealMode)) {
	t.Helper()
	for _, mode := range sealModes {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			body(t, mode)
		})
	}
}

// A git repository cloned inside the work tree is checkpointed as ordinary
// files: its .git is left out, no gitlink is ever recorded, and the
// repository itself is never touched.
func TestNestedRepository(t *testing.T) {
	t.Parallel()
	forModes(t, func(t *testing.T, mode sealMode) {
		dir, st := newTestStore(t, Options{})
		writeFile(t, dir, "top.txt", "top\n", 0o644)
		makeRepo := func(rel string) string {
			writeTree(t, dir, map[string]string{
				rel + "/README":      "nested readme\n",
				rel + "/src/main.go": "package main\n",
			})
			repo := filepath.Join(dir, rel)
			hostGit(t, repo, "init", "-q", "-b", "trunk")
			hostGit(t, repo, "add", "-A")
			hostGit(t, repo, "commit", "-q", "-m", "fixture")
			writeFile(t, dir, rel+"/untracked.txt", "not committed in the nested repo\n", 0o644)
			return filepath.Join(repo, ".git")
		}
		// One repository exists before the first seal, one is cloned in later.
		gitA := makeRepo("vendor/a")
		beforeA := hashDir(t, gitA)

		first := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
		requireOK(t, first)
		assertTreeMatchesDisk(t, st, first.SHA, []string{
			"top.txt", "vendor/a/README", "vendor/a/src/main.go", "vendor/a/untracked.txt",
		})

		if hashDir(t, gitA) != beforeA {
			t.Errorf("the first seal changed a nested repository's .git")
		}
		gitB := makeRepo("b")
		// A repository whose .git is a file (worktree or --separate-git-dir).
		writeFile(t, dir, "c/file.txt", "c\n", 0o644)
		hostGit(t, filepath.Join(dir, "c"), "init", "-q", "--separate-git-dir="+filepath.Join(t.TempDir(), "c.git"))
		hostGit(t, filepath.Join(dir, "c"), "add", "-A")
		hostGit(t, filepath.Join(dir, "c"), "commit", "-q", "-m", "fixture")
		writeFile(t, dir, "vendor/a/README", "edited in the nested repo\n", 0o755)
		writeFile(t, dir, "vendor/a/new.txt", "new in the nested repo\n", 0o644)
		beforeA, beforeB := hashDir(t, gitA), hashDir(t, gitB)

		second := sealWith(t, st, mode, []string{"b", "c", "vendor/a/README", "vendor/a/new.txt"})
		requireOK(t, second)
		want := []string{
			"top.txt", "vendor/a/README", "vendor/a/src/main.go", "vendor/a/untracked.txt", "vendor/a/new.txt",
			"b/README", "b/src/main.go", "b/untracked.txt", "c/file.txt",
		}
		assertTreeMatchesDisk(t, st, second.SHA, want)
		requireCounts(t, second, 5, 1, 0)
		assertReconcileAgrees(t, st, dir, second)

		if hashDir(t, gitA) != beforeA || hashDir(t, gitB) != beforeB {
			t.Errorf("a nested repository's .git changed while cairn sealed")
		}
		for _, repo := range []string{"vendor/a", "b"} {
			// Its own view is intact: HEAD and a clean index for what it committed.
			out := hostGit(t, filepath.Join(dir, repo), "status", "--porcelain", "--untracked-files=no")
			if repo == "b" && out != "" {
				t.Errorf("nested repository %s: status %q, want clean", repo, out)
			}
		}
	})
}

// Every nested .gitignore applies, read live at each seal.
func TestGitignore(t *testing.T) {
	t.Parallel()
	setup := func(t *testing.T) (string, *Store, ckpt.Record) {
		dir, st := newTestStore(t, Options{})
		writeTree(t, dir, map[string]string{
			".gitignore":              "*.log\n/build/\n",
			"a.txt":                   "a",
			"a.log":                   "ignored by the root",
			"build/out.bin":           "ignored: anchored at the top",
			"sub/build/kept.bin":      "kept: /build/ is anchored",
			"sub/.gitignore":          "*.tmp\n!keep.tmp\n",
			"sub/a.tmp":               "ignored by sub",
			"sub/keep.tmp":            "re-included by sub",
			"sub/secret.txt":          "kept: deeper rule only",
			"sub/deeper/.gitignore":   "secret*\n",
			"sub/deeper/secret.txt":   "ignored by deeper",
			"sub/deeper/x.log":        "ignored by the root",
			"sub/deeper/ok.txt":       "kept",
			"notes/draft.txt":         "soon ignored",
			"notes/final.txt":         "kept",
			"tmpnot/a.tmp":            "kept: sub's rule is sub's",
			"sub/deeper/nested/x.tmp": "ignored by sub, two levels up",
		})
		first := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
		requireOK(t, first)
		assertTreeMatchesDisk(t, st, first.SHA, []string{
			".gitignore", "a.txt", "sub/build/kept.bin", "sub/.gitignore", "sub/keep.tmp", "sub/secret.txt",
			"sub/deeper/.gitignore", "sub/deeper/ok.txt", "notes/draft.txt", "notes/final.txt", "tmpnot/a.tmp",
		})
		return dir, st, first
	}
	t.Run("new nested rule drops a tracked file", func(t *testing.T) {
		t.Parallel()
		forModes(t, func(t *testing.T, mode sealMode) {
			dir, st, first := setup(t)
			writeFile(t, dir, "notes/.gitignore", "draft.txt\n", 0o644)
			rec := sealWith(t, st, mode, []string{"notes/.gitignore"})
			requireOK(t, rec)
			want := setMinus(append(treePaths(t, st, first.SHA), "notes/.gitignore"), []string{"notes/draft.txt"})
			assertTreeMatchesDisk(t, st, rec.SHA, want)
			requireCounts(t, rec, 1, 0, 1)
			assertReconcileAgrees(t, st, dir, rec)
		})
	})
	t.Run("edited root rule drops tracked files", func(t *testing.T) {
		t.Parallel()
		forModes(t, func(t *testing.T, mode sealMode) {
			dir, st, first := setup(t)
			writeFile(t, dir, ".gitignore", "*.log\n/build/\nfinal.txt\n", 0o644)
			rec := sealWith(t, st, mode, []string{".gitignore"})
			requireOK(t, rec)
			want := setMinus(treePaths(t, st, first.SHA), []string{"notes/final.txt"})
			assertTreeMatchesDisk(t, st, rec.SHA, want)
			requireCounts(t, rec, 0, 1, 1)
			assertReconcileAgrees(t, st, dir, rec)
		})
	})
	t.Run("ignored files stay out when named", func(t *testing.T) {
		t.Parallel()
		forModes(t, func(t *testing.T, mode sealMode) {
			dir, st, first := setup(t)
			writeFile(t, dir, "sub/b.tmp", "ignored", 0o644)
			writeFile(t, dir, "sub/deeper/secret2.txt", "ignored", 0o644)
			writeFile(t, dir, "build/more.bin", "ignored", 0o644)
			writeFile(t, dir, "sub/keep2.txt", "kept", 0o644)
			rec := sealWith(t, st, mode, []string{"sub/b.tmp", "sub/deeper/secret2.txt", "build", "build/more.bin", "sub/keep2.txt"})
			requireOK(t, rec)
			assertTreeMatchesDisk(t, st, rec.SHA, append(treePaths(t, st, first.SHA), "sub/keep2.txt"))
			requireCounts(t, rec, 1, 0, 0)
			assertReconcileAgrees(t, st, dir, rec)
		})
	})
	t.Run("removed rule lets files in", func(t *testing.T) {
		t.Parallel()
		forModes(t, func(t *testing.T, mode sealMode) {
			dir, st, first := setup(t)
			removeAll(t, dir, "sub/deeper/.gitignore")
			rec := sealWith(t, st, mode, []string{"sub/deeper/.gitignore"})
			requireOK(t, rec)
			want := append(setMinus(treePaths(t, st, first.SHA), []string{"sub/deeper/.gitignore"}), "sub/deeper/secret.txt")
			assertTreeMatchesDisk(t, st, rec.SHA, want)
			requireCounts(t, rec, 1, 0, 1)
			assertReconcileAgrees(t, st, dir, rec)
		})
	})
}

// Mandatory exclusions hold whatever any rule or pattern says.
func TestMandatoryExclusions(t *testing.T) {
	t.Parallel()
	excluded := map[string]string{
		".hankweave/state.json":             "runtime state",
		".hankweave.backup-2024/x":          "runtime backup",
		".hankweaveignore":                  "a .hankweave* file",
		".HankWeave/q":                      "case-folded",
		"sub/.hankweave-cache/y":            ".hankweave* anywhere",
		"read_only_data_source/in.csv":      "input",
		"Read_Only_Data_Source/w":           "case-folded input",
		"rigArchive/old.tar":                "archive",
		"RigArchive/z":                      "case-folded archive",
		"rigarchive/deep/er/z":              "lower-case archive",
		"a/.git/config":                     "a .git folder that is not a repository",
		"b/.GIT/HEAD":                       "case-folded .git",
		"c/d/.git":                          "a .git file",
		"e/.Git/objects/info/x":             "case-folded, deep",
		"sub/.hankweave/checkpoints/config": "a runtime folder below the top",
	}
	kept := map[string]string{
		"a/ok.txt":                          "beside a .git folder",
		".github/workflows/ci.yml":          ".github is not .git",
		".gitkeep":                          "nor is .gitkeep",
		".gitignore.bak":                    "nor this",
		"x.git/y":                           "nor x.git",
		"hankweave/z":                       "no dot",
		"nested/rigArchive/keep.txt":        "only the top-level archive is excluded",
		"nested/read_only_data_source/keep": "only the top-level input is excluded",
		"rigArchive.txt":                    "a file named like the folder, with a suffix",
		"read_only_data_source_2/x":         "another folder",
	}
	for _, pc := range []struct {
		name     string
		patterns []string
	}{
		{"default patterns", nil},
		{"patterns naming them", []string{"**", ".hankweave", "rigArchive", "RigArchive/**", "read_only_data_source/**", "**/.git/**", ".git", "**/.hankweave*"}},
	} {
		t.Run(pc.name, func(t *testing.T) {
			t.Parallel()
			forModes(t, func(t *testing.T, mode sealMode) {
				dir, st := newTestStore(t, Options{Patterns: pc.patterns})
				// The workspace is itself a git repository: its .git is left out too.
				writeFile(t, dir, "top.txt", "top\n", 0o644)
				hostGit(t, dir, "init", "-q")
				hostGit(t, dir, "add", "top.txt")
				hostGit(t, dir, "commit", "-q", "-m", "own history")
				writeTree(t, dir, excluded)
				writeTree(t, dir, kept)
				want := []string{"top.txt"}
				for p := range kept {
					want = append(want, p)
				}
				first := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
				requireOK(t, first)
				assertTreeMatchesDisk(t, st, first.SHA, want)

				// New files inside every excluded place, named one by one.
				var touched []string
				for p := range excluded {
					np := p + ".new"
					if strings.HasSuffix(p, ".git") {
						np = p // rewrite the .git file
					}
					writeFile(t, dir, np, "new", 0o644)
					touched = append(touched, np)
					if parent := filepath.ToSlash(filepath.Dir(np)); parent != "." {
						touched = append(touched, parent)
					}
				}
				touched = append(touched, ".git", ".git/index", ".git/HEAD")
				writeFile(t, dir, ".github/new.yml", "kept", 0o644)
				touched = append(touched, ".github/new.yml")
				rec := sealWith(t, st, mode, touched)
				requireOK(t, rec)
				assertTreeMatchesDisk(t, st, rec.SHA, append(want, ".github/new.yml"))
				requireCounts(t, rec, 1, 0, 0)
				assertReconcileAgrees(t, st, dir, rec)
			})
		})
	}
}

// The pattern dialect (docs/operating.md, "What a checkpoint holds"): doublestar
// globs on relative paths, a bare folder name holding everything under it,
// `!` subtracting wherever it stands, no positive pattern holding nothing.
func TestPatterns(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		"README.md":         "top-level markdown",
		"secret.md":         "subtracted",
		"notes.txt":         "not selected",
		"docs/guide.txt":    "under a bare folder name",
		"docs/deep/x.bin":   "deeper under it",
		"docs/secret.md":    "!secret.md names the top-level file only",
		"sub/y.md":          "*.md does not cross a slash",
		"docsx/z.txt":       "a bare name is not a prefix",
		"sub/docs/q.txt":    "docs names the top-level folder only",
		"CHANGELOG.md.orig": "not .md",
	}
	selected := []string{"README.md", "docs/guide.txt", "docs/deep/x.bin", "docs/secret.md"}
	for _, pc := range []struct {
		name     string
		patterns []string
		want     []string
	}{
		{"spec example", []string{"docs", "*.md", "!secret.md"}, selected},
		{"negation first", []string{"!secret.md", "docs", "*.md"}, selected},
		{"trailing slash and ./", []string{"./docs/", "*.md", "!secret.md"}, selected},
		{"no positive pattern", []string{"!secret.md"}, nil},
		{"empty list", []string{}, nil},
		{"doublestar", []string{"**/*.md", "!**/secret.md"}, []string{"README.md", "sub/y.md"}},
	} {
		t.Run(pc.name, func(t *testing.T) {
			t.Parallel()
			forModes(t, func(t *testing.T, mode sealMode) {
				dir, st := newTestStore(t, Options{Patterns: pc.patterns})
				writeTree(t, dir, files)
				first := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
				requireOK(t, first)
				assertTreeMatchesDisk(t, st, first.SHA, pc.want)

				// Changes in and out of the selection.
				writeFile(t, dir, "docs/new.txt", "in", 0o644)
				writeFile(t, dir, "other.txt", "out", 0o644)
				writeFile(t, dir, "secret.md", "still out", 0o644)
				writeFile(t, dir, "sub/z.md", "in for doublestar", 0o644)
				rec := sealWith(t, st, mode, []string{"docs/new.txt", "other.txt", "secret.md", "sub/z.md"})
				requireOK(t, rec)
				want := slices.Clone(pc.want)
				sel, err := NewSelector(pc.patterns)
				if err != nil {
					t.Fatal(err)
				}
				for _, p := range []string{"docs/new.txt", "sub/z.md"} {
					if sel.Match(p) {
						want = append(want, p)
					}
				}
				assertTreeMatchesDisk(t, st, rec.SHA, want)
				assertReconcileAgrees(t, st, dir, rec)
			})
		})
	}
	// Patterns given with a seal re-select: an incremental seal under other
	// patterns than the index was staged under holds the new selection.
	t.Run("request patterns reselect", func(t *testing.T) {
		t.Parallel()
		forModes(t, func(t *testing.T, mode sealMode) {
			dir, st := newTestStore(t, Options{})
			writeTree(t, dir, files)
			first := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
			assertTreeMatchesDisk(t, st, first.SHA, regularFiles(t, dir))
			req := SealRequest{Kind: ckpt.KindManual, Patterns: []string{"docs", "*.md", "!secret.md"}}
			if mode == modeIncremental {
				req.Changed = []string{}
			}
			rec := mustSeal(t, st, req)
			requireOK(t, rec)
			assertTreeMatchesDisk(t, st, rec.SHA, selected)
			// Back under the store's patterns: a reselection, which git
			// reconciles whatever the engine.
			backMode := mode
			if mode == modeInproc {
				backMode = modeIncremental
			}
			back := sealWith(t, st, backMode, nil)
			assertTreeMatchesDisk(t, st, back.SHA, regularFiles(t, dir))
		})
	})
}

// Files larger than Options.MaxFileSize are skipped and named, never silently.
func TestMaxFileSize(t *testing.T) {
	t.Parallel()
	forModes(t, func(t *testing.T, mode sealMode) {
		const limit = 16
		dir, st := newTestStore(t, Options{MaxFileSize: limit})
		writeTree(t, dir, map[string]string{
			"exact.txt":   strings.Repeat("x", limit),
			"big.bin":     strings.Repeat("y", limit+1),
			"grow.txt":    "small",
			"sub/big.bin": strings.Repeat("z", 1000),
		})
		first := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
		requireOK(t, first)
		assertTreeMatchesDisk(t, st, first.SHA, []string{"exact.txt", "grow.txt"})
		if got := issuePaths(first.Skipped); !slices.Equal(got, []string{"big.bin", "sub/big.bin"}) {
			t.Errorf("first seal skipped %q, want big.bin and sub/big.bin", first.Skipped)
		}

		writeFile(t, dir, "grow.txt", strings.Repeat("g", 100), 0o644)
		writeFile(t, dir, "big.bin", "now small", 0o644)
		writeFile(t, dir, "new-big.bin", strings.Repeat("n", 17), 0o644)
		rec := sealWith(t, st, mode, []string{"grow.txt", "big.bin", "new-big.bin"})
		requireOK(t, rec)
		assertTreeMatchesDisk(t, st, rec.SHA, []string{"exact.txt", "big.bin"})
		requireCounts(t, rec, 1, 0, 1)
		for _, p := range []string{"grow.txt", "new-big.bin"} {
			if !slices.Contains(issuePaths(rec.Skipped), p) {
				t.Errorf("second seal skipped %q, want it to name %s", rec.Skipped, p)
			}
		}
		for _, s := range rec.Skipped {
			if s.Reason == "" {
				t.Errorf("skipped %s with no reason", s.Path)
			}
		}
		assertReconcileAgrees(t, st, dir, rec)
	})
}

// The work tree of a plain store is the folder's real path; a workspace
// reached through a symlink still holds its files.
func TestWorkspaceThroughSymlink(t *testing.T) {
	t.Parallel()
	real := t.TempDir()
	link := filepath.Join(t.TempDir(), "ws")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	writeTree(t, real, map[string]string{"a.txt": "a", "d/b.txt": "b"})
	st := openTestStore(t, link, Options{})
	rec, err := st.Seal(context.Background(), SealRequest{Kind: ckpt.KindManual})
	if err != nil {
		t.Fatal(err)
	}
	assertTreeMatchesDisk(t, st, rec.SHA, []string{"a.txt", "d/b.txt"})
}

// A changed set may spell paths as a watcher does: "./a", "d//b", "d/",
// "d/../a". Each names the same work-tree path.
func TestChangedSpellings(t *testing.T) {
	t.Parallel()
	dir, st := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{"a.txt": "a", "d/b.txt": "b", "d/c.txt": "c", "e/f.txt": "f"})
	requireOK(t, mustSeal(t, st, SealRequest{Kind: ckpt.KindManual}))
	writeFile(t, dir, "a.txt", "edited a", 0o644)
	writeFile(t, dir, "d/b.txt", "edited b", 0o644)
	removeAll(t, dir, "d/c.txt")
	writeFile(t, dir, "e/g.txt", "new g", 0o644)
	rec := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, Changed: []string{"./a.txt", "d//b.txt", "d/c.txt/", "e/../e/"}})
	requireOK(t, rec)
	assertTreeMatchesDisk(t, st, rec.SHA, []string{"a.txt", "d/b.txt", "e/f.txt", "e/g.txt"})
	requireCounts(t, rec, 1, 2, 1)
}
