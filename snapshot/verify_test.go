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

// Verify against real git and real files: the checkpoint a seal just made
// holds what git alone records, whichever engine sealed it; every change
// after it is named; objects removed from the store are named.

func mustVerify(t *testing.T, st *Store, patterns []string, id string) VerifyReport {
	t.Helper()
	rep, err := st.Verify(context.Background(), patterns, id)
	if err != nil {
		t.Fatalf("Verify(%q): %v", id, err)
	}
	return rep
}

func requireClean(t *testing.T, rep VerifyReport) {
	t.Helper()
	if !rep.Clean() {
		t.Fatalf("verify %s (%s): differences %+v, missing %+v, unreadable %+v; want none", rep.ID, rep.SHA, rep.Differences, rep.Missing, rep.Unreadable)
	}
}

// verifyIndexesLeft lists temporary indexes left in the store's cairn/ folder.
func verifyIndexesLeft(t *testing.T, st *Store) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(st.GitDir(), cairnSubdir))
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), verifyIndexPrefix) {
			left = append(left, e.Name())
		}
	}
	return left
}

// verifyFixture is a work tree with what the seal rules touch: nested
// folders and ignore files, an executable, a symlink, an ignored file, an
// always-excluded folder and a repository cloned inside.
func verifyFixture(t *testing.T, dir string) {
	t.Helper()
	writeTree(t, dir, map[string]string{
		"a.txt":            "a\n",
		"sub/b.txt":        "b\n",
		"sub/deep/c.txt":   "c\n",
		".gitignore":       "*.log\n",
		"sub/.gitignore":   "local/\n",
		"sub/local/x.txt":  "ignored by sub/.gitignore\n",
		"debug.log":        "ignored\n",
		"sub/deep/t.log":   "ignored at depth\n",
		"rigArchive/z.txt": "always excluded\n",
	})
	writeFile(t, dir, "run.sh", "#!/bin/sh\n", 0o755)
	symlink(t, dir, "a.txt", "link.txt")
	nested := filepath.Join(dir, "vendor", "lib")
	writeTree(t, nested, map[string]string{"lib.go": "package lib\n", "x.log": "ignored in the nested repo too\n"})
	hostGit(t, nested, "init", "-q")
}

func TestVerifyCleanAfterSeal(t *testing.T) {
	for _, eng := range []string{EngineGit, EngineInproc} {
		t.Run(eng, func(t *testing.T) {
			dir, st := newTestStore(t, Options{Engine: eng})
			verifyFixture(t, dir)
			first := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
			requireOK(t, first)
			rep := mustVerify(t, st, nil, "")
			requireClean(t, rep)
			if rep.ID != first.ID || rep.SHA != first.SHA {
				t.Errorf("verified %s %s, want the newest %s %s", rep.ID, rep.SHA, first.ID, first.SHA)
			}
			held := treePaths(t, st, first.SHA)
			for _, want := range []string{"a.txt", "run.sh", "sub/b.txt", "sub/deep/c.txt", "vendor/lib/lib.go"} {
				if !slices.Contains(held, want) {
					t.Errorf("checkpoint lacks %s: %q", want, held)
				}
			}
			if rep.Files != len(held) {
				t.Errorf("Files = %d, want %d", rep.Files, len(held))
			}

			// An incremental seal by the engine under test.
			writeFile(t, dir, "a.txt", "a, edited\n", 0o644)
			writeFile(t, dir, "sub/new.txt", "new\n", 0o644)
			mode := modeIncremental
			if eng == EngineInproc {
				mode = modeInproc
			}
			second := sealWith(t, st, mode, []string{"a.txt", "sub/new.txt"})
			requireClean(t, mustVerify(t, st, nil, ""))
			requireClean(t, mustVerify(t, st, nil, second.SHA[:10]))
			// The first checkpoint is behind the disk by those two files.
			old := mustVerify(t, st, nil, first.ID)
			got := map[string]string{}
			for _, d := range old.Differences {
				got[d.Path] = d.Status
			}
			want := map[string]string{"a.txt": ckpt.VerifyChanged, "sub/new.txt": ckpt.VerifyAdded}
			if len(got) != len(want) || got["a.txt"] != want["a.txt"] || got["sub/new.txt"] != want["sub/new.txt"] {
				t.Errorf("verify %s: differences %v, want %v", first.ID, got, want)
			}
			if left := verifyIndexesLeft(t, st); len(left) > 0 {
				t.Errorf("temporary indexes left behind: %q", left)
			}
		})
	}
}

func TestVerifyReportsChanges(t *testing.T) {
	dir, st := newTestStore(t, Options{Engine: EngineGit})
	verifyFixture(t, dir)
	rec := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
	before := lsTree(t, st, rec.SHA)
	indexBefore, _ := os.ReadFile(filepath.Join(st.GitDir(), cairnSubdir, "index"))

	writeFile(t, dir, "a.txt", "a, edited after the seal\n", 0o644)
	writeFile(t, dir, "sub/fresh.txt", "new\n", 0o644)
	removeAll(t, dir, "sub/deep/c.txt")
	chmod(t, dir, "sub/b.txt", 0o755)
	writeFile(t, dir, "vendor/lib/more.go", "package lib\n", 0o644)

	rep := mustVerify(t, st, nil, "")
	if rep.Clean() {
		t.Fatal("verify found nothing after four changes")
	}
	byPath := map[string]ckpt.VerifyDiff{}
	for _, d := range rep.Differences {
		byPath[d.Path] = d
	}
	if len(byPath) != 5 {
		t.Errorf("differences: %+v; want exactly a.txt, sub/fresh.txt, sub/deep/c.txt, sub/b.txt, vendor/lib/more.go", rep.Differences)
	}
	if d := byPath["a.txt"]; d.Status != ckpt.VerifyChanged || d.CheckpointBlob != before["a.txt"].sha || d.DiskBlob == d.CheckpointBlob || d.DiskMode != "100644" {
		t.Errorf("a.txt: %+v", d)
	}
	if d := byPath["sub/fresh.txt"]; d.Status != ckpt.VerifyAdded || d.CheckpointMode != "" || d.DiskMode != "100644" || d.DiskBlob == "" {
		t.Errorf("sub/fresh.txt: %+v", d)
	}
	if d := byPath["sub/deep/c.txt"]; d.Status != ckpt.VerifyRemoved || d.CheckpointBlob != before["sub/deep/c.txt"].sha || d.DiskMode != "" {
		t.Errorf("sub/deep/c.txt: %+v", d)
	}
	if d := byPath["sub/b.txt"]; d.Status != ckpt.VerifyChanged || d.CheckpointMode != "100644" || d.DiskMode != "100755" || d.DiskBlob != d.CheckpointBlob {
		t.Errorf("sub/b.txt (chmod +x): %+v", d)
	}
	if d := byPath["vendor/lib/more.go"]; d.Status != ckpt.VerifyAdded {
		t.Errorf("vendor/lib/more.go (in the nested repository): %+v", d)
	}
	// Verify wrote nothing of the store's own: the index, refs and ledger are as they were.
	if after, _ := os.ReadFile(filepath.Join(st.GitDir(), cairnSubdir, "index")); string(after) != string(indexBefore) {
		t.Error("verify changed cairn's index")
	}
	if got := strings.TrimSpace(string(gitOut(t, st, nil, "rev-parse", rec.Ref))); got != rec.SHA {
		t.Errorf("ref %s moved to %s", rec.Ref, got)
	}
	// Sealing the changes makes the checkpoint clean again.
	mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
	requireClean(t, mustVerify(t, st, nil, ""))
}

func TestVerifyIgnoresAndExcludes(t *testing.T) {
	dir, st := newTestStore(t, Options{Engine: EngineGit, MaxFileSize: 64})
	verifyFixture(t, dir)
	pats := []string{"**", "!secret"}
	writeFile(t, dir, "secret/key.txt", "excluded by a pattern\n", 0o644)
	writeFile(t, dir, "big.bin", strings.Repeat("x", 100), 0o644)
	rec := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, Patterns: pats})
	if slices.Contains(treePaths(t, st, rec.SHA), "secret/key.txt") {
		t.Fatal("the seal held an excluded file")
	}
	// Changes where no checkpoint looks are no difference.
	writeFile(t, dir, "secret/other.txt", "excluded\n", 0o644)
	writeFile(t, dir, "more.log", "ignored by .gitignore\n", 0o644)
	writeFile(t, dir, "sub/local/y.txt", "ignored by sub/.gitignore\n", 0o644)
	writeFile(t, dir, "sub/deep/new.log", "ignored at depth\n", 0o644)
	writeFile(t, dir, "vendor/lib/y.log", "ignored in the nested repository\n", 0o644)
	writeFile(t, dir, ".git/HEAD", "a .git folder is never checkpointed\n", 0o644)
	writeFile(t, dir, "rigArchive/y.txt", "always excluded\n", 0o644)
	writeFile(t, dir, "big2.bin", strings.Repeat("y", 100), 0o644)
	symlink(t, dir, "sub", "sublink")
	rep := mustVerify(t, st, pats, "")
	requireClean(t, rep)
	if got := issuePaths(rep.Skipped); !slices.Equal(got, []string{"big.bin", "big2.bin"}) {
		t.Errorf("skipped %q, want the two files over the limit", got)
	}
	// Under other patterns the excluded folder is a difference.
	rep = mustVerify(t, st, []string{"**"}, "")
	var added []string
	for _, d := range rep.Differences {
		added = append(added, d.Path)
	}
	if !slices.Equal(added, []string{"secret/key.txt", "secret/other.txt"}) {
		t.Errorf("under ** verify found %q, want the two files of secret/", added)
	}
	// A new ignore rule takes a held file out of what git would record.
	writeFile(t, dir, ".gitignore", "*.log\na.txt\n", 0o644)
	rep = mustVerify(t, st, pats, "")
	var paths []string
	for _, d := range rep.Differences {
		paths = append(paths, d.Path+":"+d.Status)
	}
	if !slices.Equal(paths, []string{".gitignore:changed", "a.txt:removed"}) {
		t.Errorf("after ignoring a.txt verify found %q", paths)
	}
}

func TestVerifyReportsMissingObjects(t *testing.T) {
	t.Run("loose", func(t *testing.T) {
		dir, st := newTestStore(t, Options{Engine: EngineGit})
		verifyFixture(t, dir)
		rec := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
		tree := lsTree(t, st, rec.SHA)
		subTree := strings.Fields(string(gitOut(t, st, nil, "ls-tree", rec.SHA, "sub")))[2]
		for _, sha := range []string{tree["a.txt"].sha, subTree} {
			loose := filepath.Join(st.GitDir(), "objects", sha[:2], sha[2:])
			if err := os.Remove(loose); err != nil {
				t.Fatalf("the git engine should leave %s loose: %v", sha, err)
			}
		}
		rep := mustVerify(t, st, nil, rec.ID)
		var got []string
		for _, m := range rep.Missing {
			got = append(got, m.Type+" "+m.Path+" "+m.SHA)
		}
		want := []string{"blob a.txt " + tree["a.txt"].sha, "tree sub " + subTree}
		if !slices.Equal(got, want) {
			t.Errorf("missing %q, want %q", got, want)
		}
		if rep.Clean() {
			t.Error("a store missing objects verified clean")
		}
		// The files under the missing tree are unknown, and are named as
		// no checkpoint holds them; the others compare equal.
		for _, d := range rep.Differences {
			if !strings.HasPrefix(d.Path, "sub/") || d.Status != ckpt.VerifyAdded {
				t.Errorf("unexpected difference %+v", d)
			}
		}
		// Verify wrote no object back: a second run finds the same.
		again := mustVerify(t, st, nil, rec.ID)
		if len(again.Missing) != len(rep.Missing) {
			t.Errorf("second verify: missing %+v", again.Missing)
		}
	})
	t.Run("pack", func(t *testing.T) {
		dir, st := newTestStore(t, Options{Engine: EngineInproc})
		verifyFixture(t, dir)
		mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
		writeFile(t, dir, "a.txt", "sealed into a pack\n", 0o644)
		rec := sealWith(t, st, modeInproc, []string{"a.txt"})
		blob := lsTree(t, st, rec.SHA)["a.txt"].sha
		packs, _ := filepath.Glob(filepath.Join(st.GitDir(), "objects", "pack", "*.idx"))
		removed := false
		for _, idx := range packs {
			f, err := os.Open(idx)
			if err != nil {
				t.Fatal(err)
			}
			out := string(gitOut(t, st, f, "show-index"))
			f.Close()
			if !strings.Contains(out, " "+blob+" ") {
				continue
			}
			stem := strings.TrimSuffix(idx, ".idx")
			for _, ext := range []string{".idx", ".pack", ".rev"} {
				if err := os.Remove(stem + ext); err != nil && !os.IsNotExist(err) {
					t.Fatal(err)
				}
			}
			removed = true
		}
		if !removed {
			t.Fatalf("no pack holds %s", blob)
		}
		rep := mustVerify(t, st, nil, rec.ID)
		if rep.Clean() || len(rep.Missing) == 0 {
			t.Fatalf("verify after removing the pack: %+v", rep)
		}
		found := false
		for _, m := range rep.Missing {
			// The pack held the commit too, or only the blob: either is named.
			found = found || m.SHA == blob || m.SHA == rec.SHA
		}
		if !found {
			t.Errorf("missing %+v names neither the blob %s nor the commit", rep.Missing, blob)
		}
	})
}

func TestVerifyTargets(t *testing.T) {
	dir, st := newTestStore(t, Options{Engine: EngineGit})
	writeTree(t, dir, map[string]string{"a.txt": "a\n"})
	first := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
	writeTree(t, dir, map[string]string{"a.txt": "b\n"})
	mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
	if rep := mustVerify(t, st, nil, first.SHA[:7]); rep.ID != first.ID {
		t.Errorf("prefix %s verified %s", first.SHA[:7], rep.ID)
	}
	for _, bad := range []string{"c99", "zzzz", "deadbeef"} {
		if _, err := st.Verify(context.Background(), nil, bad); err == nil || !strings.Contains(err.Error(), "unknown checkpoint") {
			t.Errorf("Verify(%q): %v, want unknown checkpoint", bad, err)
		}
	}
}
