//go:build unix

package snapshot

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/restore/ckpt"
	"github.com/cairn-dev/cairn/snapshot/gitobj"
)

// FuzzEngines plays random edit sequences on a random tree and seals each
// step incrementally twice, by the git engine and by the in-process one, in
// two stores over the same work tree: the trees must be the same after
// every seal, and a full reconcile at the end must agree. The seed corpus
// runs in plain `go test`.
func FuzzEngines(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23})
	f.Add([]byte("file becomes folder and back; delete trees; chmod"))
	f.Add([]byte{7, 7, 7, 3, 3, 3, 5, 5, 5, 6, 6, 6, 0, 0, 0, 2, 2, 2, 4, 4, 4, 1, 1, 1})
	f.Add([]byte{200, 13, 77, 91, 5, 250, 16, 33, 12, 99, 101, 6, 42, 17, 3, 8, 8, 8, 140, 2})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 120 {
			data = data[:120]
		}
		dir := t.TempDir()
		dirs := []string{"", "a/", "a/b/", "c/", "a/b/d/"}
		names := []string{"f0", "f1", "x.txt", "a", "b"} // "a" and "b" collide with folders: file/folder swaps
		pick := func(i byte) string { return dirs[int(i)%len(dirs)] + names[int(i/5)%len(names)] }
		// put writes a file at p, clearing what stands in the way, and
		// returns the paths a watcher would report for that.
		put := func(p, content string) []string {
			var out []string
			abs := filepath.Join(dir, filepath.FromSlash(p))
			if fi, err := os.Lstat(abs); err == nil && fi.IsDir() {
				os.RemoveAll(abs)
			} else if err == nil && fi.Mode()&os.ModeSymlink != 0 {
				// Not written through: that would change the link's target,
				// which this step does not report as a watcher would.
				os.Remove(abs)
			}
			for d := filepath.Dir(abs); d != dir; d = filepath.Dir(d) {
				if fi, err := os.Lstat(d); err == nil && !fi.IsDir() {
					os.Remove(d)
					out = append(out, relOf(dir, d))
				}
			}
			os.MkdirAll(filepath.Dir(abs), 0o755)
			if err := os.WriteFile(abs, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			return append(out, p)
		}
		for i := 0; i < 12; i++ {
			put(pick(byte(i*7)), fmt.Sprintf("seed %d\n", i))
		}
		writeFile(t, dir, ".gitignore", "*.log\n", 0o644)
		gitSt := openTestStore(t, dir, Options{Engine: EngineGit})
		inSt := openTestStore(t, dir, Options{Engine: EngineInproc})
		mustSeal(t, gitSt, SealRequest{Kind: ckpt.KindManual})
		mustSeal(t, inSt, SealRequest{Kind: ckpt.KindManual})
		for len(data) >= 3 {
			var changed []string
			for k := 0; k < 3 && len(data) >= 3; k++ {
				op, a, b := data[0]%8, data[1], data[2]
				data = data[3:]
				p := pick(a)
				abs := filepath.Join(dir, filepath.FromSlash(p))
				switch op {
				case 0, 1: // write (create or edit), through whatever is in the way
					changed = append(changed, put(p, strings.Repeat(string(rune('a'+b%26)), int(b)))...)
				case 2: // delete
					os.RemoveAll(abs)
				case 3: // chmod
					os.Chmod(abs, os.FileMode(0o644|uint32(b&1)*0o111))
				case 4: // delete a folder, reported by its name
					p = strings.TrimSuffix(dirs[int(a)%len(dirs)], "/")
					if p == "" {
						continue
					}
					os.RemoveAll(filepath.Join(dir, p))
				case 5: // an ignored file
					p += ".log"
					changed = append(changed, put(p, "log")...)
				case 6: // a symlink where a file was
					os.RemoveAll(abs)
					os.MkdirAll(filepath.Dir(abs), 0o755)
					os.Symlink("f0", abs)
				case 7: // rewrite with the same content (stat changes, blob does not)
					if b, err := os.ReadFile(abs); err == nil {
						os.WriteFile(abs, b, 0o644)
					}
				}
				changed = append(changed, p)
			}
			changed = nonNil(changed) // a step that named nothing is still incremental, not a full reconcile
			g := mustSeal(t, gitSt, SealRequest{Kind: ckpt.KindManual, Changed: changed, engine: EngineGit})
			in := mustSeal(t, inSt, SealRequest{Kind: ckpt.KindManual, Changed: changed})
			if inSt.lastEngine != EngineInproc {
				t.Fatalf("seal of %q by the %s engine, want the in-process one", changed, inSt.lastEngine)
			}
			if a, b := treeOf(t, gitSt, g.SHA), treeOf(t, inSt, in.SHA); a != b {
				t.Fatalf("after %q: git engine tree %s (%q), in-process %s (%q)", changed, a, treePaths(t, gitSt, g.SHA), b, treePaths(t, inSt, in.SHA))
			}
			if g.Added != in.Added || g.Changed != in.Changed || g.Removed != in.Removed || g.State != in.State {
				t.Fatalf("after %q: git engine recorded %+v, in-process %+v", changed, g, in)
			}
		}
		a := mustSeal(t, inSt, SealRequest{Kind: ckpt.KindManual})
		b := mustSeal(t, gitSt, SealRequest{Kind: ckpt.KindManual})
		if x, y := treeOf(t, inSt, a.SHA), treeOf(t, gitSt, b.SHA); x != y {
			t.Fatalf("full reconciles disagree: %s vs %s", x, y)
		}
		requireCounts(t, a, 0, 0, 0)
	})
}

func relOf(root, abs string) string {
	r, _ := filepath.Rel(root, abs)
	return filepath.ToSlash(r)
}

// The in-process engine writes the commit git's commit-tree writes for the
// same tree, parent, message and date, and the reflog line update-ref does.
func TestInprocCommitAndReflogMatchGit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, st := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{"a.txt": "a", "d/b.txt": "b"})
	mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
	writeFile(t, dir, "a.txt", "edited", 0o755)
	when := time.Date(2025, 3, 4, 5, 6, 7, 891e6, time.UTC)
	req := SealRequest{Kind: ckpt.KindCompleted, CodonID: "c1", CodonName: "codon one", RunID: "r1",
		Changed: []string{"a.txt"}, Time: when, Duration: 1500 * time.Millisecond, Attempt: 2}
	rec := mustSeal(t, st, req)
	if st.lastEngine != EngineInproc {
		t.Fatalf("sealed by %s", st.lastEngine)
	}
	tree := treeOf(t, st, rec.SHA)
	msg := message(req, rec, "", when)
	ts := isoTime(when)
	out, err := st.git.withEnv("GIT_AUTHOR_DATE="+ts, "GIT_COMMITTER_DATE="+ts).
		Run(ctx, strings.NewReader(msg), "commit-tree", tree, "-F", "-", "-p", rec.Parent)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.TrimSpace(string(out)); want != rec.SHA {
		t.Fatalf("commit %s, git's commit-tree writes %s:\n%s\n---\n%s", rec.SHA, want,
			gitStr(t, st, "cat-file", "-p", rec.SHA), gitStr(t, st, "cat-file", "-p", want))
	}
	// A run branch has a reflog, as update-ref -m writes it.
	b, err := os.ReadFile(filepath.Join(st.gitDir, "logs", "refs", "heads", "run-r1"))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.SplitN(strings.TrimSuffix(string(b), "\n"), "\t", 2)
	if len(f) != 2 || f[1] != "cairn: completed "+rec.ID || !strings.HasPrefix(f[0], zeroSHA+" "+rec.SHA+" cairn <cairn@localhost> ") {
		t.Fatalf("reflog %q", b)
	}
	if got := gitStr(t, st, "reflog", "show", "--format=%H %gs", "refs/heads/run-r1"); got != rec.SHA+" cairn: completed "+rec.ID {
		t.Fatalf("git reads the reflog as %q", got)
	}
	// Checkpoints on their own refs have none, as with update-ref.
	rec2 := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, Changed: []string{"a.txt"}})
	if _, err := os.Stat(filepath.Join(st.gitDir, "logs", filepath.FromSlash(rec2.Ref))); err == nil {
		t.Errorf("a reflog for %s, which git would not write", rec2.Ref)
	}
	if fsck, err := st.git.Run(ctx, nil, "fsck", "--no-progress", "--strict"); err != nil {
		t.Fatalf("git fsck --strict: %v\n%s", err, fsck)
	}
}

// The stat cache spares re-reading a file named again unchanged, and reads
// again one rewritten at the same size within the same tick (git's racy rule).
func TestStatCacheRacy(t *testing.T) {
	t.Parallel()
	dir, st := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{"a.txt": "one"})
	mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
	for i, content := range []string{"two", "six", "ten"} { // same size each time, at once
		writeFile(t, dir, "a.txt", content, 0o644)
		rec := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, Changed: []string{"a.txt"}})
		if got := gitStr(t, st, "show", rec.SHA+":a.txt"); got != content {
			t.Fatalf("seal %d holds %q, want %q", i, got, content)
		}
	}
	// Kept mtime, same size, new content: only the racy rule catches it
	// while the cache is as young as the file.
	abs := filepath.Join(dir, "a.txt")
	fi, _ := os.Stat(abs)
	writeFile(t, dir, "a.txt", "xyz", 0o644)
	os.Chtimes(abs, fi.ModTime(), fi.ModTime())
	rec := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, Changed: []string{"a.txt"}})
	if got := gitStr(t, st, "show", rec.SHA+":a.txt"); got != "xyz" {
		t.Fatalf("holds %q after a same-size rewrite with the old mtime", got)
	}
	// The cache file round-trips.
	c := st.inproc.eng.cache
	d, err := decodeStatCache(c.encode())
	if err != nil || d.hdr.Base != c.hdr.Base || len(d.stats) != len(c.stats) || len(d.pending) != len(c.pending) {
		t.Fatalf("stat cache round trip: %v", err)
	}
	if _, err := decodeStatCache(c.encode()[:len(statCacheMagic)+10]); err == nil {
		t.Fatal("a stat cache cut inside its first record was accepted")
	}
}

// The stat cache is a journal: each save appends what changed; a record cut
// short or damaged anywhere refuses the whole file (an older state must not
// pass for the newest).
func TestStatCacheJournal(t *testing.T) {
	t.Parallel()
	_, st := newTestStore(t, Options{})
	path := st.statCachePath()
	c := newStatCache("sha1")
	c.hdr.Base, c.hdr.Dev = strings.Repeat("1", 40), st.workTreeDev()
	c.remember("a", fileStamp{Size: 1, Mtime: 10, Ctime: 10, Ino: 1}, gitobj.ModeFile, strings.Repeat("a", 40))
	c.setPending("p", pendEntry{Mode: gitobj.ModeFile, ID: strings.Repeat("b", 40)})
	if err := st.saveStatCache(c); err != nil {
		t.Fatal(err)
	}
	whole, _ := os.ReadFile(path)
	c.remember("b", fileStamp{Size: 2, Mtime: 20, Ctime: 20, Ino: 3}, gitobj.ModeExec, strings.Repeat("d", 40))
	c.forget("a")
	c.hdr.Base = strings.Repeat("2", 40)
	if err := st.saveStatCache(c); err != nil {
		t.Fatal(err)
	}
	journal, _ := os.ReadFile(path)
	if len(journal) <= len(whole) || !bytes.Equal(journal[:len(whole)], whole) {
		t.Fatalf("the second save did not append (%d bytes, then %d)", len(whole), len(journal))
	}
	got := st.loadStatCache("sha1")
	if got.loaded != loadedWhole || got.hdr.Base != c.hdr.Base || len(got.stats) != 1 || got.stats["b"].ID != strings.Repeat("d", 40) || got.pending["p"].ID != strings.Repeat("b", 40) {
		t.Fatalf("reloaded %+v %+v %+v", got.hdr, got.stats, got.pending)
	}
	// Cut anywhere past the magic, the file is refused, not read as the
	// state before its last record.
	for _, n := range []int{len(journal) - 5, len(whole), len(whole) - 1, len(statCacheMagic) + 3} {
		if n == len(whole) {
			// Cut at a record boundary: it decodes as the older state, which
			// the header's commit tells apart (TestInprocTruncatedStatCache).
			continue
		}
		if _, err := decodeStatCache(journal[:n]); err == nil {
			t.Fatalf("a stat cache cut at %d of %d bytes was accepted", n, len(journal))
		}
	}
	if err := os.WriteFile(path, journal[:len(journal)-5], 0o644); err != nil {
		t.Fatal(err)
	}
	if got := st.loadStatCache("sha1"); got.loaded != loadedDamaged || got.hdr.Base != "" {
		t.Fatalf("a torn cache loaded as %v with base %q", got.loaded, got.hdr.Base)
	}
	bad := bytes.Clone(journal)
	bad[len(whole)-40] ^= 1
	if _, err := decodeStatCache(bad); err == nil {
		t.Fatal("a damaged record before the last was accepted")
	}
}

// Tree encoding follows git's order (a folder sorts as if its name ended in '/').
func TestTreeOrder(t *testing.T) {
	t.Parallel()
	dir, st := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{"a-b": "1", "a/x": "2", "a.c": "3", "a0": "4", "ab/y": "5"})
	rec := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, engine: EngineGit}) // git's tree, loose, to compare with

	tree := treeOf(t, st, rec.SHA)
	_, data, err := gitobj.NewDB(st.gitDir, gitobj.SHA1).Read(tree)
	if err != nil {
		t.Fatal(err)
	}
	ents, err := gitobj.ParseTree(data, gitobj.SHA1)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := gitobj.EncodeTree(append([]gitobj.TreeEntry(nil), ents...), gitobj.SHA1)
	if err != nil || gitobj.SHA1.Hash("tree", enc) != tree {
		t.Fatalf("re-encoded tree differs from git's: %v", err)
	}
}

// The parsed-tree cache holds the trees of the current base, not the
// versions earlier seals replaced: without dropping them it grew with every
// seal until its bound (about 30 MiB more RSS for a daemon after 150 seals).
func TestTreeCacheHoldsNoReplacedTrees(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, st := newTestStore(t, Options{})
	paths := sealGrid(t, dir, st, "src/d%02d/sub/f%d.txt", 8, 5)
	var rec ckpt.Record
	for i := range 40 {
		p := paths[(i*7)%len(paths)]
		writeFile(t, dir, p, fmt.Sprintf("v%d", i+1), 0o644)
		rec = mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, Changed: []string{p}})
		if st.lastEngine != EngineInproc {
			t.Fatalf("seal %d by %s", i, st.lastEngine)
		}
	}
	live := map[string]bool{}
	for _, id := range strings.Fields(gitStr(t, st, "rev-parse", rec.SHA+"^{tree}")) {
		live[id] = true
	}
	for _, line := range strings.Split(gitStr(t, st, "ls-tree", "-r", "-t", rec.SHA), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[1] == "tree" {
			live[f[2]] = true
		}
	}
	e, err := st.inproc.engine(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var stale []string
	for _, gen := range []map[string][]gitobj.TreeEntry{e.trees.young, e.trees.old} {
		for id := range gen {
			if !live[id] {
				stale = append(stale, id)
			}
		}
	}
	if len(stale) > 0 {
		t.Errorf("the tree cache holds %d trees the last checkpoint does not (of %d live): %v", len(stale), len(live), stale)
	}
}

// After a .gitignore changes, the in-process engine's seals follow the new
// rules: its long-running check-ignore read the old ones, and went on
// answering with them (x.tmp sealed, y.log left out, against git's own).
func TestInprocFollowsNewIgnoreRules(t *testing.T) {
	t.Parallel()
	dir, st := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{"a.txt": "a", ".gitignore": "*.log\n"})
	mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
	writeFile(t, dir, "a.txt", "b", 0o644)
	mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, Changed: []string{"a.txt"}})
	writeFile(t, dir, ".gitignore", "*.tmp\n", 0o644)
	mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, Changed: []string{".gitignore"}})
	writeFile(t, dir, "x.tmp", "x", 0o644)
	writeFile(t, dir, "y.log", "y", 0o644)
	rec := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, Changed: []string{"x.tmp", "y.log"}})
	if st.lastEngine != EngineInproc {
		t.Fatalf("sealed by %s", st.lastEngine)
	}
	full := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
	if got, want := strings.Join(treePaths(t, st, rec.SHA), " "), strings.Join(treePaths(t, st, full.SHA), " "); got != want {
		t.Fatalf("in-process seal holds %s; git's full reconcile %s", got, want)
	}
}

// An engine whose set-up git could not answer (the seal's context ended) is
// not remembered as unusable: the next seal asks again. It was remembered,
// and the in-process engine stayed off until a config file changed.
func TestInprocEngineNotStuckAfterCancel(t *testing.T) {
	t.Parallel()
	_, st := newTestStore(t, Options{})
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := st.inproc.engine(cancelled); err == nil {
		t.Fatal("engine set up with a cancelled context")
	}
	if _, err := st.inproc.engine(context.Background()); err != nil {
		t.Fatalf("engine after a cancelled set-up: %v", err)
	}
}

// check-ignore's answers name their path: an answer left in the pipe by an
// exchange cut short is refused, never taken as the answer to the next
// question (c.log was reported not ignored, from b.txt's answer).
func TestIgnoreCheckerOutOfStep(t *testing.T) {
	t.Parallel()
	dir, st := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{".gitignore": "*.log\n", "b.txt": "b"})
	ic, err := startIgnoreChecker(st.git)
	if err != nil {
		t.Fatal(err)
	}
	defer ic.stop()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ic.ignored(cancelled, []string{"b.txt"}); err == nil {
		t.Fatal("an exchange with a cancelled context answered")
	}
	// An exchange cut short after its question was written: git's answer
	// to it is still in the pipe when the next question is asked.
	if _, err := ic.c.in.Write([]byte("./b.txt\x00")); err != nil {
		t.Fatal(err)
	}
	ig, err := ic.ignored(context.Background(), []string{"c.log"})
	if err == nil && !ig["c.log"] {
		t.Fatalf("c.log reported not ignored (the previous question's answer taken for it): %v", ig)
	}
}

// The in-process engine writes each seal's new objects as one pack and
// merges the small packs every rollUpEvery seals: after many seals, with a
// restart halfway (the caches empty, trees read back from the packs), the
// store holds a few dozen packs at most and no new loose object, every
// checkpoint holds what was written, and fsck is clean.
func TestInprocSealsWriteFewPacks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	stateDir := t.TempDir()
	st := openTestStore(t, dir, Options{StateDir: stateDir})
	paths := sealGrid(t, dir, st, "src/d%02d/f%d.txt", 6, 4)
	loose := func() int {
		n := 0
		for _, line := range strings.Split(gitStr(t, st, "count-objects", "-v"), "\n") {
			if v, ok := strings.CutPrefix(line, "count: "); ok {
				fmt.Sscan(v, &n)
			}
		}
		return n
	}
	looseBefore := loose()
	type sealed struct{ sha, path, content string }
	var all []sealed
	most := 0
	n := 3*rollUpEvery + 5
	for i := range n {
		if i == n/2 { // a restart: nothing cached
			st.Close()
			st = openTestStore(t, dir, Options{StateDir: stateDir})
		}
		p := paths[(i*5)%len(paths)]
		content := fmt.Sprintf("v%d\n", i+1)
		writeFile(t, dir, p, content, 0o644)
		rec := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, Changed: []string{p}})
		if st.lastEngine != EngineInproc {
			t.Fatalf("seal %d by %s", i, st.lastEngine)
		}
		all = append(all, sealed{rec.SHA, p, content})
		packs, _ := filepath.Glob(filepath.Join(st.GitDir(), "objects", "pack", "pack-*.pack"))
		most = max(most, len(packs))
	}
	if most > rollUpEvery+8 {
		t.Errorf("the store held %d packs after %d seals; want at most %d", most, n, rollUpEvery+8)
	}
	if got := loose(); got != looseBefore {
		t.Errorf("%d loose objects after the in-process seals, %d before: they should all be packed", got, looseBefore)
	}
	for _, s := range all {
		if got := gitStr(t, st, "show", s.sha+":"+s.path); got != strings.TrimSpace(s.content) {
			t.Errorf("checkpoint %s holds %q at %s, want %q", s.sha, got, s.path, s.content)
		}
	}
	if out := gitStr(t, st, "fsck", "--full", "--strict", "--no-dangling"); out != "" {
		t.Errorf("fsck: %s", out)
	}
	t.Logf("%d packs at most over %d seals", most, n)
}

// A seal whose new trees outnumber the tree cache still reads them back for
// its own walks: they are only in its unwritten pack until the end, so the
// cache dropping them made the seal fail with "object missing".
func TestInprocSealBeyondTreeCache(t *testing.T) {
	old := treeCacheMax
	treeCacheMax = 16
	defer func() { treeCacheMax = old }()
	dir, st := newTestStore(t, Options{})
	var paths []string
	for i, p := range sealGrid(t, dir, st, "src/d%02d/f%d.txt", 40, 3) {
		if i%3 == 0 { // one file in every folder
			paths = append(paths, p)
		}
	}
	for _, p := range paths {
		writeFile(t, dir, p, "v1 of "+p, 0o644)
	}
	rec := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, Changed: paths})
	if st.lastEngine != EngineInproc {
		t.Fatalf("sealed by %s", st.lastEngine)
	}
	for _, p := range paths {
		if got := gitStr(t, st, "show", rec.SHA+":"+p); got != "v1 of "+p {
			t.Errorf("%s holds %q", p, got)
		}
	}
	if out := gitStr(t, st, "fsck", "--full", "--strict", "--no-dangling"); out != "" {
		t.Errorf("fsck: %s", out)
	}
}

// A seal whose pack cannot be written fails, and the next one starts again
// from what was saved: the failed seal's trees, which its caches held
// though they were never written, must not be built upon.
func TestInprocUnwrittenPackNotBuiltUpon(t *testing.T) {
	t.Parallel()
	dir, st := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{"a/x.txt": "x0", "a/y.txt": "y0", "b/z.txt": "z0"})
	mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, engine: EngineGit}) // its objects loose, beside the pack folder
	packDir := filepath.Join(st.GitDir(), "objects", "pack")
	if err := os.RemoveAll(packDir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(packDir, nil, 0o644); err != nil { // not a folder: no pack can be written
		t.Fatal(err)
	}
	writeFile(t, dir, "a/x.txt", "x1", 0o644)
	rec, err := st.Seal(context.Background(), SealRequest{Kind: ckpt.KindManual, Changed: []string{"a/x.txt"}})
	if err == nil && rec.State != ckpt.StateFailed {
		t.Fatalf("a seal without room for its pack: %+v", rec)
	}
	if err := os.Remove(packDir); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "b/z.txt", "z1", 0o644)
	// The failed seal's path is named again, as the daemon keeps it dirty.
	rec = mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, Changed: []string{"a/x.txt", "b/z.txt"}})
	if st.lastEngine != EngineInproc {
		t.Fatalf("sealed by %s", st.lastEngine)
	}
	for p, want := range map[string]string{"a/x.txt": "x1", "a/y.txt": "y0", "b/z.txt": "z1"} {
		if got := gitStr(t, st, "show", rec.SHA+":"+p); got != want {
			t.Errorf("%s holds %q, want %q", p, got, want)
		}
	}
	if out := gitStr(t, st, "fsck", "--full", "--strict", "--no-dangling"); out != "" {
		t.Errorf("fsck: %s", out)
	}
}

// sealGrid writes folders × files files named by format (folder, file
// numbers), all "v0", seals them with a full reconcile and returns their
// paths, folder by folder.
func sealGrid(t *testing.T, dir string, st *Store, format string, folders, files int) []string {
	t.Helper()
	tree := map[string]string{}
	var paths []string
	for d := range folders {
		for f := range files {
			p := fmt.Sprintf(format, d, f)
			tree[p], paths = "v0", append(paths, p)
		}
	}
	writeTree(t, dir, tree)
	mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
	return paths
}
