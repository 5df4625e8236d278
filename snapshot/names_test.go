//go:build unix

package snapshot

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// awkwardNames are file names that break naive code: options, pathspec magic,
// globs, whitespace, quotes, escapes, bytes that are not UTF-8, the longest
// name a Linux file system takes and a deep path.
func awkwardNames() []string {
	var deep []string
	for i := 0; i < 60; i++ {
		deep = append(deep, fmt.Sprintf("level-%02d", i))
	}
	return []string{
		"-rf",
		"-",
		"--all",
		"--",
		"-n",
		":(glob)x",
		":(literal)y",
		":(exclude)z",
		":!bang",
		":/top", // the folder ":" holding "top"
		"*",
		"?",
		"[ab]",
		"a",
		"b",
		"**",
		"with space",
		" leading space",
		"trailing space ",
		"tab\there",
		"new\nline",
		"carriage\rreturn",
		`"double quoted"`,
		"it's",
		`back\slash`,
		`\`,
		"caf\xe9",
		"\xff\xfe\x80",
		"naïve ünïcödé ✓",
		"#hash",
		"!bang",
		"~tilde",
		"@{upstream}",
		"HEAD",
		"...",
		"x.lock",
		strings.Repeat("n", 251) + ".txt", // 255 bytes
		"[cd]/inside a glob folder",
		":(glob)dir/-under magic",
		"dir with space/--all",
		"caf\xe8/\xff",
		strings.Join(deep, "/") + "/leaf",
	}
}

// withParents is a name and the folders above it, as a watcher reports a
// file created in new folders.
func withParents(n string) []string {
	out := []string{n}
	for d := path.Dir(n); d != "."; d = path.Dir(d) {
		out = append(out, d)
	}
	return out
}

// Each name alone: added, edited and deleted, by both seal modes.
func TestAwkwardNameEach(t *testing.T) {
	t.Parallel()
	if n := len(strings.Repeat("n", 251) + ".txt"); n != 255 {
		t.Fatalf("long name is %d bytes", n)
	}
	for _, n := range awkwardNames() {
		for _, mode := range sealModes {
			t.Run(fmt.Sprintf("%.40q/%s", n, mode), func(t *testing.T) {
				t.Parallel()
				dir, st := newTestStore(t, Options{})
				writeFile(t, dir, "plain.txt", "plain\n", 0o644)
				requireOK(t, mustSeal(t, st, SealRequest{Kind: ckpt.KindManual}))

				writeFile(t, dir, n, "contents of "+n+"\n", 0o644)
				rec := sealWith(t, st, mode, withParents(n))
				requireOK(t, rec)
				assertTreeMatchesDisk(t, st, rec.SHA, []string{"plain.txt", n})
				requireCounts(t, rec, 1, 0, 0)

				writeFile(t, dir, n, "edited\n", 0o755)
				rec = sealWith(t, st, mode, []string{n})
				requireOK(t, rec)
				assertTreeMatchesDisk(t, st, rec.SHA, []string{"plain.txt", n})
				requireCounts(t, rec, 0, 1, 0)

				removeAll(t, dir, n)
				rec = sealWith(t, st, mode, []string{n})
				requireOK(t, rec)
				assertTreeMatchesDisk(t, st, rec.SHA, []string{"plain.txt"})
				requireCounts(t, rec, 0, 0, 1)
			})
		}
	}
}

// All names together: sealed, edited, and deleted one by one, so a name that
// a naive pathspec reads as a glob or magic would take others with it.
func TestAwkwardNamesTogether(t *testing.T) {
	t.Parallel()
	names := awkwardNames()
	forModes(t, func(t *testing.T, mode sealMode) {
		dir, st := newTestStore(t, Options{})
		writeFile(t, dir, "plain.txt", "plain\n", 0o644)
		first := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
		requireOK(t, first)

		var touched []string
		for _, n := range names {
			writeFile(t, dir, n, "contents of "+n+"\n", 0o644)
			touched = append(touched, withParents(n)...)
		}
		want := append([]string{"plain.txt"}, names...)
		added := sealWith(t, st, mode, touched)
		requireOK(t, added)
		assertTreeMatchesDisk(t, st, added.SHA, want)
		requireCounts(t, added, len(names), 0, 0)
		assertReconcileAgrees(t, st, dir, added)

		for _, n := range names {
			writeFile(t, dir, n, "edited "+n+"\n", 0o755)
		}
		edited := sealWith(t, st, mode, names)
		requireOK(t, edited)
		assertTreeMatchesDisk(t, st, edited.SHA, want)
		requireCounts(t, edited, 0, len(names), 0)

		for _, n := range names {
			removeAll(t, dir, n)
			rec := sealWith(t, st, mode, []string{n})
			want = slices.DeleteFunc(want, func(p string) bool { return p == n })
			if rec.State != ckpt.StateOK || rec.Removed != 1 || rec.Added+rec.Changed != 0 {
				t.Errorf("delete %q: state %s issues %q, added/changed/removed %d/%d/%d, want ok 0/0/1",
					n, rec.State, rec.Issues, rec.Added, rec.Changed, rec.Removed)
			}
			assertTreeMatchesDisk(t, st, rec.SHA, want)
			if t.Failed() {
				return // the first failure is the one to read
			}
		}
		if got := treePaths(t, st, st.Records()[len(st.Records())-1].SHA); !slices.Equal(got, []string{"plain.txt"}) {
			t.Errorf("after deleting every name the tree holds %q", got)
		}
	})
}

// Ignore rules are matched against a name as it is, never as a pathspec:
// ":/secret" (the file "secret" in the folder ":") and ":(top)x" are not the
// top-level "secret" and "x" that /secret and /x ignore.
func TestAwkwardNamesAndIgnoreRules(t *testing.T) {
	t.Parallel()
	forModes(t, func(t *testing.T, mode sealMode) {
		dir, st := newTestStore(t, Options{})
		writeFile(t, dir, ".gitignore", "/secret\n/x\n", 0o644)
		requireOK(t, mustSeal(t, st, SealRequest{Kind: ckpt.KindManual}))
		writeTree(t, dir, map[string]string{
			"secret":   "ignored",
			"x":        "ignored",
			":/secret": "kept: not the top-level secret",
			":(top)x":  "kept: not the top-level x",
		})
		rec := sealWith(t, st, mode, []string{"secret", "x", ":", ":/secret", ":(top)x"})
		requireOK(t, rec)
		assertTreeMatchesDisk(t, st, rec.SHA, []string{".gitignore", ":/secret", ":(top)x"})
		assertReconcileAgrees(t, st, dir, rec)
	})
}
