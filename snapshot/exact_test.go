package snapshot

import (
	"bytes"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/platform/testsupport"
	"github.com/cairn-dev/cairn/restore/ckpt"
	"github.com/cairn-dev/cairn/snapshot/gitobj"
)

// Tests that a checkpoint is what was on disk, one per way the in-process
// engine's caches could make it otherwise.

// requireFile fails unless checkpoint sha holds rel with content want.
func requireFile(t *testing.T, st *Store, sha, rel, want string) {
	t.Helper()
	out, err := st.git.Run(t.Context(), nil, "cat-file", "blob", sha+":"+rel)
	if err != nil {
		t.Fatalf("checkpoint %.12s lacks %s: %v", sha, rel, err)
	}
	if string(out) != want {
		t.Fatalf("checkpoint %.12s holds %s = %q, want %q", sha, rel, out, want)
	}
}

// requireAllObjects fails unless every object checkpoint sha names is stored.
func requireAllObjects(t *testing.T, st *Store, sha string) {
	t.Helper()
	out, err := st.git.Run(t.Context(), nil, "rev-list", "--objects", "--missing=print", "--no-walk", sha)
	if err != nil {
		t.Fatalf("rev-list %s: %v", sha, err)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "?") {
			t.Fatalf("checkpoint %.12s names a missing object: %s", sha, l)
		}
	}
}

// A folder holding a self-ignoring .gitignore (as .pytest_cache has) is
// moved away and a plain folder of the same name made: its files are
// checkpointed. The ignore checker had read the old folder's rules, and the
// new folder's changes name no .gitignore.
func TestInprocIgnoreFolderSwap(t *testing.T) {
	t.Parallel()
	dir, st := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{"a.txt": "a", "cache/.gitignore": "*\n", "cache/x": "x"})
	mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
	writeFile(t, dir, "cache/y", "y", 0o644)
	writeFile(t, dir, "a.txt", "a2", 0o644)
	rec := sealWith(t, st, modeInproc, []string{"a.txt", "cache/y"}) // the checker reads cache/.gitignore
	if _, ok := lsTree(t, st, rec.SHA)["cache/y"]; ok {
		t.Fatal("an ignored file was checkpointed")
	}
	if err := os.Rename(filepath.Join(dir, "cache"), filepath.Join(t.TempDir(), "gone")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "cache/new.txt", "new", 0o644)
	rec = sealWith(t, st, modeInproc, []string{"cache", "cache/new.txt"})
	requireFile(t, st, rec.SHA, "cache/new.txt", "new")
	// And back: a self-ignoring folder moved in leaves its files out again.
	removeAll(t, dir, "cache")
	writeTree(t, dir, map[string]string{"cache/.gitignore": "*\n", "cache/new.txt": "new"})
	rec = sealWith(t, st, modeInproc, []string{"cache", "cache/.gitignore", "cache/new.txt"})
	if _, ok := lsTree(t, st, rec.SHA)["cache/new.txt"]; ok {
		t.Fatal("a file of a self-ignoring folder moved in was checkpointed")
	}
}

// On a file system with 1-second timestamps, a same-size rewrite in the
// second after a seal is sealed with the new content. The stat cache
// judged such a file by comparing its times with the cache file's, kept in
// nanoseconds by another file system.
func TestInprocCoarseTimestamps(t *testing.T) {
	dir := filepath.Join(testsupport.MountExt4Coarse(t, 64<<20), "work")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	st := openTestStore(t, dir, Options{})
	writeTree(t, dir, map[string]string{"a.txt": "v00", "b.txt": "b"})
	mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
	for i := 1; i <= 12; i++ {
		v := []string{"one", "two"}[i%2]
		writeFile(t, dir, "a.txt", v, 0o644)
		rec := sealWith(t, st, modeInproc, []string{"a.txt"})
		requireFile(t, st, rec.SHA, "a.txt", v)
		if i%4 == 0 { // and once the second has passed, the settled entry
			rec = sealWith(t, st, modeInproc, []string{"a.txt"})
			requireFile(t, st, rec.SHA, "a.txt", v)
		}
	}
	if g := st.inproc.eng.mgrain.get(); g < 1e9 {
		t.Errorf("learned an mtime granularity of %d ns on a 1-second file system", g)
	}
}

// On a file system with 1-second timestamps, an ignore file rewritten in
// place with as many bytes, in the second the ignore checker read it, keeps
// its stamp. The engine took the unchanged stamp for unchanged rules and
// asked its running check-ignore, which answered from the old ones: a file
// the new rules let in was left out of an ok checkpoint (the differential
// test's seed 1796195574160332818). Both the full reconcile and a seal
// naming only the file are tried.
func TestInprocIgnoreFileCoarseRewrite(t *testing.T) {
	mnt := testsupport.MountExt4Coarse(t, 64<<20)
	for _, full := range []bool{true, false} {
		name := map[bool]string{true: "full", false: "changed"}[full]
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(mnt, name)
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			st := openTestStore(t, dir, Options{})
			writeTree(t, dir, map[string]string{".gitignore": "*.log\n", "a.txt": "a", "d/y.log": "y\n"})
			mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
			for i := 1; i <= 8; i++ {
				rules := []string{"*.log\n", "*.tmp\n"}[i%2]
				f, err := os.OpenFile(filepath.Join(dir, ".gitignore"), os.O_WRONLY|os.O_TRUNC, 0)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := f.WriteString(rules); err != nil {
					t.Fatal(err)
				}
				f.Close()
				var rec ckpt.Record
				if full {
					rec = mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
					if st.lastEngine != EngineInproc {
						t.Fatalf("seal %d: the full reconcile was sealed by the %s engine, want the in-process one", i, st.lastEngine)
					}
				} else {
					rec = sealWith(t, st, modeInproc, []string{"d/y.log"})
				}
				if rules == "*.tmp\n" {
					requireFile(t, st, rec.SHA, "d/y.log", "y\n")
				} else if _, err := st.git.Run(t.Context(), nil, "cat-file", "-e", rec.SHA+":d/y.log"); err == nil {
					t.Fatalf("seal %d: checkpoint holds d/y.log, which %q ignores", i, rules)
				}
			}
		})
	}
}

// A stat cache cut short (at a record's end, or inside one) is not taken
// for the newest: the next checkpoint still holds the last edits.
func TestInprocTruncatedStatCache(t *testing.T) {
	t.Parallel()
	for _, cut := range []string{"boundary", "torn", "removed", "garbage"} {
		t.Run(cut, func(t *testing.T) {
			t.Parallel()
			dir, st := newTestStore(t, Options{})
			writeTree(t, dir, map[string]string{"a.txt": "v0", "b.txt": "b0"})
			mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
			writeFile(t, dir, "a.txt", "v1", 0o644)
			sealWith(t, st, modeInproc, []string{"a.txt"})
			mid, _ := os.ReadFile(st.statCachePath())
			writeFile(t, dir, "a.txt", "v2", 0o644)
			sealWith(t, st, modeInproc, []string{"a.txt"})
			full, _ := os.ReadFile(st.statCachePath())
			if len(full) <= len(mid) {
				t.Fatalf("the journal did not grow (%d, then %d bytes)", len(mid), len(full))
			}
			var err error
			switch cut {
			case "boundary":
				err = os.WriteFile(st.statCachePath(), mid, 0o644)
			case "torn":
				err = os.WriteFile(st.statCachePath(), full[:len(full)-7], 0o644)
			case "removed":
				err = os.Remove(st.statCachePath())
			case "garbage":
				err = os.WriteFile(st.statCachePath(), []byte("not a stat cache"), 0o644)
			}
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, dir, "b.txt", "b1", 0o644)
			// A marker's priming stage first, as the daemon does: it must
			// not make the doubtful index pass for a whole one.
			if err := st.Stage(t.Context(), []string{"**"}, []string{"b.txt"}); err != nil {
				t.Fatal(err)
			}
			rec := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, Changed: []string{"b.txt"}})
			requireOK(t, rec)
			requireFile(t, st, rec.SHA, "a.txt", "v2")
			requireFile(t, st, rec.SHA, "b.txt", "b1")
			// The cache is whole again: the next seal is the engine's.
			writeFile(t, dir, "b.txt", "b2", 0o644)
			rec = sealWith(t, st, modeInproc, []string{"b.txt"})
			requireFile(t, st, rec.SHA, "a.txt", "v2")
			requireFile(t, st, rec.SHA, "b.txt", "b2")
		})
	}
}

// An object the engine had found stored is deleted under the store: the
// next checkpoint does not point at it, and holds every file right.
func TestInprocMissingObject(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"blob", "tree"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			dir, st := newTestStore(t, Options{})
			writeTree(t, dir, map[string]string{"a.txt": "a0", "keep/b.txt": "b-content", "c/d.txt": "d0"})
			mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, engine: EngineGit}) // its objects loose, to delete one
			writeFile(t, dir, "a.txt", "a1", 0o644)
			sealWith(t, st, modeInproc, []string{"a.txt"})
			writeFile(t, dir, "a.txt", "a2", 0o644)
			sealWith(t, st, modeInproc, []string{"a.txt"})
			blob := gitStr(t, st, "hash-object", filepath.Join(dir, "keep", "b.txt"))
			obj := blob
			if how == "tree" { // the folder's tree, which the seals carried along untouched
				obj = gitStr(t, st, "rev-parse", st.Records()[0].SHA+":keep")
			}
			if err := os.Remove(filepath.Join(st.gitDir, "objects", obj[:2], obj[2:])); err != nil {
				t.Fatalf("the baseline's %s is not loose: %v", how, err)
			}
			writeFile(t, dir, "c/d.txt", "d1", 0o644)
			rec, err := st.Seal(t.Context(), SealRequest{Kind: ckpt.KindManual, Changed: []string{"c/d.txt"}})
			if err != nil {
				t.Fatalf("seal after an object was deleted: %v", err)
			}
			requireOK(t, rec)
			requireAllObjects(t, st, rec.SHA)
			requireFile(t, st, rec.SHA, "keep/b.txt", "b-content")
			requireFile(t, st, rec.SHA, "a.txt", "a2")
			requireFile(t, st, rec.SHA, "c/d.txt", "d1")
			// The engine seals again afterwards.
			writeFile(t, dir, "a.txt", "a3", 0o644)
			rec = sealWith(t, st, modeInproc, []string{"a.txt"})
			requireAllObjects(t, st, rec.SHA)
		})
	}
}

// The pack an in-process seal just wrote (its blobs, trees and commit) is
// deleted under the store before any other seal, and the next seal's
// parent is another commit (a run's first checkpoint, a capture): the
// engine knew the trees in the pack whole, and its knowledge of the store
// had not seen the pack, so nothing told it of the loss and the checkpoint
// named the missing objects (the differential test's seed
// 1796198775490780340). It sees the pack as it writes it now, and its loss
// as a loss.
func TestInprocOwnPackDeleted(t *testing.T) {
	dir, st := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{"a.txt": "a0", "c/d.txt": "d0"})
	mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, engine: EngineGit})
	writeFile(t, dir, "a.txt", "a1", 0o644)
	sealWith(t, st, modeInproc, []string{"a.txt"})
	writeFile(t, dir, "a.txt", "a2 in the pack", 0o644)
	sealWith(t, st, modeInproc, []string{"a.txt"})
	blob := gitStr(t, st, "hash-object", filepath.Join(dir, "a.txt"))
	raw, err := hex.DecodeString(blob)
	if err != nil {
		t.Fatal(err)
	}
	idxs, _ := filepath.Glob(filepath.Join(st.gitDir, "objects", "pack", "*.idx"))
	gone := 0
	for _, idx := range idxs {
		names, err := gitobj.PackIndexNames(idx, len(raw))
		if err != nil || !bytes.Contains(names, raw) {
			continue
		}
		base := strings.TrimSuffix(idx, ".idx")
		for _, ext := range []string{".pack", ".idx", ".rev"} {
			os.Remove(base + ext)
		}
		gone++
	}
	if gone != 1 {
		t.Fatalf("%d packs hold the last seal's blob, want 1", gone)
	}

	// A run's first checkpoint, on the baseline: its parent is not the
	// commit in the lost pack (whose absence would tell by itself).
	writeFile(t, dir, "c/d.txt", "d1", 0o644)
	rec, err := st.Seal(t.Context(), SealRequest{Kind: ckpt.KindRigSetup, RunID: "r", CodonID: "c", StartSHA: st.Records()[0].SHA, Changed: []string{"c/d.txt"}})
	if err != nil {
		t.Fatalf("seal after the pack was deleted: %v", err)
	}
	requireAllObjects(t, st, rec.SHA)
	requireFile(t, st, rec.SHA, "a.txt", "a2 in the pack")
	requireFile(t, st, rec.SHA, "c/d.txt", "d1")
}

// An autosave that retries a path it still cannot read records nothing new
// (the partial checkpoint before it says so already); a new failure, or
// the path readable again, is recorded.
func TestRetryOfUnreadablePathRecordsNothingNew(t *testing.T) {
	t.Parallel()
	for _, engine := range []string{EngineGit, EngineInproc} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			dir, st := newTestStore(t, Options{Engine: engine})
			writeTree(t, dir, map[string]string{"a.txt": "a"})
			mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
			mkfifo(t, dir, "pipe")
			req := SealRequest{Kind: ckpt.KindAutosave, SkipUnchanged: true, Changed: []string{"pipe"}}
			if rec := mustSeal(t, st, req); rec.State != ckpt.StatePartial {
				t.Fatalf("first seal: %s, want partial", rec.State)
			}
			for range 2 {
				rec, err := st.Seal(t.Context(), req)
				if err != nil || rec.ID != "" {
					t.Fatalf("a retry with the same unreadable path recorded %+v (%v)", rec, err)
				}
			}
			mkfifo(t, dir, "pipe2")
			if rec := mustSeal(t, st, SealRequest{Kind: ckpt.KindAutosave, SkipUnchanged: true, Changed: []string{"pipe", "pipe2"}}); rec.State != ckpt.StatePartial || len(rec.Issues) != 2 {
				t.Fatalf("a new unreadable path: %+v", rec)
			}
			removeAll(t, dir, "pipe")
			removeAll(t, dir, "pipe2")
			writeFile(t, dir, "pipe", "a file now", 0o644)
			rec := mustSeal(t, st, SealRequest{Kind: ckpt.KindAutosave, SkipUnchanged: true, Changed: []string{"pipe", "pipe2"}})
			requireOK(t, rec)
			requireFile(t, st, rec.SHA, "pipe", "a file now")
		})
	}
}

// cairn's private index left empty, cut short or overwritten (a killed
// git renamed an empty lock over it; a bad sector) is rebuilt from the work
// tree, and the store says so once; the seal is right and every later one.
func TestDamagedIndexRebuilt(t *testing.T) {
	t.Parallel()
	for _, engine := range []string{EngineGit, EngineInproc} {
		for _, damage := range []string{"empty", "cut", "garbage", "checksum"} {
			t.Run(engine+"-"+damage, func(t *testing.T) {
				t.Parallel()
				dir, st := newTestStore(t, Options{Engine: engine})
				writeTree(t, dir, map[string]string{"a.txt": "a0", "d/b.txt": "b0", "d/e/c.txt": "c0"})
				mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
				writeFile(t, dir, "a.txt", "a1", 0o644)
				mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, Changed: []string{"a.txt"}})
				st.TakeNotes()
				idx, err := os.ReadFile(st.git.Index)
				if err != nil {
					t.Fatal(err)
				}
				switch damage {
				case "empty":
					idx = nil
				case "cut":
					idx = idx[:len(idx)/2]
				case "garbage":
					idx = []byte(strings.Repeat("not an index ", 20))
				case "checksum":
					idx[len(idx)-1] ^= 0xff
				}
				if err := os.WriteFile(st.git.Index, idx, 0o644); err != nil {
					t.Fatal(err)
				}
				writeFile(t, dir, "d/b.txt", "b1", 0o644)
				rec := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, Changed: []string{"d/b.txt"}})
				requireOK(t, rec)
				requireFile(t, st, rec.SHA, "a.txt", "a1")
				requireFile(t, st, rec.SHA, "d/b.txt", "b1")
				requireFile(t, st, rec.SHA, "d/e/c.txt", "c0")
				if notes := st.TakeNotes(); len(notes) != 1 || !strings.Contains(notes[0], "private index was damaged") {
					t.Errorf("notes %q, want one saying the index was rebuilt", notes)
				}
				writeFile(t, dir, "d/e/c.txt", "c1", 0o644)
				rec = mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, Changed: []string{"d/e/c.txt"}})
				requireFile(t, st, rec.SHA, "a.txt", "a1")
				requireFile(t, st, rec.SHA, "d/e/c.txt", "c1")
				if notes := st.TakeNotes(); len(notes) != 0 {
					t.Errorf("a later seal noted %q", notes)
				}
			})
		}
	}
}

// A blob the git engine's index names is deleted under the store: the seal
// that finds it rebuilds the index from the work tree and is ok, naming
// only stored objects (write-tree alone reuses the folder's cached tree).
func TestGitSealRestoresMissingBlob(t *testing.T) {
	t.Parallel()
	dir, st := newTestStore(t, Options{Engine: EngineGit})
	writeTree(t, dir, map[string]string{"a.txt": "a0", "keep/b.txt": "b-content", "c/d.txt": "d0"})
	mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
	blob := gitStr(t, st, "hash-object", filepath.Join(dir, "keep", "b.txt"))
	if err := os.Remove(filepath.Join(st.gitDir, "objects", blob[:2], blob[2:])); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "c/d.txt", "d1", 0o644)
	rec := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, Changed: []string{"c/d.txt"}})
	requireOK(t, rec)
	requireAllObjects(t, st, rec.SHA)
	requireFile(t, st, rec.SHA, "keep/b.txt", "b-content")
	if notes := st.TakeNotes(); len(notes) == 0 {
		t.Error("the repair was not noted")
	}
}

// The parent checkpoint's commit is removed under the store (a foreign gc
// that pruned a seal's objects before its ref named them): the next seal
// does not fail for ever, but seals from the whole work tree, on the
// checkpoint's own ref naming the lost parent, on a run branch after the
// newest checkpoint still whole.
func TestParentCheckpointRemoved(t *testing.T) {
	t.Parallel()
	for _, engine := range []string{EngineGit, EngineInproc} {
		for _, run := range []string{"", "r1"} {
			t.Run(engine+"-run="+run, func(t *testing.T) {
				t.Parallel()
				dir, st := newTestStore(t, Options{Engine: engine})
				writeTree(t, dir, map[string]string{"a.txt": "a0", "b.txt": "b0"})
				// c1 loose (the git way), so removing c2's pack leaves it.
				c1 := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, RunID: run, engine: EngineGit})
				writeFile(t, dir, "a.txt", "a1", 0o644)
				c2 := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, RunID: run, Changed: []string{"a.txt"}})
				// Remove c2's commit wherever it is stored: loose, or the
				// pack the in-process engine wrote with the rest of the seal.
				if err := os.Remove(filepath.Join(st.gitDir, "objects", c2.SHA[:2], c2.SHA[2:])); err != nil {
					packs, _ := filepath.Glob(filepath.Join(st.gitDir, "objects", "pack", "pack-*"))
					for _, p := range packs {
						os.Remove(p)
					}
				}
				if _, err := st.git.Run(t.Context(), nil, "cat-file", "-e", c2.SHA); err == nil {
					t.Fatal("the commit is still there")
				}
				st.TakeNotes()
				writeFile(t, dir, "b.txt", "b1", 0o644)
				c3 := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, RunID: run, Changed: []string{"b.txt"}})
				requireOK(t, c3)
				requireAllObjects(t, st, c3.SHA)
				requireFile(t, st, c3.SHA, "a.txt", "a1")
				requireFile(t, st, c3.SHA, "b.txt", "b1")
				wantParent := c2.SHA
				if run != "" {
					wantParent = c1.SHA
					if got := gitStr(t, st, "rev-parse", c3.SHA+"^"); got != c1.SHA {
						t.Errorf("c3's git parent %s, want c1 %s", got, c1.SHA)
					}
				}
				if c3.Parent != wantParent {
					t.Errorf("c3's parent %s, want %s", c3.Parent, wantParent)
				}
				if notes := st.TakeNotes(); len(notes) == 0 || !strings.Contains(strings.Join(notes, "\n"), "missing from the store") {
					t.Errorf("notes %q, want the lost checkpoint named", notes)
				}
				writeFile(t, dir, "a.txt", "a2", 0o644)
				c4 := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, RunID: run, Changed: []string{"a.txt"}})
				requireAllObjects(t, st, c4.SHA)
				requireFile(t, st, c4.SHA, "a.txt", "a2")
				requireFile(t, st, c4.SHA, "b.txt", "b1")
			})
		}
	}
}

// A repository made in the work tree where a tracked file stood (an agent
// runs `git init` in a new folder): an incremental seal of the folder and
// its files holds what a full reconcile holds. Both engines left its files
// out and recorded ok.
func TestIncrementalSealOfNewNestedRepository(t *testing.T) {
	t.Parallel()
	// Naming the new .gitignore makes the seal a full reconcile of git's
	// listing; without it, the named paths are planned one by one.
	changed := map[string][]string{
		"listing": {"sub", "sub/main.go", "sub/.gitignore", "sub/main.o"},
		"named":   {"sub", "sub/main.go", "sub/main.o"},
	}
	for _, engine := range []string{EngineGit, EngineInproc} {
		for how, paths := range changed {
			t.Run(engine+"/"+how, func(t *testing.T) {
				t.Parallel()
				dir, st := newTestStore(t, Options{Engine: engine})
				writeTree(t, dir, map[string]string{"a.txt": "a", "sub": "a file first"})
				mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
				removeAll(t, dir, "sub")
				writeTree(t, dir, map[string]string{"sub/main.go": "package main\n", "sub/.gitignore": "*.o\n", "sub/main.o": "obj"})
				if out, err := exec.Command("git", "init", "-q", filepath.Join(dir, "sub")).CombinedOutput(); err != nil {
					t.Fatalf("git init: %v: %s", err, out)
				}
				rec := mustSeal(t, st, SealRequest{Kind: ckpt.KindAutosave, Changed: paths})
				requireOK(t, rec)
				full := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
				got, want := strings.Join(treePaths(t, st, rec.SHA), " "), strings.Join(treePaths(t, st, full.SHA), " ")
				if got != want || !strings.Contains(want, "sub/main.go") {
					t.Fatalf("incremental seal holds [%s]; full reconcile [%s]", got, want)
				}
			})
		}
	}
}
