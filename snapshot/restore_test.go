package snapshot

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// TestRestoreAndUndo: restore writes the target's files, deletes only what
// cairn tracked, keeps untracked and ignored files, seals a pre-restore
// checkpoint that holds a file written by hand, and undo gives back the exact
// tree from before.
func TestRestoreAndUndo(t *testing.T) {
	ctx := context.Background()
	ws := t.TempDir()
	st, err := Open(ctx, ws, Options{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	putFile(t, filepath.Join(ws, ".gitignore"), "*.log\n")
	putFile(t, filepath.Join(ws, "a.txt"), "a1\n")
	putFile(t, filepath.Join(ws, "keep.log"), "ignored\n")
	c1, err := st.Seal(ctx, SealRequest{Kind: ckpt.KindManual, Label: "one"})
	if err != nil {
		t.Fatal(err)
	}
	putFile(t, filepath.Join(ws, "a.txt"), "a2\n")
	putFile(t, filepath.Join(ws, "b/new.txt"), "b\n")
	if _, err := st.Seal(ctx, SealRequest{Kind: ckpt.KindManual, Label: "two"}); err != nil {
		t.Fatal(err)
	}
	putFile(t, filepath.Join(ws, "by-hand.txt"), "written after the last checkpoint\n")

	before := hashTree(t, ws)
	dry, err := st.Restore(ctx, ckpt.Request{Target: c1.SHA, Label: c1.ID, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if hashTree(t, ws) != before || dry.PreRestore != nil {
		t.Fatal("dry run changed something")
	}
	if len(dry.Write) != 1 || dry.Write[0].Path != "a.txt" || len(dry.Delete) != 1 || dry.Delete[0].Path != "b/new.txt" || dry.Kept != 1 {
		t.Fatalf("dry plan %+v", dry)
	}

	res, err := st.Restore(ctx, ckpt.Request{Target: c1.SHA, Label: c1.ID})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Diff) != 0 {
		t.Fatalf("verification found %v", res.Diff)
	}
	got, _ := os.ReadFile(filepath.Join(ws, "a.txt"))
	if string(got) != "a1\n" {
		t.Errorf("a.txt = %q", got)
	}
	if _, err := os.Stat(filepath.Join(ws, "b/new.txt")); !os.IsNotExist(err) {
		t.Error("tracked file the target lacks was not deleted")
	}
	for _, keep := range []string{"by-hand.txt", "keep.log"} {
		if _, err := os.Stat(filepath.Join(ws, keep)); err != nil {
			t.Errorf("%s (untracked or ignored) was deleted", keep)
		}
	}
	pre := res.PreRestore
	if pre == nil || pre.Kind != ckpt.KindPreRestore || !hasPath(lsTree(t, st, pre.SHA), "by-hand.txt") {
		t.Fatalf("pre-restore %+v", pre)
	}
	if st.Position() != c1.SHA {
		t.Errorf("position %s, want %s", st.Position(), c1.SHA)
	}
	if head := gitStr(t, st, "rev-parse", "HEAD"); head != c1.SHA {
		t.Errorf("HEAD %s, want detached at %s", head, c1.SHA)
	}
	if got := gitStr(t, st, "rev-list", "--count", "refs/heads/main"); got != "1" {
		t.Errorf("main moved: %s commits", got)
	}

	// Undo: back to the pre-restore checkpoint, exactly.
	undo, err := st.Restore(ctx, ckpt.Request{Target: pre.SHA, Label: pre.ID})
	if err != nil {
		t.Fatal(err)
	}
	if hashTree(t, ws) != before {
		t.Errorf("undo did not give back the tree from before the restore (diff %v)", undo.Diff)
	}
	if undo.PreRestore == nil {
		t.Error("undo is not undoable")
	}
}

// TestRestorePaths restores one file and leaves the rest.
func TestRestorePaths(t *testing.T) {
	ctx := context.Background()
	ws := t.TempDir()
	st, err := Open(ctx, ws, Options{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	putFile(t, filepath.Join(ws, "a.txt"), "a1\n")
	putFile(t, filepath.Join(ws, "d/b.txt"), "b1\n")
	c1, _ := st.Seal(ctx, SealRequest{Kind: ckpt.KindManual})
	putFile(t, filepath.Join(ws, "a.txt"), "a2\n")
	putFile(t, filepath.Join(ws, "d/b.txt"), "b2\n")
	putFile(t, filepath.Join(ws, "d/c.txt"), "c2\n")
	st.Seal(ctx, SealRequest{Kind: ckpt.KindManual})
	res, err := st.Restore(ctx, ckpt.Request{Target: c1.SHA, Paths: []string{"d"}})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(filepath.Join(ws, "a.txt"))
	b, _ := os.ReadFile(filepath.Join(ws, "d/b.txt"))
	if string(a) != "a2\n" || string(b) != "b1\n" {
		t.Errorf("a=%q b=%q", a, b)
	}
	if _, err := os.Stat(filepath.Join(ws, "d/c.txt")); !os.IsNotExist(err) {
		t.Error("d/c.txt should be deleted (tracked, not in target)")
	}
	if len(res.Diff) != 0 {
		t.Errorf("diff %v", res.Diff)
	}
}

func hasPath(m map[string]treeEntry, p string) bool { _, ok := m[p]; return ok }

// TestRestoreFileFolderSwap: a path that is a file at one checkpoint and a
// folder at the other. Restore and undo, whole and by path, both ways, leave
// the tree exactly at the target and report no difference.
func TestRestoreFileFolderSwap(t *testing.T) {
	file := map[string]string{"x": "a file\n", "keep.txt": "k\n"}
	folder := map[string]string{"x/a.txt": "a\n", "x/sub/b.txt": "b\n", "keep.txt": "k\n"}
	for _, tc := range []struct {
		name     string
		from, to map[string]string
		paths    []string
	}{
		{"file to folder", file, folder, nil},
		{"folder to file", folder, file, nil},
		{"file to folder by path", file, folder, []string{"x"}},
		{"folder to file by path", folder, file, []string{"x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			ws := t.TempDir()
			st := openTestStore(t, ws, Options{})
			lay := func(files map[string]string) {
				for _, e := range []string{"x", "keep.txt"} {
					removeAll(t, ws, e)
				}
				writeTree(t, ws, files)
			}
			lay(tc.to)
			target := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, Label: "target"})
			wantTarget := hashTree(t, ws)
			lay(tc.from)
			mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, Label: "start"})
			wantStart := hashTree(t, ws)

			// restoreTo restores req and checks the work tree came out as want.
			restoreTo := func(what string, req ckpt.Request, want, wantDesc string) ckpt.Outcome {
				t.Helper()
				res, err := st.Restore(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				if len(res.Diff) != 0 {
					t.Errorf("%s reports differences %v", what, res.Diff)
				}
				if hashTree(t, ws) != want {
					t.Errorf("%s: tree is not %s: %v", what, wantDesc, regularFiles(t, ws))
				}
				return res
			}
			res := restoreTo("restore", ckpt.Request{Target: target.SHA, Label: target.ID, Paths: tc.paths}, wantTarget, "the target's")
			restoreTo("undo", ckpt.Request{Target: res.PreRestore.SHA, Label: res.PreRestore.ID}, wantStart, "the one before the restore")
		})
	}
}

// TestRestoreReplacesUnsealedFileWhereFolderGoes: a file no checkpoint
// holds (over the size limit, ignored) stands where the target needs a
// folder. git's checkout --force removes such a file to make the folder; the
// git way lost it, since the pre-restore checkpoint did not hold it, and the
// in-process way left it and wrote none of the target's files under it. Both
// now stage it in a second pre-restore checkpoint first, as they do a file
// the restore overwrites at its own path, then make the folder: the undo
// brings the file back.
func TestRestoreReplacesUnsealedFileWhereFolderGoes(t *testing.T) {
	const limit = 1 << 10
	big := strings.Repeat("big file no checkpoint holds\n", 2*limit/29)
	for _, engine := range []string{EngineInproc, EngineGit} {
		for _, tc := range []struct {
			name  string
			block string // what stands at x when the restore begins
			extra map[string]string
		}{
			{"over the size limit", big, nil},
			{"ignored", "ignored file\n", map[string]string{".gitignore": "x\n!x/\n"}},
		} {
			t.Run(engine+"/"+tc.name, func(t *testing.T) {
				ctx := context.Background()
				ws := t.TempDir()
				st := openTestStore(t, ws, Options{Engine: engine, MaxFileSize: limit})
				files := map[string]string{"x/a.txt": "a\n", "x/sub/b.txt": "b\n", "keep.txt": "k\n"}
				for p, c := range tc.extra {
					files[p] = c
				}
				writeTree(t, ws, files)
				target := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, Label: "target"})
				wantTarget := hashTree(t, ws)
				removeAll(t, ws, "x")
				writeTree(t, ws, map[string]string{"x": tc.block})
				mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, Label: "start"})
				wantStart := hashTree(t, ws)

				res, err := st.Restore(ctx, ckpt.Request{Target: target.SHA, Label: target.ID})
				if err != nil {
					t.Fatal(err)
				}
				if len(res.Diff) != 0 {
					t.Errorf("restore reports differences %v", res.Diff)
				}
				if got := hashTree(t, ws); got != wantTarget {
					t.Errorf("after the restore the tree is not the target's: %v", regularFiles(t, ws))
				}
				if got, err := st.git.Run(ctx, nil, "cat-file", "blob", res.PreRestore.SHA+":x"); err != nil || string(got) != tc.block {
					t.Errorf("the pre-restore checkpoint holds x = %.40q (%v), want the file the restore replaced", got, err)
				}
				if _, err := st.Restore(ctx, ckpt.Request{Target: res.PreRestore.SHA, Label: res.PreRestore.ID}); err != nil {
					t.Fatal(err)
				}
				if got := hashTree(t, ws); got != wantStart {
					t.Errorf("after the undo the tree is not the one before the restore: %v", regularFiles(t, ws))
				}
			})
		}
	}
}

// TestRestoreReplacesFolderWhereFileGoes: the mirror of the test above. A
// folder stands where the target has a file, holding files no checkpoint
// holds (ignored, over the size limit). git's checkout removed the folder,
// those files with it, and the git way's pre-restore checkpoint did not
// hold them: lost for good (differential seed 1796321356900766736 found the
// in-process way's side: it left the folder and did not write the file).
// Both ways now put every file in the folder into a second pre-restore
// checkpoint first, then replace the folder, and the undo brings it back.
// A folder holding something no checkpoint can hold (a link) stays as it
// is with the in-process way, which names the path it did not write.
func TestRestoreReplacesFolderWhereFileGoes(t *testing.T) {
	const limit = 1 << 10
	big := strings.Repeat("big file no checkpoint holds\n", 2*limit/29)
	for _, engine := range []string{EngineInproc, EngineGit} {
		for _, paths := range [][]string{nil, {"a"}} {
			t.Run(fmt.Sprintf("%s/paths=%v", engine, paths), func(t *testing.T) {
				ctx := context.Background()
				ws := t.TempDir()
				st := openTestStore(t, ws, Options{Engine: engine, MaxFileSize: limit})
				writeTree(t, ws, map[string]string{"a": "a file\n", ".gitignore": "*.log\n", "k.txt": "k\n"})
				target := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, Label: "target"})
				wantTarget := hashTree(t, ws)
				removeAll(t, ws, "a")
				writeTree(t, ws, map[string]string{"a/t.txt": "tracked\n", "a/x.log": "ignored, mine\n",
					"a/deep/y.log": "ignored too\n", "a/deep/big.bin": big})
				mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, Label: "start"})
				wantStart := hashTree(t, ws)

				res, err := st.Restore(ctx, ckpt.Request{Target: target.SHA, Label: target.ID, Paths: paths})
				if err != nil {
					t.Fatal(err)
				}
				if len(res.Diff) != 0 {
					t.Errorf("restore reports differences %v", res.Diff)
				}
				if got := hashTree(t, ws); got != wantTarget {
					t.Errorf("after the restore the tree is not the target's: %v", regularFiles(t, ws))
				}
				for _, p := range []string{"a/x.log", "a/deep/y.log", "a/deep/big.bin"} {
					if _, err := st.git.Run(ctx, nil, "cat-file", "-e", res.PreRestore.SHA+":"+p); err != nil {
						t.Errorf("the pre-restore checkpoint lacks %s, which the restore removed", p)
					}
				}
				if _, err := st.Restore(ctx, ckpt.Request{Target: res.PreRestore.SHA, Label: res.PreRestore.ID}); err != nil {
					t.Fatal(err)
				}
				if got := hashTree(t, ws); got != wantStart {
					t.Errorf("after the undo the tree is not the one before the restore: %v", regularFiles(t, ws))
				}
			})
		}
	}
	t.Run("inproc/a link in the folder", func(t *testing.T) {
		ctx := context.Background()
		ws := t.TempDir()
		st := openTestStore(t, ws, Options{Engine: EngineInproc})
		writeTree(t, ws, map[string]string{"a": "a file\n", ".gitignore": "*.log\n"})
		target := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, Label: "target"})
		removeAll(t, ws, "a")
		writeTree(t, ws, map[string]string{"a/x.log": "ignored, mine\n"})
		if err := os.Symlink("x.log", filepath.Join(ws, "a", "link")); err != nil {
			t.Fatal(err)
		}
		mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, Label: "start"})
		res, err := st.Restore(ctx, ckpt.Request{Target: target.SHA, Label: target.ID})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Diff) != 1 || res.Diff[0].Path != "a" {
			t.Errorf("restore differences %v, want a named as not written", res.Diff)
		}
		if b, err := os.ReadFile(filepath.Join(ws, "a", "x.log")); err != nil || string(b) != "ignored, mine\n" {
			t.Errorf("a/x.log = %q, %v: the folder must stay as it was", b, err)
		}
		if _, err := os.Readlink(filepath.Join(ws, "a", "link")); err != nil {
			t.Errorf("the link in the folder: %v", err)
		}
	})
	// The git way cannot leave it: git's checkout would remove the folder,
	// a nested repository's history with it (or a FIFO, never opened). It
	// refuses, nothing changed.
	for _, special := range []string{"a nested repository", "a FIFO"} {
		t.Run("git/"+special+" in the folder", func(t *testing.T) {
			ctx := context.Background()
			ws := t.TempDir()
			st := openTestStore(t, ws, Options{Engine: EngineGit})
			writeTree(t, ws, map[string]string{"a": "a file\n"})
			target := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, Label: "target"})
			removeAll(t, ws, "a")
			writeTree(t, ws, map[string]string{"a/repo/.git/HEAD": "ref: refs/heads/main\n", "a/repo/main.go": "package main\n"})
			if special == "a FIFO" {
				removeAll(t, ws, "a/repo/.git")
				if err := syscall.Mkfifo(filepath.Join(ws, "a", "repo", "pipe"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, Label: "start"})
			before := hashTree(t, ws)
			_, err := st.Restore(ctx, ckpt.Request{Target: target.SHA, Label: target.ID})
			if !errors.Is(err, ErrCannotHoldInTheWay) {
				t.Fatalf("restore: %v, want ErrCannotHoldInTheWay", err)
			}
			if got := hashTree(t, ws); got != before {
				t.Errorf("the refused restore changed the work tree: %v", regularFiles(t, ws))
			}
			if _, err := os.Lstat(st.restoreRecordPath()); st.restoreUnsure || err == nil {
				t.Errorf("the refused restore is recorded as under way (%v, %v)", st.restoreUnsure, err)
			}
			if special == "a FIFO" {
				if fi, err := os.Lstat(filepath.Join(ws, "a", "repo", "pipe")); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
					t.Errorf("the FIFO: %v, %v", fi, err)
				}
			}
		})
	}
}

// TestDryRunBesideReaders: a dry-run restore (which stages through a copy of
// the index) runs beside the questions readers ask from other goroutines
// (the daemon's HTTP handlers resolving a target). The store's runner used to
// be swapped for the copy's under the lock while readers took it without
// one: -race caught it, and a reader could run against the dry run's index.
func TestDryRunBesideReaders(t *testing.T) {
	ctx := context.Background()
	ws := t.TempDir()
	st, err := Open(ctx, ws, Options{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	putFile(t, filepath.Join(ws, "a.txt"), "a1\n")
	c1, err := st.Seal(ctx, SealRequest{Kind: ckpt.KindManual, Label: "one"})
	if err != nil {
		t.Fatal(err)
	}
	putFile(t, filepath.Join(ws, "a.txt"), "a2\n")
	putFile(t, filepath.Join(ws, "b.txt"), "b\n")
	c2, err := st.Seal(ctx, SealRequest{Kind: ckpt.KindManual, Label: "two"})
	if err != nil {
		t.Fatal(err)
	}
	putFile(t, filepath.Join(ws, "c.txt"), "by hand\n")
	// What the in-process engine sealed reaches cairn's index before git
	// reads it (a dry run does that too): the same entries, written now.
	if err := st.withLock(ctx, func() error { return st.inproc.syncIndex(ctx) }); err != nil {
		t.Fatal(err)
	}
	index, _ := os.ReadFile(st.git.Index)

	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for range 3 {
			if _, err := st.Restore(ctx, ckpt.Request{Target: c1.SHA, Label: c1.ID, DryRun: true}); err != nil {
				t.Error(err)
			}
			if _, _, err := st.Diff(ctx, c1.SHA, "", false); err != nil {
				t.Error(err)
			}
		}
	}()
	go func() {
		defer wg.Done()
		for range 10 {
			if !st.HasCommit(ctx, c1.SHA) {
				t.Error("HasCommit: c1 not found")
			}
			if got := st.Commits(ctx, c2.SHA[:8]); len(got) != 1 || got[0].SHA != c2.SHA {
				t.Errorf("Commits(%s) = %+v", c2.SHA[:8], got)
			}
			if d, err := st.Describe(ctx, ckpt.Record{SHA: c2.SHA}); err != nil || d.Parent != c1.SHA || d.Added != 1 || d.Changed != 1 {
				t.Errorf("Describe = %+v, %v", d, err)
			}
			if ab, err := st.Abandoned(ctx, c1.SHA, c2.SHA); err != nil || len(ab) != 1 || ab[0] != c2.SHA {
				t.Errorf("Abandoned = %v, %v", ab, err)
			}
		}
	}()
	wg.Wait()
	if after, _ := os.ReadFile(st.git.Index); string(after) != string(index) {
		t.Error("a dry run changed the store's index")
	}
}

// A file the restore kept (on disk, held by the pre-restore checkpoint but
// not by the position's nor the target's) is out of cairn's index after it:
// the next seal told what changed since (here nothing, as a watch whose
// dirty set was taken by the restore would tell) holds it, as git's view of
// the work tree does. It did not: only a full reconcile found it, so the
// daemon reconciled the whole tree after every restore.
func TestToldSealAfterRestoreHoldsKeptFiles(t *testing.T) {
	t.Parallel()
	for _, eng := range []string{EngineInproc, EngineGit} {
		for _, reopen := range []bool{false, true} {
			name := eng
			if reopen {
				// The told seal in another process (`cairn restore`, then
				// `cairn checkpoint --path` with no daemon).
				name += "/reopened"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				dir, opts := t.TempDir(), Options{Engine: eng, StateDir: t.TempDir()}
				st := openTestStore(t, dir, opts)
				writeTree(t, dir, map[string]string{"a.txt": "a\n", "d/b.txt": "b\n"})
				one := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
				writeFile(t, dir, "a.txt", "a2\n", 0o644)
				mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
				writeFile(t, dir, "d/kept.txt", "k\n", 0o644)
				res, err := st.Restore(context.Background(), ckpt.Request{Target: one.SHA, Changed: []string{"d/kept.txt"}})
				if err != nil {
					t.Fatal(err)
				}
				if res.Kept != 1 {
					t.Fatalf("kept %d, want d/kept.txt", res.Kept)
				}
				if reopen {
					st.Close()
					st = openTestStore(t, dir, opts)
				}
				rec := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, Changed: []string{}})
				if got := strings.Join(treePaths(t, st, rec.SHA), " "); got != "a.txt d/b.txt d/kept.txt" {
					t.Fatalf("the told seal after the restore holds %s; want a.txt d/b.txt d/kept.txt", got)
				}
				// Sealed once, nothing is looked at again.
				if len(st.reexamine) != 0 || st.restoreUnsure {
					t.Fatalf("after a seal: still to look at %q (unsure %v)", st.reexamine, st.restoreUnsure)
				}
				if reopen {
					st.Close()
					st = openTestStore(t, dir, opts)
					if len(st.reexamine) != 0 || st.restoreUnsure {
						t.Fatalf("reopened after that seal: still to look at %q (unsure %v)", st.reexamine, st.restoreUnsure)
					}
				}
			})
		}
	}
}

// TestRestoreOfPathsIntoIgnoredFolder: a restore of paths under a folder
// that an ignore rule outside those paths now covers finds the target's
// file on disk, ignored, left out of the pre-restore checkpoint; a second
// pre-restore checkpoint stages it, and it stays in cairn's index as the
// target's. The next seal (full, or told nothing changed) judges it again
// and leaves it out, as git's own view of the tree does.
func TestRestoreOfPathsIntoIgnoredFolder(t *testing.T) {
	t.Parallel()
	for _, told := range []bool{false, true} {
		name := "full"
		if told {
			name = "told"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir, st := newTestStore(t, Options{})
			writeTree(t, dir, map[string]string{"a/b/f1": "x\n", "a/x.txt": "y\n"})
			one := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
			writeFile(t, dir, "a/.gitignore", "b/\n", 0o644)
			two := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
			if got := strings.Join(treePaths(t, st, two.SHA), " "); got != "a/.gitignore a/x.txt" {
				t.Fatalf("with a/b/ ignored the checkpoint holds %s", got)
			}
			if _, err := st.Restore(context.Background(), ckpt.Request{Target: one.SHA, Paths: []string{"a/b"}}); err != nil {
				t.Fatal(err)
			}
			req := SealRequest{Kind: ckpt.KindManual}
			if told {
				req.Changed = []string{}
			}
			rec := mustSeal(t, st, req)
			if got := strings.Join(treePaths(t, st, rec.SHA), " "); got != "a/.gitignore a/x.txt" {
				t.Fatalf("the seal after the restore holds %s; want a/.gitignore a/x.txt (a/b/ is ignored)", got)
			}
		})
	}
}

// TestLocksLeftByAKilledRestore: a restore killed while git held HEAD.lock
// (detaching HEAD at the target) or a ref's lock (the pre-restore
// checkpoint's recovery ref) left them in the store; every later restore
// then failed on HEAD.lock ("cannot lock ref 'HEAD'"), and the recovery
// ref's lock stayed for good (the kill -9 torture test, with restores).
// The next locked operation of a plain store removes them: under the store
// lock no git of cairn's is alive to hold them.
func TestLocksLeftByAKilledRestore(t *testing.T) {
	for _, engine := range []string{EngineInproc, EngineGit} {
		t.Run(engine, func(t *testing.T) {
			ctx := context.Background()
			ws := t.TempDir()
			st := openTestStore(t, ws, Options{Engine: engine})
			writeTree(t, ws, map[string]string{"a.txt": "one\n"})
			one := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
			writeTree(t, ws, map[string]string{"a.txt": "two\n"})
			mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
			locks := []string{filepath.Join(st.GitDir(), "HEAD.lock"), filepath.Join(st.GitDir(), "refs", "heads", "recovery", "2026-12-03T15-51-02-227Z-c9-30534c5c.lock")}
			for _, l := range locks {
				if err := os.MkdirAll(filepath.Dir(l), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(l, []byte("0000000000000000000000000000000000000000\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			// A new store, as the daemon started again after the kill.
			st.Close()
			st = openTestStore(t, ws, Options{Engine: engine, StateDir: st.opts.StateDir})
			res, err := st.Restore(ctx, ckpt.Request{Target: one.SHA, Label: one.ID})
			if err != nil {
				t.Fatalf("restore after a killed one: %v", err)
			}
			if len(res.Diff) != 0 {
				t.Errorf("restore reports differences %v", res.Diff)
			}
			for _, l := range locks {
				if _, err := os.Lstat(l); err == nil {
					t.Errorf("%s is still there", l)
				}
			}
		})
	}
}

// TestRestoreOfPathsStagesNothingElse: the second pre-restore checkpoint of
// a restore of paths stages the ignored files the restore overwrites, and
// only those: it staged every ignored file on disk that the target holds,
// under the paths or not, and those outside them were never judged again,
// so the next full seal held ignored files (sub/.gitignore and sub/keep.log,
// under a "*" rule) as tracked. The differential replay
// CAIRN_DIFF_SEED=1796314377893774112 fails without the fix; this test, its
// shape in small, passes on the old code too (here the next seal asks about
// them for another reason I did not find), and is kept for the behaviour.
func TestRestoreOfPathsStagesNothingElse(t *testing.T) {
	for _, engine := range []string{EngineInproc, EngineGit} {
		for _, told := range []bool{false, true} {
			for _, reopen := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/told=%v/reopened=%v", engine, told, reopen), func(t *testing.T) {
					ctx := context.Background()
					dir, state := t.TempDir(), t.TempDir()
					st := openTestStore(t, dir, Options{Engine: engine, StateDir: state})
					writeTree(t, dir, map[string]string{"keep.txt": "k\n", "sub/.gitignore": "x\n", "sub/keep.log": "keep me\n"})
					one := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
					writeTree(t, dir, map[string]string{"sub/other.log": "o\n"})
					two := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
					_ = one
					// Not sealed: sub/ now ignores all it holds.
					writeFile(t, dir, "sub/.gitignore", "*\n", 0o644)
					writeFile(t, dir, "sub/other.log", "o2\n", 0o644)
					// Written well before the index: its stat data vouches for them (git's racy rule).
					past := time.Now().Add(-time.Hour)
					for _, p := range []string{"keep.txt", "sub/.gitignore", "sub/keep.log", "sub/other.log"} {
						if err := os.Chtimes(filepath.Join(dir, p), past, past); err != nil {
							t.Fatal(err)
						}
					}
					if reopen { // as `cairn restore` with no daemon
						st.Close()
						st = openTestStore(t, dir, Options{Engine: engine, StateDir: state})
					}
					req := ckpt.Request{Target: two.SHA, Paths: []string{"sub/other.log"}}
					if told {
						req.Changed = []string{"sub/.gitignore", "sub/other.log"}
					}
					if _, err := st.Restore(ctx, req); err != nil {
						t.Fatal(err)
					}
					if got := strings.Join(treePaths(t, st, mustSeal(t, st, SealRequest{Kind: ckpt.KindManual}).SHA), " "); got != "keep.txt" {
						t.Errorf("the seal after the restore holds %s; want keep.txt (sub/ ignores all it holds)", got)
					}
				})
			}
		}
	}
}
