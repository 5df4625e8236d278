//go:build unix

package snapshot

import (
	"context"
	"crypto/rand"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// Tests of the in-process restore (inprocrestore.go). Each compares the work
// tree a restore leaves with what `git checkout --force` of the same target
// leaves in a copy of the work tree taken just before (gitCheckoutRef), file
// by file: kind, bytes, exec bit, link target.

// diskEntry is what a work-tree path holds, as the comparison sees it.
type diskEntry struct {
	kind string // "file", "exec", "link", "dir", "other"
	body string // a file's bytes, a link's target
}

// scanDisk lists every path under root (folders included, for the
// file↔folder swaps), without following links.
func scanDisk(t *testing.T, root string) map[string]diskEntry {
	t.Helper()
	out := map[string]diskEntry{}
	err := filepath.WalkDir(root, func(abs string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if abs == root {
			return nil
		}
		rel := filepath.ToSlash(strings.TrimPrefix(abs, root+string(filepath.Separator)))
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case fi.IsDir():
			out[rel] = diskEntry{kind: "dir"}
		case fi.Mode()&fs.ModeSymlink != 0:
			l, err := os.Readlink(abs)
			if err != nil {
				return err
			}
			out[rel] = diskEntry{kind: "link", body: l}
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(abs)
			if err != nil {
				return err
			}
			k := "file"
			if fi.Mode()&0o100 != 0 {
				k = "exec"
			}
			out[rel] = diskEntry{kind: k, body: string(b)}
		default:
			out[rel] = diskEntry{kind: "other"}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("scan %s: %v", root, err)
	}
	return out
}

// diskDiff describes how two scans differ ("" when they are the same).
func diskDiff(want, got map[string]diskEntry) string {
	var bad []string
	for p, w := range want {
		g, ok := got[p]
		switch {
		case !ok:
			bad = append(bad, fmt.Sprintf("%q: want %s %.40q, missing", p, w.kind, w.body))
		case g != w:
			bad = append(bad, fmt.Sprintf("%q: want %s %.40q, got %s %.40q", p, w.kind, w.body, g.kind, g.body))
		}
	}
	for p, g := range got {
		if _, ok := want[p]; !ok {
			bad = append(bad, fmt.Sprintf("%q: want nothing, got %s %.40q", p, g.kind, g.body))
		}
	}
	slices.Sort(bad)
	return strings.Join(bad, "\n    ")
}

// copyTree copies the work tree src to dst (cp -a: modes, links as links).
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	if out, err := exec.Command("cp", "-a", src+"/.", dst).CombinedOutput(); err != nil {
		t.Fatalf("cp -a %s %s: %v\n%s", src, dst, err, out)
	}
}

// gitCheckoutRef is the reference a restore is compared with: in dir (a
// copy of the work tree as it was before the restore), git's own checkout
// of target with --force, run from a repository of its own that reads the
// store's objects as an alternate, its index the position's tree (what
// cairn tracked: git deletes only those of its files the target lacks).
func gitCheckoutRef(t *testing.T, st *Store, dir, pos, target string) {
	t.Helper()
	gitCheckoutAt(t, st, dir, pos, "--detach", target)
}

// gitCheckoutPaths is gitCheckoutRef for a restore of paths: `checkout
// --no-overlay` of target for the paths (what the target lacks under them
// and the index tracks is deleted).
func gitCheckoutPaths(t *testing.T, st *Store, dir, pos, target string, paths []string) {
	t.Helper()
	args := []string{"--no-overlay", target, "--"}
	for _, p := range paths {
		args = append(args, ":(literal)"+p)
	}
	gitCheckoutAt(t, st, dir, pos, args...)
}

// gitCheckoutAt runs `git checkout -q --force args…` on the work tree dir
// with git's index at pos (gitCheckoutRef).
func gitCheckoutAt(t *testing.T, st *Store, dir, pos string, args ...string) {
	t.Helper()
	repo := t.TempDir()
	hostGit(t, repo, "init", "-q")
	alt := filepath.Join(repo, ".git", "objects", "info", "alternates")
	if err := os.WriteFile(alt, []byte(filepath.Join(st.GitDir(), "objects")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	g := func(args ...string) {
		t.Helper()
		hostGit(t, repo, append([]string{"--work-tree=" + dir}, args...)...)
	}
	if pos != "" {
		g("update-ref", "--no-deref", "HEAD", pos)
		g("read-tree", pos)
	}
	g(append([]string{"checkout", "-q", "--force"}, args...)...)
}

// restoreAgainstGit restores st's work tree to target (whole, or paths),
// and requires it to come out as git's checkout of the same target leaves a
// copy of it, the in-process way (the git way with engine "git").
func restoreAgainstGit(t *testing.T, st *Store, target string, wantEngine string) ckpt.Outcome {
	t.Helper()
	ws := st.WorkTree()
	ref := t.TempDir()
	copyTree(t, ws, ref)
	pos := st.Position()
	res, err := st.Restore(context.Background(), ckpt.Request{Target: target})
	if err != nil {
		t.Fatalf("restore to %s: %v", target, err)
	}
	if st.lastRestore != wantEngine {
		t.Errorf("the restore was written by %q, want %q", st.lastRestore, wantEngine)
	}
	gitCheckoutRef(t, st, ref, pos, target)
	got := scanDisk(t, ws)
	if wantEngine == EngineGit {
		dropEmptyFolders(scanDisk(t, ref), got)
	}
	if d := diskDiff(scanDisk(t, ref), got); d != "" {
		t.Errorf("the restore to %s differs from git checkout --force (want = git, got = cairn):\n    %s", short7(target), d)
	}
	return res
}

// dropEmptyFolders drops from got the folders want lacks that hold
// nothing: the git way's checkout starts from the pre-restore checkpoint's
// index, so the folders of tracked files removed before the restore are
// not its to clear (git's own checkout from the position's index clears
// them; the in-process restore does too).
func dropEmptyFolders(want, got map[string]diskEntry) {
	for p, g := range got {
		if _, ok := want[p]; ok || g.kind != "dir" {
			continue
		}
		empty := true
		for q := range got {
			if strings.HasPrefix(q, p+"/") && got[q].kind != "dir" {
				empty = false
				break
			}
		}
		if empty {
			delete(got, p)
		}
	}
}

// TestInprocRestoreLikeCheckout: modes (the exec bit both ways), deletions
// of tracked files only (untracked and ignored files stay), file↔folder
// swaps both ways (with untracked files in the folder that goes), a folder
// emptied by the deletions, and the undo, each the same as git's checkout
// leaves, written in-process; the same with engine = "git" writes by git.
func TestInprocRestoreLikeCheckout(t *testing.T) {
	for _, eng := range []string{EngineInproc, EngineGit} {
		t.Run(eng, func(t *testing.T) {
			ctx := context.Background()
			ws, st := newTestStore(t, Options{Engine: eng})
			writeTree(t, ws, map[string]string{".gitignore": "*.log\n", "keep.txt": "same\n", "mod.txt": "one\n",
				"gone/a.txt": "a\n", "gone/deep/b.txt": "b\n", "f2d": "a file\n", "d2f/x.txt": "x\n", "d2f/sub/y.txt": "y\n"})
			writeFile(t, ws, "run.sh", "#!/bin/sh\necho one\n", 0o755)
			writeFile(t, ws, "plain.sh", "#!/bin/sh\n", 0o644)
			one := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, Label: "one"})

			// two: edits, a mode flipped each way, files added and removed,
			// a file made a folder and a folder made a file.
			writeFile(t, ws, "mod.txt", "two\n", 0o644)
			chmod(t, ws, "run.sh", 0o644)
			chmod(t, ws, "plain.sh", 0o755)
			removeAll(t, ws, "gone")
			removeAll(t, ws, "f2d")
			removeAll(t, ws, "d2f")
			writeTree(t, ws, map[string]string{"f2d/inside.txt": "in\n", "d2f": "now a file\n", "new/n.txt": "n\n", "solo/deep/only.txt": "o\n"})
			two := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, Label: "two"})
			// A tracked file removed by hand since: its folders, empty now,
			// go with the restore (git's checkout removes them).
			removeAll(t, ws, "solo/deep/only.txt")

			// Files cairn never sealed: untracked (written after the last
			// seal; the pre-restore checkpoint holds it) and ignored.
			writeFile(t, ws, "by-hand.txt", "mine\n", 0o644)
			writeFile(t, ws, "new/by-hand.txt", "mine too\n", 0o644)
			writeFile(t, ws, "debug.log", "ignored\n", 0o644)
			writeFile(t, ws, "f2d/untracked.txt", "in the folder that goes\n", 0o644)

			res := restoreAgainstGit(t, st, one.SHA, eng)
			if len(res.Diff) != 0 {
				t.Errorf("verify: %v", res.Diff)
			}
			for _, p := range []string{"by-hand.txt", "new/by-hand.txt", "debug.log"} {
				if _, err := os.Lstat(filepath.Join(ws, p)); err != nil {
					t.Errorf("%s (never tracked) is gone: %v", p, err)
				}
			}
			if fi, err := os.Stat(filepath.Join(ws, "run.sh")); err != nil || fi.Mode()&0o111 == 0 {
				t.Errorf("run.sh lost its exec bit: %v %v", fi, err)
			}
			// Forward again, then the undo of that restore.
			res2 := restoreAgainstGit(t, st, two.SHA, eng)
			restoreAgainstGit(t, st, res2.PreRestore.SHA, eng)
			// The next seals are whole and right: an incremental one on the
			// restored tree, then a full reconcile.
			writeFile(t, ws, "mod.txt", "three\n", 0o644)
			rec, err := st.Seal(ctx, SealRequest{Kind: ckpt.KindManual, Changed: []string{"mod.txt"}})
			if err != nil {
				t.Fatal(err)
			}
			assertTreeMatchesDisk(t, st, rec.SHA, sealable(t, ws))
			rec = mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
			assertTreeMatchesDisk(t, st, rec.SHA, sealable(t, ws))
		})
	}
}

// TestInprocRestoreRewritesInPlaceOnlyWhenSafe: a file the restore edits
// is rewritten in its own inode (no new blocks to allocate), unless another
// name shares it: git's checkout unlinks and recreates, so an ignored hard
// link to a tracked file keeps its content, and so it does here.
func TestInprocRestoreRewritesInPlaceOnlyWhenSafe(t *testing.T) {
	ws, st := newTestStore(t, Options{})
	writeTree(t, ws, map[string]string{".gitignore": "*.log\n", "edit.txt": "one, and a longer line\n", "linked.txt": "one\n"})
	one := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, Label: "one"})
	writeFile(t, ws, "edit.txt", "two\n", 0o644)
	removeAll(t, ws, "linked.txt")
	writeFile(t, ws, "linked.txt", "two\n", 0o644)
	if err := os.Link(filepath.Join(ws, "linked.txt"), filepath.Join(ws, "alias.log")); err != nil {
		t.Fatal(err)
	}
	mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, Label: "two"})
	inode := func(p string) uint64 {
		t.Helper()
		fi, err := os.Lstat(filepath.Join(ws, p))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t).Ino
	}
	edit, linked := inode("edit.txt"), inode("linked.txt")

	restoreAgainstGit(t, st, one.SHA, EngineInproc)
	if inode("edit.txt") != edit {
		t.Error("edit.txt was replaced, not rewritten in place")
	}
	if inode("linked.txt") == linked {
		t.Error("linked.txt (two names) was rewritten in place")
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "alias.log")); string(b) != "two\n" {
		t.Errorf("alias.log, a second name of linked.txt, = %q, want it kept", b)
	}
}

// sealable are the regular files of ws but the ignored *.log.
func sealable(t *testing.T, ws string) []string {
	return slices.DeleteFunc(regularFiles(t, ws), func(p string) bool { return strings.HasSuffix(p, ".log") })
}

// TestInprocRestoreSymlinks: a target holding symbolic links (a runtime's
// commit; cairn's own checkpoints hold regular files) gets them made as
// links, and a link where a file goes is replaced, never written through.
func TestInprocRestoreSymlinks(t *testing.T) {
	ws, st := newTestStore(t, Options{})
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("not cairn's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	writeTree(t, ws, map[string]string{"a.txt": "a\n", "dir/b.txt": "b\n"})
	base := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
	// The target: base's tree plus a link to a.txt and one into dir/.
	blob := strings.TrimSpace(string(gitOut(t, st, strings.NewReader("a.txt"), "hash-object", "-w", "--stdin")))
	blob2 := strings.TrimSpace(string(gitOut(t, st, strings.NewReader("../outside-nowhere"), "hash-object", "-w", "--stdin")))
	var listing strings.Builder
	for p, e := range lsTree(t, st, base.SHA) {
		if !strings.Contains(p, "/") {
			fmt.Fprintf(&listing, "%s %s %s\t%s\n", e.mode, e.typ, e.sha, p)
		}
	}
	dirTree := strings.TrimSpace(string(gitOut(t, st, nil, "rev-parse", base.SHA+":dir")))
	fmt.Fprintf(&listing, "040000 tree %s\tdir\n120000 blob %s\tlink\n120000 blob %s\tup\n", dirTree, blob, blob2)
	tree := strings.TrimSpace(string(gitOut(t, st, strings.NewReader(listing.String()), "mktree")))
	target := strings.TrimSpace(string(gitOut(t, st, nil, "commit-tree", "-p", base.SHA, "-m", "links", tree)))

	// The attacker's link where the target's link "up" goes: replaced
	// itself, its target untouched.
	symlink(t, ws, secret, "up")
	restoreAgainstGit(t, st, target, EngineInproc)
	if l, err := os.Readlink(filepath.Join(ws, "link")); err != nil || l != "a.txt" {
		t.Errorf("link = %q, %v; want a link to a.txt", l, err)
	}
	if b, _ := os.ReadFile(secret); string(b) != "not cairn's\n" {
		t.Errorf("the file behind a planted link was written: %q", b)
	}
}

// TestInprocRestoreAttackerLinks is written as a local attacker would try
// it: links planted in the work tree where a restore writes or deletes (a
// folder on the way made a link to a folder outside, a file made a link to
// a file outside). Nothing outside the work tree is written, deleted or
// followed; the restore names the paths it could not write.
func TestInprocRestoreAttackerLinks(t *testing.T) {
	ws, st := newTestStore(t, Options{})
	outside := t.TempDir()
	writeTree(t, outside, map[string]string{"w/f.txt": "outside f\n", "d/g.txt": "outside g\n", "target.txt": "outside target\n"})
	before := hashDir(t, outside)
	writeTree(t, ws, map[string]string{"w/f.txt": "one f\n", "x.txt": "one x\n", "keep.txt": "k\n"})
	one := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
	removeAll(t, ws, "w")
	writeTree(t, ws, map[string]string{"x.txt": "two x\n", "d/g.txt": "two g\n"})
	mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})

	// The restore to one writes w/f.txt and x.txt and deletes d/g.txt: the
	// attacker makes w and d links to folders outside, and x.txt a link to
	// a file outside.
	removeAll(t, ws, "d")
	symlink(t, ws, filepath.Join(outside, "w"), "w")
	symlink(t, ws, filepath.Join(outside, "d"), "d")
	removeAll(t, ws, "x.txt")
	symlink(t, ws, filepath.Join(outside, "target.txt"), "x.txt")
	res, err := st.Restore(context.Background(), ckpt.Request{Target: one.SHA})
	if err != nil {
		t.Fatal(err)
	}
	if st.lastRestore != EngineInproc {
		t.Errorf("restored by %q", st.lastRestore)
	}
	if hashDir(t, outside) != before {
		t.Fatal("the restore wrote or deleted outside the work tree, through a planted link")
	}
	if b, err := os.ReadFile(filepath.Join(ws, "x.txt")); err != nil || string(b) != "one x\n" {
		t.Errorf("x.txt = %q, %v; want the link replaced by the file", b, err)
	}
	if fi, err := os.Lstat(filepath.Join(ws, "x.txt")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("x.txt is not a regular file: %v %v", fi, err)
	}
	// The link w stood where the target has a folder: the link itself is
	// replaced by a folder (as git's checkout does), never written through.
	if fi, err := os.Lstat(filepath.Join(ws, "w")); err != nil || !fi.IsDir() {
		t.Errorf("w is not a folder: %v %v", fi, err)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "w/f.txt")); err != nil || string(b) != "one f\n" {
		t.Errorf("w/f.txt = %q, %v", b, err)
	}
	if len(res.Diff) != 0 {
		t.Errorf("verify: %+v", res.Diff)
	}
}

// TestInprocRestoreToldDirtySetVouchesWhatItOverwrites: a restore told the
// watch's dirty set seals only those paths first. Files it overwrites or
// deletes that the set does not name (writes the watch missed) are read
// before anything is written, and those not as the checkpoint holds them go
// into a second pre-restore checkpoint: nothing is overwritten that no
// checkpoint holds.
func TestInprocRestoreToldDirtySetVouchesWhatItOverwrites(t *testing.T) {
	ws, st := newTestStore(t, Options{})
	writeTree(t, ws, map[string]string{"a.txt": "a1\n", "b.txt": "b1\n", "keep.txt": "k\n"})
	one := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
	writeTree(t, ws, map[string]string{"a.txt": "a2\n", "b.txt": "b2\n", "e.txt": "e2\n"})
	mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
	// Unreported: a.txt rewritten, e.txt (which the restore deletes)
	// rewritten; reported: b.txt.
	writeFile(t, ws, "a.txt", "a3, never sealed\n", 0o644)
	writeFile(t, ws, "e.txt", "e3, never sealed\n", 0o644)
	writeFile(t, ws, "b.txt", "b3\n", 0o644)
	res, err := st.Restore(context.Background(), ckpt.Request{Target: one.SHA, Changed: []string{"b.txt"}})
	if err != nil {
		t.Fatal(err)
	}
	if st.lastRestore != EngineInproc {
		t.Fatalf("restored by %s, want the in-process engine", st.lastRestore)
	}
	if len(res.Diff) != 0 {
		t.Fatalf("verify: %+v", res.Diff)
	}
	for rel, want := range map[string]string{"a.txt": "a3, never sealed\n", "b.txt": "b3\n", "e.txt": "e3, never sealed\n", "keep.txt": "k\n"} {
		requireFile(t, st, res.PreRestore.SHA, rel, want)
	}
	for rel, want := range map[string]string{"a.txt": "a1\n", "b.txt": "b1\n"} {
		if b, err := os.ReadFile(filepath.Join(ws, rel)); err != nil || string(b) != want {
			t.Errorf("%s after the restore: %q, %v; want %q", rel, b, err, want)
		}
	}
	if _, err := os.Lstat(filepath.Join(ws, "e.txt")); !os.IsNotExist(err) {
		t.Errorf("e.txt after the restore: %v, want it deleted", err)
	}
}

// TestInprocRestoreKeepsFileWhereTrackedFolderWas: the checkpoint the tree
// is at holds a/b/f1; a file "a" now stands where folder a was; the target
// lacks both. The tracked file is gone already, and the sweep of the
// folders its deletion empties once removed whatever stood at "a" (a file
// too); it removes only empty folders now, and "a" stays, as git's
// checkout leaves it (the differential test's seed 1796198350322755820).
func TestInprocRestoreKeepsFileWhereTrackedFolderWas(t *testing.T) {
	ws, st := newTestStore(t, Options{})
	writeTree(t, ws, map[string]string{"keep.txt": "k\n"})
	one := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
	writeTree(t, ws, map[string]string{"a/b/f1": "f\n"})
	mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
	removeAll(t, ws, "a")
	writeFile(t, ws, "a", "a file now\n", 0o644)
	if _, err := st.Restore(context.Background(), ckpt.Request{Target: one.SHA}); err != nil {
		t.Fatal(err)
	}
	if st.lastRestore != EngineInproc {
		t.Fatalf("restored by %s, want the in-process engine", st.lastRestore)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "a")); err != nil || string(b) != "a file now\n" {
		t.Fatalf("a after the restore: %q, %v; want the file left as it was", b, err)
	}
}

// TestInprocRestoreLeavesFoldersOfFilesGoneWithTheirFolder: the checkpoint
// the tree is at holds a/b/f1 and a/b/deep/in/x.txt; the folder
// a/b/deep/in was moved away, leaving a/b/deep empty. git's checkout to a
// target holding neither deletes a/b/f1 and removes its folders if empty,
// but schedules nothing for x.txt, whose own folder is gone: a/b/deep, so
// a/b, stay. The in-process restore once removed them all (the
// differential test's seed 1796198589685202386).
func TestInprocRestoreLeavesFoldersOfFilesGoneWithTheirFolder(t *testing.T) {
	for _, engine := range []string{EngineInproc, EngineGit} {
		t.Run(engine, func(t *testing.T) {
			ws, st := newTestStore(t, Options{Engine: engine})
			writeTree(t, ws, map[string]string{"keep.txt": "k\n"})
			one := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
			writeTree(t, ws, map[string]string{"a/b/f1": "f\n", "a/b/deep/in/x.txt": "x\n"})
			mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
			if err := os.Rename(filepath.Join(ws, "a/b/deep/in"), filepath.Join(t.TempDir(), "in")); err != nil {
				t.Fatal(err)
			}
			if _, err := st.Restore(context.Background(), ckpt.Request{Target: one.SHA}); err != nil {
				t.Fatal(err)
			}
			if st.lastRestore != engine {
				t.Fatalf("restored by %s, want %s", st.lastRestore, engine)
			}
			if fi, err := os.Lstat(filepath.Join(ws, "a/b/deep")); err != nil || !fi.IsDir() {
				t.Fatalf("a/b/deep after the restore: %v; want the empty folder left, as git leaves it", err)
			}
			if _, err := os.Lstat(filepath.Join(ws, "a/b/f1")); !os.IsNotExist(err) {
				t.Fatalf("a/b/f1 after the restore: %v, want it deleted", err)
			}
		})
	}
}

// TestInprocRestoreKeepsUnsealedInTheWay: an ignored file (never sealed)
// standing, outside the paths a restore of paths names, where the target
// needs a folder is not deleted (git's checkout would delete it); the
// restore names the path it could not write. (A whole restore replaces it
// once a second pre-restore checkpoint holds it:
// TestRestoreReplacesUnsealedFileWhereFolderGoes.)
func TestInprocRestoreKeepsUnsealedInTheWay(t *testing.T) {
	ws, st := newTestStore(t, Options{})
	writeTree(t, ws, map[string]string{".gitignore": "*.tmp\n", "d.log/f.txt": "f\n"})
	one := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
	writeFile(t, ws, ".gitignore", "*.log\n", 0o644)
	removeAll(t, ws, "d.log")
	writeFile(t, ws, "d.log", "an ignored file, never sealed\n", 0o644)
	res, err := st.Restore(context.Background(), ckpt.Request{Target: one.SHA, Paths: []string{"d.log/f.txt"}})
	if err != nil {
		t.Fatal(err)
	}
	if st.lastRestore != EngineInproc {
		t.Errorf("restored by %q", st.lastRestore)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "d.log")); err != nil || string(b) != "an ignored file, never sealed\n" {
		t.Errorf("the ignored file in the way: %q, %v", b, err)
	}
	if !slices.ContainsFunc(res.Diff, func(p ckpt.PathIssue) bool { return p.Path == "d.log/f.txt" }) {
		t.Errorf("d.log/f.txt is not named as not written: %+v", res.Diff)
	}
}

// TestInprocRestoreRefusesMissingObject: a restore whose target lacks an
// object is refused before anything is sealed or written, by the in-process
// check (the damage tests, run with the in-process engine).
func TestInprocRestoreRefusesMissingObject(t *testing.T) {
	dir, st, one, two, _ := damageFixture(t, EngineInproc)
	blob := lsTree(t, st, one.SHA)["a/f07.txt"].sha
	if err := os.Remove(looseObject(t, st, blob)); err != nil {
		t.Fatal(err)
	}
	tree := strings.TrimSpace(string(gitOut(t, st, nil, "rev-parse", one.SHA+":b")))
	if err := os.Remove(looseObject(t, st, tree)); err != nil {
		t.Fatal(err)
	}
	refusedUntouched(t, dir, st, one, ckpt.Request{}, "blob a/f07.txt "+blob+" missing", "tree b "+tree+" missing")
	refusedUntouched(t, dir, st, one, ckpt.Request{Paths: []string{"a/f07.txt"}}, "blob a/f07.txt "+blob+" missing")
	restoreClean(t, dir, st, two)
	if st.lastRestore != EngineInproc {
		t.Errorf("restored by %q", st.lastRestore)
	}
}

// TestInprocRestoreLinkRace is written as a local attacker would try it:
// while restores write and delete files in d/, the attacker swaps d with a
// link to a folder outside the work tree, again and again (renameat2
// exchange). The files outside are never written, deleted or replaced.
func TestInprocRestoreLinkRace(t *testing.T) {
	ws, st := newTestStore(t, Options{})
	outside := t.TempDir()
	files := func(gen string) map[string]string {
		m := map[string]string{"keep.txt": "k\n"}
		for i := range 20 {
			m[fmt.Sprintf("d/f%02d.txt", i)] = fmt.Sprintf("%s %d\n", gen, i)
			m[fmt.Sprintf("d/sub/g%02d.txt", i)] = fmt.Sprintf("%s %d\n", gen, i)
		}
		return m
	}
	writeTree(t, ws, files("one"))
	one := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
	removeAll(t, ws, "d/sub")
	writeTree(t, ws, files("two"))
	removeAll(t, ws, "d/sub")
	two := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
	out := files("outside")
	writeTree(t, outside, out)
	before := hashDir(t, outside)
	// The swap: "d" and "swap" (a link to outside/d) trade places.
	if err := os.Symlink(filepath.Join(outside, "d"), filepath.Join(ws, "swap")); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = unix.Renameat2(unix.AT_FDCWD, filepath.Join(ws, "d"), unix.AT_FDCWD, filepath.Join(ws, "swap"), unix.RENAME_EXCHANGE)
		}
	}()
	deadline := time.Now().Add(2 * time.Second)
	n, wrote := 0, 0
	for ; time.Now().Before(deadline); n++ {
		target := one
		if n%2 == 1 {
			target = two
		}
		// Told the dirty set (none), as a watched restore: the pre-restore
		// checkpoint is the engine's, and most restores reach the writes.
		// A full reconcile racing the swap may fail (git refuses a path
		// beyond a link); that is not this test's point.
		if _, err := st.Restore(context.Background(), ckpt.Request{Target: target.SHA, Changed: []string{}}); err != nil {
			t.Logf("restore %d: %v", n, err)
		}
		if st.lastRestore == EngineInproc {
			wrote++
		}
	}
	close(stop)
	<-done
	if hashDir(t, outside) != before {
		t.Fatalf("after %d restores racing a folder swapped for a link, files outside the work tree changed", n)
	}
	if wrote == 0 {
		t.Fatalf("none of %d restores reached the in-process writes", n)
	}
	t.Logf("%d restores raced the swap, %d wrote in-process", n, wrote)
}

// TestInprocRestoreKeepsOverwrittenIgnored: an ignored file at a path the
// target holds is overwritten by the restore, so the pre-restore checkpoint
// must hold it (a second one on the first stages it), directly and told
// the dirty set; the undo gives it back.
func TestInprocRestoreKeepsOverwrittenIgnored(t *testing.T) {
	for _, watched := range []bool{false, true} {
		t.Run(fmt.Sprintf("watched=%v", watched), func(t *testing.T) {
			ctx := context.Background()
			ws, st := newTestStore(t, Options{})
			writeTree(t, ws, map[string]string{".gitignore": "*.tmp\n", "notes.log": "the target's\n", "a.txt": "a\n"})
			target := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
			removeAll(t, ws, "notes.log")
			writeFile(t, ws, ".gitignore", "*.log\n", 0o644)
			mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
			writeFile(t, ws, "notes.log", "mine, ignored, never sealed\n", 0o644)
			req := ckpt.Request{Target: target.SHA}
			if watched {
				req.Changed = []string{"notes.log"}
			}
			res, err := st.Restore(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if st.lastRestore != EngineInproc {
				t.Errorf("restored by %q", st.lastRestore)
			}
			if b, _ := os.ReadFile(filepath.Join(ws, "notes.log")); string(b) != "the target's\n" {
				t.Errorf("notes.log = %q after the restore", b)
			}
			pre := res.PreRestore
			if pre == nil {
				t.Fatal("no pre-restore checkpoint")
			}
			e, ok := lsTree(t, st, pre.SHA)["notes.log"]
			if !ok || string(readBlobs(t, st, []string{e.sha})[e.sha]) != "mine, ignored, never sealed\n" {
				t.Fatalf("the pre-restore checkpoint %s (%s) does not hold the ignored file the restore overwrote", pre.ID, pre.Label)
			}
			if _, err := st.Restore(ctx, ckpt.Request{Target: pre.SHA}); err != nil {
				t.Fatal(err)
			}
			if b, _ := os.ReadFile(filepath.Join(ws, "notes.log")); string(b) != "mine, ignored, never sealed\n" {
				t.Errorf("notes.log = %q after the undo", b)
			}
		})
	}
}

// TestInprocRestoreBeyondHeldBudget: blobs past the bytes a restore keeps
// between its check and its writes are read again when written.
func TestInprocRestoreBeyondHeldBudget(t *testing.T) {
	old := maxHeldBlobs
	maxHeldBlobs = 40
	t.Cleanup(func() { maxHeldBlobs = old })
	ws, st := newTestStore(t, Options{})
	files := func(gen string) map[string]string {
		m := map[string]string{}
		for i := range 10 {
			m[fmt.Sprintf("d/f%d.txt", i)] = strings.Repeat(gen, 10) + fmt.Sprint(i) + "\n"
		}
		return m
	}
	writeTree(t, ws, files("one "))
	one := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
	writeTree(t, ws, files("two "))
	mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
	res := restoreAgainstGit(t, st, one.SHA, EngineInproc)
	if len(res.Diff) != 0 || len(res.Write) != 10 {
		t.Errorf("restore: %d written, diff %v", len(res.Write), res.Diff)
	}
}

// TestInprocRestoreStreamsPackedBlobs: the blobs a restore writes that are
// packed are read through cat-file in batches (more of them than one batch
// holds): the restore writes what git's checkout writes, and a damaged one
// among them is named alone (the ones after it in the batch are read by a
// new cat-file), before anything is sealed or written.
func TestInprocRestoreStreamsPackedBlobs(t *testing.T) {
	ws, st := newTestStore(t, Options{Engine: EngineInproc})
	n := 2*packedBatch + 50
	files := func(gen string) map[string]string {
		m := map[string]string{}
		for i := range n {
			m[fmt.Sprintf("p/%02d/f%03d.txt", i%7, i)] = fmt.Sprintf("%s %03d %s\n", gen, i, strings.Repeat(gen, i%50))
		}
		return m
	}
	m := files("one")
	// Random, so the pack stores it whole and deflated past the damage.
	var rnd [4096]byte
	_, _ = rand.Read(rnd[:])
	m["big.txt"] = fmt.Sprintf("%x", rnd[:])
	writeTree(t, ws, m)
	one := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, Label: "one"})
	writeTree(t, ws, files("two"))
	writeFile(t, ws, "big.txt", "small now\n", 0o644)
	two := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, Label: "two"})
	blob := lsTree(t, st, one.SHA)["big.txt"].sha
	packOffset(t, st, blob) // everything packed

	res := restoreAgainstGit(t, st, one.SHA, EngineInproc)
	if len(res.Diff) != 0 || len(res.Write) != n+1 {
		t.Fatalf("restore to one: %d written, diff %v", len(res.Write), res.Diff)
	}
	restoreAgainstGit(t, st, two.SHA, EngineInproc)
	damagePack(t, st, blob)
	// The engine's cat-file, started before the repack, would still read
	// the pack the repack removed (open, whole): the engine sees the packs
	// changed and starts a new one, which reads the damage.
	refusedUntouched(t, ws, st, one, ckpt.Request{}, "blob big.txt "+blob+" unreadable")
}

// A full reconcile after the stat cache was lost asks git about every path:
// the index on disk may be an older staging than the newest checkpoint. Here
// it is the restore's second pre-restore checkpoint, which staged the file
// the restore overwrote although an ignore rule (kept on disk, sealed in no
// checkpoint before) covers it; the restore's own index entries died with
// the stat cache. The reconcile kept the ignored file, taking the index's
// word that it had been judged.
func TestFullReconcileAfterLostStatCacheJudgesEveryPath(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"removed", "cut"} {
		t.Run(how, func(t *testing.T) {
			dir, st := newTestStore(t, Options{Engine: EngineInproc})
			writeTree(t, dir, map[string]string{"f0": "zero\n", "a.txt": "a\n"})
			one := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
			writeFile(t, dir, "f0", "one\n", 0o644)
			mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
			writeFile(t, dir, ".gitignore", "/f0\n", 0o644)
			waitSettled(t, filepath.Join(dir, ".gitignore"))
			// Staged by git with its stat data, in a capture held (not
			// published): no checkpoint of the branch holds it.
			if _, err := st.Capture(context.Background(), SealRequest{Kind: ckpt.KindRigSetup, RunID: "r", CodonID: "c1", Changed: []string{".gitignore"}, engine: EngineGit}); err != nil {
				t.Fatal(err)
			}
			res, err := st.Restore(context.Background(), ckpt.Request{Target: one.SHA})
			if err != nil {
				t.Fatal(err)
			}
			if st.lastRestore != EngineInproc || res.Kept != 1 {
				t.Fatalf("restored by %s, %d kept; want the in-process engine keeping .gitignore", st.lastRestore, res.Kept)
			}
			if how == "removed" {
				err = os.Remove(st.statCachePath())
			} else {
				err = os.Truncate(st.statCachePath(), 0)
			}
			if err != nil {
				t.Fatal(err)
			}
			rec := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
			if st.lastEngine != EngineInproc {
				t.Fatalf("sealed by %s", st.lastEngine)
			}
			if got := strings.Join(treePaths(t, st, rec.SHA), " "); got != ".gitignore a.txt" {
				t.Fatalf("the reconcile holds %s; want .gitignore a.txt (f0 is ignored)", got)
			}
		})
	}
}

// A full reconcile asks git about no path its index vouches for while the
// stat cache ties the index to the newest checkpoint: after a seal, after a
// restore, in a store opened again. Without the cache it asks about all.
func TestFullReconcileAsksOnlyWhatTheIndexCannotVouchFor(t *testing.T) {
	t.Parallel()
	dir, st := newTestStore(t, Options{Engine: EngineInproc})
	writeTree(t, dir, map[string]string{"a.txt": "a\n", "d/b.txt": "b\n", "d/e/c.txt": "c\n"})
	one := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
	writeFile(t, dir, "d/b.txt", "b2\n", 0o644)
	mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
	asked := func(when string, want int) {
		t.Helper()
		mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
		if st.lastEngine != EngineInproc || st.lastAsked != want {
			t.Fatalf("%s: the reconcile by %s asked about %d paths, want %d", when, st.lastEngine, st.lastAsked, want)
		}
	}
	asked("after a seal", 0)
	if _, err := st.Restore(context.Background(), ckpt.Request{Target: one.SHA}); err != nil {
		t.Fatal(err)
	}
	asked("after a restore", 0)
	st.Close()
	st = openTestStore(t, dir, Options{Engine: EngineInproc, StateDir: st.opts.StateDir})
	asked("in the store opened again", 0)
	if err := os.Remove(st.statCachePath()); err != nil {
		t.Fatal(err)
	}
	asked("without the stat cache", 5) // a.txt, d, d/b.txt, d/e, d/e/c.txt
}

// waitSettled waits until the file at p is older than the engines' racy
// window (settled), so an index written from now on vouches for it by its
// stat data.
func waitSettled(t *testing.T, p string) {
	t.Helper()
	st, ok := stampFile(p)
	if !ok {
		t.Fatalf("%s: cannot stat", p)
	}
	m, c := newGrain(), newGrain()
	m.see(st.Mtime)
	c.see(st.Ctime)
	deadline := time.Now().Add(10 * time.Second)
	for !settled(st, time.Now().UnixNano(), m, c) {
		if time.Now().After(deadline) {
			t.Fatalf("%s not settled after 10 s", p)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
