//go:build unix

package snapshot

import (
	"os"
	"slices"
	"testing"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// A path that cannot be read as a file makes the checkpoint partial and is
// named; the other files are sealed and the seal never aborts.

// requirePartial checks a record is partial and names exactly wantIssues.
func requirePartial(t *testing.T, rec ckpt.Record, wantIssues []string) {
	t.Helper()
	if rec.State != ckpt.StatePartial {
		t.Errorf("seal %s: state %s, want partial naming %q (issues %q)", rec.ID, rec.State, wantIssues, rec.Issues)
	}
	got := issuePaths(rec.Issues)
	slices.Sort(got)
	want := slices.Clone(wantIssues)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("seal %s: issues %q, want exactly %q", rec.ID, rec.Issues, want)
	}
	for _, i := range rec.Issues {
		if i.Reason == "" {
			t.Errorf("issue %q has no reason", i.Path)
		}
	}
}

// requireLedgerHas checks the ledger's last record is rec as returned.
func requireLedgerHas(t *testing.T, st *Store, rec ckpt.Record) {
	t.Helper()
	recs := st.Records()
	last := recs[len(recs)-1]
	if last.SHA != rec.SHA || last.State != rec.State || len(last.Issues) != len(rec.Issues) {
		t.Errorf("ledger's last record %+v, want the seal's %+v", last, rec)
	}
	// And on disk, as a fresh open reads it.
	again := openTestStore(t, st.Dir(), Options{StateDir: stateDirOf(st)})
	recs = again.Records()
	if last := recs[len(recs)-1]; last.SHA != rec.SHA || last.State != rec.State || len(last.Issues) != len(rec.Issues) {
		t.Errorf("ledger on disk ends with %+v, want %+v", last, rec)
	}
}

// stateDirOf is the state directory a plain store was opened with.
func stateDirOf(st *Store) string { return st.opts.StateDir }

// FIFOs and sockets named in an incremental seal: partial, named, the rest sealed.
func TestPartialSpecialFiles(t *testing.T) {
	t.Parallel()
	dir, st := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{
		"good.txt":     "good",
		"sub/ok.txt":   "ok",
		"was-file":     "replaced by a FIFO",
		"was-sock":     "replaced by a socket",
		"gone.txt":     "deleted before the seal",
		"special/a.md": "beside special files",
	})
	first := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
	requireOK(t, first)

	writeFile(t, dir, "good.txt", "better", 0o644)
	writeFile(t, dir, "new.txt", "new", 0o644)
	mkfifo(t, dir, "pipe")
	mksocket(t, dir, "sock")
	removeAll(t, dir, "was-file")
	mkfifo(t, dir, "was-file")
	removeAll(t, dir, "was-sock")
	mksocket(t, dir, "was-sock")
	removeAll(t, dir, "gone.txt")
	mkfifo(t, dir, "special/fifo")
	mksocket(t, dir, "special/sock")

	rec := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, Changed: []string{
		"good.txt", "new.txt", "pipe", "sock", "was-file", "was-sock", "gone.txt",
		"special", // a folder holding special files: walked
		"never-existed.txt",
	}})
	requirePartial(t, rec, []string{"pipe", "sock", "was-file", "was-sock", "special/fifo", "special/sock"})
	assertTreeMatchesDisk(t, st, rec.SHA, []string{"good.txt", "new.txt", "sub/ok.txt", "special/a.md"})
	requireCounts(t, rec, 1, 1, 3)
	requireLedgerHas(t, st, rec)
}

// A full reconcile never hangs on or records special files, and names a
// tracked file that became one.
func TestPartialSpecialFilesFullReconcile(t *testing.T) {
	t.Parallel()
	dir, st := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{"good.txt": "good", "was-file": "replaced by a FIFO", "was-sock": "replaced by a socket"})
	first := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
	requireOK(t, first)

	mkfifo(t, dir, "pipe")
	mksocket(t, dir, "sock")
	mkfifo(t, dir, "deep/er/pipe")
	removeAll(t, dir, "was-file")
	mkfifo(t, dir, "was-file")
	removeAll(t, dir, "was-sock")
	mksocket(t, dir, "was-sock")
	writeFile(t, dir, "good.txt", "better", 0o644)

	rec := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
	assertTreeMatchesDisk(t, st, rec.SHA, []string{"good.txt"})
	requireCounts(t, rec, 0, 1, 2)
	// Untracked special files may be passed over (git's own scan does) or named;
	// tracked files that became special files must be named.
	if rec.State != ckpt.StatePartial {
		t.Errorf("state %s, want partial naming was-file and was-sock", rec.State)
	}
	for _, p := range []string{"was-file", "was-sock"} {
		if !slices.Contains(issuePaths(rec.Issues), p) {
			t.Errorf("issues %q do not name %s", rec.Issues, p)
		}
	}
	for _, p := range issuePaths(rec.Issues) {
		if !slices.Contains([]string{"was-file", "was-sock", "pipe", "sock", "deep/er/pipe"}, p) {
			t.Errorf("issue names %q, which is neither special nor unreadable", p)
		}
	}
}

// A permission-denied file and folder: partial, named, the rest sealed.
func TestPartialPermissionDenied(t *testing.T) {
	t.Parallel()
	if os.Geteuid() == 0 {
		t.Skip("running as root: chmod 000 does not stop root from reading, so no file can be made unreadable; FIFOs and sockets cover unreadable paths (TestPartialSpecialFiles)")
	}
	forModes(t, func(t *testing.T, mode sealMode) {
		dir, st := newTestStore(t, Options{})
		writeTree(t, dir, map[string]string{"good.txt": "good", "tracked.txt": "readable at first"})
		first := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
		requireOK(t, first)

		writeFile(t, dir, "denied.txt", "unreadable", 0o000)
		writeFile(t, dir, "tracked.txt", "edited, then unreadable", 0o000)
		writeFile(t, dir, "new.txt", "new", 0o644)
		writeFile(t, dir, "locked/inside.txt", "in an unreadable folder", 0o644)
		chmod(t, dir, "locked", 0o000)
		t.Cleanup(func() { os.Chmod(dir+"/locked", 0o755) })

		rec := sealWith(t, st, mode, []string{"denied.txt", "tracked.txt", "new.txt", "locked", "locked/inside.txt"})
		if rec.State != ckpt.StatePartial {
			t.Errorf("state %s, want partial (issues %q)", rec.State, rec.Issues)
		}
		for _, p := range []string{"denied.txt", "tracked.txt"} {
			if !slices.Contains(issuePaths(rec.Issues), p) {
				t.Errorf("issues %q do not name %s", rec.Issues, p)
			}
		}
		tree := treePaths(t, st, rec.SHA)
		for _, p := range []string{"good.txt", "new.txt"} {
			if !slices.Contains(tree, p) {
				t.Errorf("tree %q lacks %s: the readable files must be sealed", tree, p)
			}
		}
		if slices.Contains(tree, "denied.txt") {
			t.Errorf("tree holds denied.txt, which could not be read")
		}
		if !slices.ContainsFunc(issuePaths(rec.Issues), func(p string) bool { return p == "locked" || p == "locked/inside.txt" }) {
			t.Errorf("issues %q do not name the unreadable folder", rec.Issues)
		}
	})
}

// A path that vanished before staging (named by the watcher, gone by the
// seal) is a removal, never an error.
func TestVanishedPaths(t *testing.T) {
	t.Parallel()
	dir, st := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{"keep.txt": "k", "gone.txt": "g", "gone-dir/a": "a", "gone-dir/b/c": "c"})
	first := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
	requireOK(t, first)

	removeAll(t, dir, "gone.txt")
	removeAll(t, dir, "gone-dir")
	writeFile(t, dir, "flash.txt", "created and deleted before the seal", 0o644)
	removeAll(t, dir, "flash.txt")
	rec := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, Changed: []string{
		"gone.txt", "gone-dir/a", "gone-dir/b/c", "gone-dir/b", "gone-dir",
		"flash.txt", "never/existed/at/all.txt", "keep.txt/not-a-dir",
	}})
	requireOK(t, rec)
	assertTreeMatchesDisk(t, st, rec.SHA, []string{"keep.txt"})
	requireCounts(t, rec, 0, 0, 3)
	assertReconcileAgrees(t, st, dir, rec)
}

// A changed set with paths outside the work tree names them and seals the rest.
func TestChangedOutsideWorkTree(t *testing.T) {
	t.Parallel()
	dir, st := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{"a.txt": "a"})
	mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
	writeFile(t, dir, "b.txt", "b", 0o644)
	rec := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, Changed: []string{"../escape", "/etc/passwd", "b.txt"}})
	assertTreeMatchesDisk(t, st, rec.SHA, []string{"a.txt", "b.txt"})
	if got := issuePaths(rec.Issues); !slices.Contains(got, "../escape") || !slices.Contains(got, "/etc/passwd") {
		t.Errorf("issues %q, want ../escape and /etc/passwd named", rec.Issues)
	}
}
