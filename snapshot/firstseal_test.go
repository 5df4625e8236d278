//go:build linux

package snapshot

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// fullSealPair seals dir by a full reconcile in two stores of it, one per
// engine, and fails unless the in-process engine sealed its own (not git
// for it) and both trees are the same.
func fullSealPair(t *testing.T, gitSt, inSt *Store, what string) (ckpt.Record, ckpt.Record) {
	t.Helper()
	g := mustSeal(t, gitSt, SealRequest{Kind: ckpt.KindManual})
	in := mustSeal(t, inSt, SealRequest{Kind: ckpt.KindManual})
	if inSt.lastEngine != EngineInproc {
		t.Fatalf("%s: sealed by the %s engine, want the in-process one", what, inSt.lastEngine)
	}
	if gt, it := treeOf(t, gitSt, g.SHA), treeOf(t, inSt, in.SHA); gt != it {
		t.Fatalf("%s: the in-process tree %s differs from git's %s:\n%s", what, it, gt,
			gitOut(t, inSt, nil, "diff-tree", "-r", "--no-renames", gt, it))
	}
	if g.State != in.State || !slices.Equal(issuePaths(g.Issues), issuePaths(in.Issues)) ||
		!slices.Equal(issuePaths(g.Skipped), issuePaths(in.Skipped)) {
		t.Errorf("%s: git: %s issues %q skipped %q; in-process: %s issues %q skipped %q", what,
			g.State, issuePaths(g.Issues), issuePaths(g.Skipped), in.State, issuePaths(in.Issues), issuePaths(in.Skipped))
	}
	if [3]int{g.Added, g.Changed, g.Removed} != [3]int{in.Added, in.Changed, in.Removed} {
		t.Errorf("%s: counts git %d/%d/%d, in-process %d/%d/%d", what, g.Added, g.Changed, g.Removed, in.Added, in.Changed, in.Removed)
	}
	return g, in
}

// storeSound checks what git says of a store the in-process engine wrote:
// fsck --strict clean, every pack verified, no loose object (the seal's
// objects are packed), and cairn's index agreeing with the disk.
func storeSound(t *testing.T, st *Store, loose string) {
	t.Helper()
	if out := gitOut(t, st, nil, "fsck", "--strict", "--no-dangling"); len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("fsck: %s", out)
	}
	packs, _ := filepath.Glob(filepath.Join(st.GitDir(), "objects", "pack", "*.idx"))
	if len(packs) == 0 {
		t.Errorf("no pack in the store")
	}
	for _, p := range packs {
		gitOut(t, st, nil, "verify-pack", p)
	}
	if got := looseObjects(t, st); got != loose {
		t.Errorf("loose objects after an in-process full seal: %s, want the store's first ones: %s", got, loose)
	}
	// git reads the index the engine wrote (its pending entries in, as
	// cairn puts them before git reads it): nothing modified, nothing deleted.
	if err := st.inproc.syncIndex(context.Background()); err != nil {
		t.Fatal(err)
	}
	if out := gitOut(t, st, nil, "ls-files", "-z", "-m", "-d"); len(out) > 0 {
		t.Errorf("git finds cairn's index out of step with the disk: %q", out)
	}
}

// looseObjects lists the store's loose objects.
func looseObjects(t *testing.T, st *Store) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(st.GitDir(), "objects", "??", "*"))
	for i := range m {
		m[i] = filepath.Base(filepath.Dir(m[i])) + filepath.Base(m[i])
	}
	slices.Sort(m)
	return strings.Join(m, " ")
}

// TestInprocFullSealMatchesGit seals a tree of awkward files by a first
// seal and by full reconciles in-process, and compares each checkpoint
// with git's: the exec bit, links (left out, never followed), empty files,
// ignored files and folders (re-included ones too), a repository cloned
// inside, odd names, FIFOs, unselected files, files over the size limit,
// then edits, a same-size rewrite, removals, a file turned folder and an
// ignore rule that now covers tracked files.
func TestInprocFullSealMatchesGit(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	writeTree(t, outside, map[string]string{"secret.txt": "outside the work tree\n", "d/x": "x"})
	files := map[string]string{
		"plain.txt":              "plain\n",
		"empty":                  "",
		"a/b/c/deep.go":          "package c\n",
		"build/out.o":            "ignored folder\n",
		"logs/run.log":           "ignored by pattern\n",
		"logs/keep.log":          "re-included\n",
		"notes.tmp":              "unselected\n",
		"nested/inner.txt":       "in a repository cloned inside\n",
		"nested/sub/skip.bin":    "ignored by the nested repository's rules\n",
		"nested/.gitignore":      "*.bin\n",
		"odd/a\nb":               "newline\n",
		"odd/tab\there":          "tab\n",
		"odd/\xff\xfe":           "not utf-8\n",
		"odd/ lead and trail ":   "spaces\n",
		"odd/back\\slash":        "backslash\n",
		"odd/*star?":             "glob characters\n",
		"odd/:(literal)magic":    "pathspec magic\n",
		"odd/-dash":              "dash\n",
		".gitignore":             "build/\n*.log\n!keep.log\n",
		"big.dat":                strings.Repeat("z", 3<<20),
		"sizes/one-mib-and-more": strings.Repeat("m", 1<<20+1),
	}
	writeTree(t, dir, files)
	writeFile(t, dir, "run.sh", "#!/bin/sh\n", 0o755)
	symlink(t, dir, filepath.Join(outside, "secret.txt"), "link-to-file")
	symlink(t, dir, outside, "link-to-dir")
	symlink(t, dir, "plain.txt", "a/rel-link")
	mkfifo(t, dir, "pipe")
	hostGit(t, filepath.Join(dir, "nested"), "init", "-q")

	opts := Options{MaxFileSize: 2 << 20, Patterns: []string{"**", "!**/*.tmp"}}
	gitOpts, inOpts := opts, opts
	gitOpts.Engine, inOpts.Engine = EngineGit, EngineInproc
	gitSt := openTestStore(t, dir, gitOpts)
	inSt := openTestStore(t, dir, inOpts)
	loose := looseObjects(t, inSt) // the store's own first commit

	_, in := fullSealPair(t, gitSt, inSt, "first seal")
	storeSound(t, inSt, loose)
	tree := treePaths(t, inSt, in.SHA)
	for _, p := range []string{"link-to-file", "link-to-dir", "a/rel-link", "link-to-dir/secret.txt", "build/out.o", "logs/run.log", "notes.tmp", "big.dat", "nested/sub/skip.bin", "pipe"} {
		if slices.Contains(tree, p) {
			t.Errorf("the first seal holds %s", p)
		}
	}
	for _, p := range []string{"logs/keep.log", "nested/inner.txt", "empty", "run.sh", "odd/a\nb", "sizes/one-mib-and-more"} {
		if !slices.Contains(tree, p) {
			t.Errorf("the first seal lacks %s", p)
		}
	}
	if e := lsTree(t, inSt, in.SHA)["run.sh"]; e.mode != "100755" {
		t.Errorf("run.sh has mode %s, want 100755", e.mode)
	}

	// Nothing changed: the same tree, nothing read again.
	fullSealPair(t, gitSt, inSt, "full reconcile, nothing changed")

	writeFile(t, dir, "plain.txt", "PLAIN\n", 0o644) // same size
	writeFile(t, dir, "a/b/c/deep.go", "package c // edited\n", 0o644)
	chmod(t, dir, "plain.txt", 0o755)
	removeAll(t, dir, "empty")
	writeFile(t, dir, "empty/now-a-folder", "was a file\n", 0o644)
	writeFile(t, dir, "fresh/new.txt", "new\n", 0o644)
	writeFile(t, dir, "a/.gitignore", "b/\n", 0o644) // now covers a/b/c/deep.go, tracked
	removeAll(t, dir, "odd/tab\there")
	fullSealPair(t, gitSt, inSt, "full reconcile after edits")
	storeSound(t, inSt, loose)

	// The next incremental seal is the in-process engine's again.
	writeFile(t, dir, "plain.txt", "after the full seal\n", 0o644)
	rec := mustSeal(t, inSt, SealRequest{Kind: ckpt.KindManual, Changed: []string{"plain.txt"}})
	if inSt.lastEngine != EngineInproc {
		t.Errorf("the incremental seal after an in-process full seal was sealed by %s", inSt.lastEngine)
	}
	assertReconcileAgrees(t, inSt, dir, rec)
}

// TestInprocFirstSealLargeFile streams a file over 64 MiB into the pack,
// never whole in memory, and git reads it back byte for byte.
func TestInprocFirstSealLargeFile(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and reads 65 MiB")
	}
	dir := t.TempDir()
	big := bytes.Repeat([]byte("0123456789abcdef"), (64<<20+4096)/16)
	big = append(big, "tail"...)
	if err := os.WriteFile(filepath.Join(dir, "huge.bin"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "small.txt", "small\n", 0o644)
	st := openTestStore(t, dir, Options{Engine: EngineInproc, MaxFileSize: 128 << 20})
	loose := looseObjects(t, st)
	rec := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
	if st.lastEngine != EngineInproc {
		t.Fatalf("sealed by %s", st.lastEngine)
	}
	e := lsTree(t, st, rec.SHA)["huge.bin"]
	got := gitOut(t, st, nil, "cat-file", "blob", e.sha)
	if !bytes.Equal(got, big) {
		t.Fatalf("huge.bin read back: %d bytes, want %d equal bytes", len(got), len(big))
	}
	storeSound(t, st, loose)
}

// TestInprocFullSealFileChangingWhileRead rewrites a file at every read:
// the seal names it (partial) and keeps its last checkpoint's version.
func TestInprocFullSealFileChangingWhileRead(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"steady.txt": "steady\n", "busy.txt": "version 0\n"})
	st := openTestStore(t, dir, Options{Engine: EngineInproc})
	first := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
	was := lsTree(t, st, first.SHA)["busy.txt"]

	writeFile(t, dir, "busy.txt", "version 1, longer\n", 0o644)
	writeFile(t, dir, "steady.txt", "steady, edited\n", 0o644)
	n := 0
	setBeforeFullHash(t, func(rel string) {
		if rel == "busy.txt" {
			n++
			writeFile(t, dir, "busy.txt", strings.Repeat("v", n)+"\n", 0o644)
		}
	})
	rec, err := st.Seal(context.Background(), SealRequest{Kind: ckpt.KindManual})
	if err != nil {
		t.Fatal(err)
	}
	if st.lastEngine != EngineInproc {
		t.Fatalf("sealed by %s", st.lastEngine)
	}
	if rec.State != ckpt.StatePartial || !slices.Equal(issuePaths(rec.Issues), []string{"busy.txt"}) {
		t.Fatalf("state %s issues %q, want partial naming busy.txt", rec.State, rec.Issues)
	}
	ents := lsTree(t, st, rec.SHA)
	if ents["busy.txt"] != was {
		t.Errorf("busy.txt is %+v, want its last checkpoint's %+v", ents["busy.txt"], was)
	}
	if got := readBlobs(t, st, []string{ents["steady.txt"].sha})[ents["steady.txt"].sha]; string(got) != "steady, edited\n" {
		t.Errorf("steady.txt holds %q", got)
	}
}

// setBeforeFullHash runs fn before each file read of the test's full seals.
func setBeforeFullHash(t *testing.T, fn func(rel string)) {
	beforeFullHash = fn
	t.Cleanup(func() { beforeFullHash = nil })
}

// TestInprocFullSealLeavesRefusedNamesToGit: a name git's staging refuses
// (core.protectNTFS: "git~1", ".git.") sends the full seal to git, which
// names it.
func TestInprocFullSealLeavesRefusedNamesToGit(t *testing.T) {
	for _, name := range []string{"GIT~1", ".git.", "a/.Git ", "b/git~1::$DATA"} {
		dir := t.TempDir()
		writeTree(t, dir, map[string]string{"ok.txt": "ok\n", name: "refused\n"})
		st := openTestStore(t, dir, Options{Engine: EngineInproc})
		rec, err := st.Seal(context.Background(), SealRequest{Kind: ckpt.KindManual})
		if err != nil {
			t.Fatal(err)
		}
		if st.lastEngine != EngineGit {
			t.Errorf("%q: sealed by %s, want git", name, st.lastEngine)
		}
		if slices.Contains(treePaths(t, st, rec.SHA), name) {
			t.Errorf("%q is in the checkpoint", name)
		}
	}
}

// TestInprocFullSealFolderSwappedForLink: as a local attacker would, a
// folder the walk listed is swapped for a link to a folder outside while
// its files are read: nothing outside is read or sealed (a file read
// before the swap holds what it held; one after is named, not followed).
func TestInprocFullSealFolderSwappedForLink(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	writeTree(t, dir, map[string]string{"keep.txt": "keep\n", "d/f.txt": "inside\n"})
	writeTree(t, outside, map[string]string{"f.txt": "SECRET outside the work tree\n"})
	st := openTestStore(t, dir, Options{Engine: EngineInproc})
	var once sync.Once
	setBeforeFullHash(t, func(rel string) { once.Do(func() { swap(t, dir, outside) }) })
	rec, err := st.Seal(context.Background(), SealRequest{Kind: ckpt.KindManual})
	if err != nil {
		t.Fatal(err)
	}
	checkNoSecret(t, st, rec)
}

// swap moves dir/d away and puts a link to outside in its place.
func swap(t *testing.T, dir, outside string) {
	if err := os.Rename(filepath.Join(dir, "d"), filepath.Join(t.TempDir(), "d")); err != nil {
		t.Error(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "d")); err != nil {
		t.Error(err)
	}
}

// checkNoSecret fails when the checkpoint holds what lies outside the work
// tree, or names d/f.txt unread yet seals it.
func checkNoSecret(t *testing.T, st *Store, rec ckpt.Record) {
	t.Helper()
	if st.lastEngine != EngineInproc {
		t.Fatalf("sealed by %s", st.lastEngine)
	}
	for p, e := range lsTree(t, st, rec.SHA) {
		if b := readBlobs(t, st, []string{e.sha})[e.sha]; strings.Contains(string(b), "SECRET") {
			t.Errorf("%s holds the outside file's content", p)
		}
	}
	if slices.Contains(issuePaths(rec.Issues), "d/f.txt") && slices.Contains(treePaths(t, st, rec.SHA), "d/f.txt") {
		t.Errorf("d/f.txt named as unread yet sealed: %+v", rec)
	}
}

// TestWholeWitnessAcrossEngines: a store opened anew (`cairn restore` or
// `cairn checkpoint` with no daemon) takes the stat cache's base as whole
// while every pack and loose object the cache's witness names is stored,
// so a full reconcile applies what changed to it, as the engine that
// found it whole would. When the store lost an object since, the witness
// fails, and the reconcile never seals a checkpoint naming an object the
// store lacks.
func TestWholeWitnessAcrossEngines(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{}
	for i := range 12 {
		files[fmt.Sprintf("d%d/f%d.txt", i%3, i)] = fmt.Sprintf("file %d\n", i)
	}
	writeTree(t, dir, files)
	state := t.TempDir()
	// git seals first: its objects are loose, and the in-process engine's
	// witness names them.
	st := openTestStore(t, dir, Options{Engine: EngineGit, StateDir: state})
	mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
	st.Close()
	open := func() *Store { return openTestStore(t, dir, Options{Engine: EngineInproc, StateDir: state}) }

	st = open()
	writeFile(t, dir, "d0/new.txt", "new\n", 0o644)
	mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
	writeFile(t, dir, "d0/new.txt", "newer\n", 0o644)
	mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
	if st.lastEngine != EngineInproc || !st.lastOnBase {
		t.Fatalf("a full reconcile in the engine that sealed the base: engine %s, on the base %v", st.lastEngine, st.lastOnBase)
	}
	h := st.loadStatCache(st.inproc.eng.format.Name).hdr
	if h.Whole == nil || h.Whole.Tree != h.Base || len(h.Whole.Packs) == 0 || len(h.Whole.Loose) == 0 {
		t.Fatalf("the stat cache holds no witness of its base naming packs and loose objects: %+v", h.Whole)
	}
	st.Close()

	// A new engine, the store as the witness says: it builds on the base.
	st = open()
	writeFile(t, dir, "d1/f1.txt", "edited\n", 0o644)
	rec := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
	if st.lastEngine != EngineInproc || !st.lastOnBase {
		t.Fatalf("a new engine's full reconcile: engine %s, on the base %v; want the in-process engine on the base", st.lastEngine, st.lastOnBase)
	}
	assertReconcileAgrees(t, st, dir, rec)
	h = st.loadStatCache(st.inproc.eng.format.Name).hdr
	st.Close()

	// The store lost a loose blob the witness names, of a file that did
	// not change: the witness no longer holds, and the seal does not
	// claim the lost blob.
	lost := ""
	for _, id := range h.Whole.Loose {
		if typ := strings.TrimSpace(string(gitOut(t, st, nil, "cat-file", "-t", id))); typ == "blob" {
			lost = id
			break
		}
	}
	if lost == "" {
		t.Fatal("the witness names no loose blob")
	}
	if err := os.Remove(filepath.Join(st.GitDir(), "objects", lost[:2], lost[2:])); err != nil {
		t.Fatal(err)
	}
	st = open()
	writeFile(t, dir, "d2/f2.txt", "edited after the loss\n", 0o644)
	rec, err := st.Seal(context.Background(), SealRequest{Kind: ckpt.KindManual})
	if st.lastOnBase {
		t.Error("a full reconcile built on a base whose objects the store lost")
	}
	if err == nil && rec.State != ckpt.StateFailed {
		var ids []string
		for _, line := range strings.Split(strings.TrimSpace(string(gitOut(t, st, nil, "ls-tree", "-r", "-t", rec.SHA))), "\n") {
			ids = append(ids, strings.Fields(line)[2])
		}
		out := gitOut(t, st, strings.NewReader(strings.Join(ids, "\n")+"\n"), "cat-file", "--batch-check")
		if bytes.Contains(out, []byte("missing")) {
			t.Fatalf("a %s checkpoint names objects the store lacks:\n%s", rec.State, out)
		}
	}
}

// TestLeanGCMemoryLimit: a seal running lean sets a soft memory limit
// (leanMemBudget over what the process held) and puts back none after; a
// limit the operator set (GOMEMLIMIT) is left as it is.
func TestLeanGCMemoryLimit(t *testing.T) {
	was := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(was)
	debug.SetMemoryLimit(math.MaxInt64)
	const base = 100 << 20
	done := leanGC(base)
	if got := debug.SetMemoryLimit(-1); got != base+leanMemBudget {
		t.Errorf("while lean, the memory limit is %d, want %d", got, base+leanMemBudget)
	}
	inner := leanGC(0) // a second seal at once shares it
	inner()
	if got := debug.SetMemoryLimit(-1); got == math.MaxInt64 {
		t.Error("the second seal's end put the limit back while the first runs lean")
	}
	done()
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("after the seal the memory limit is %d, want none", got)
	}

	const operator = 3 << 30
	debug.SetMemoryLimit(operator)
	done = leanGC(base)
	if got := debug.SetMemoryLimit(-1); got != operator {
		t.Errorf("while lean, the operator's limit became %d", got)
	}
	done()
	if got := debug.SetMemoryLimit(-1); got != operator {
		t.Errorf("after the seal the operator's limit is %d", got)
	}
}
