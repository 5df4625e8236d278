//go:build unix

package snapshot

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/platform"
	"github.com/cairn-dev/cairn/restore/ckpt"
)

// TestRestoreKilledWhileWriting: a restore killed between making a file
// under its temporary name and renaming it over the path leaves that entry
// in the work tree. The next seal of the store (a new process, as after a
// restart) removes it before it looks at the tree and, even when told
// nothing changed, reconciles the whole tree (cairn's index may not describe
// what the restore wrote), so the checkpoint is what is on disk; it says
// so. A file of the user's that only looks like one (another tag) stays, as
// does anything in a folder the restore did not write in.
func TestRestoreKilledWhileWriting(t *testing.T) {
	child := buildFaultSeal(t)
	for _, told := range []bool{false, true} {
		name := "full"
		if told {
			name = "told"
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			ws, state := t.TempDir(), t.TempDir()
			opts := Options{Layout: LayoutPlain, StateDir: state, Engine: EngineInproc}
			putFile(t, filepath.Join(ws, "a.txt"), "one\n")
			putFile(t, filepath.Join(ws, "sub", "b.txt"), "b\n")
			putFile(t, filepath.Join(ws, "sub", "c.txt"), "c\n")
			lookalike := "sub/" + platform.TempPrefix + "0123456789abcdef-mine"
			putFile(t, filepath.Join(ws, filepath.FromSlash(lookalike)), "mine\n")
			putFile(t, filepath.Join(ws, "other", platform.TempPrefix+"x"), "other\n")
			st, err := Open(ctx, ws, opts)
			if err != nil {
				t.Fatal(err)
			}
			c1, err := st.Seal(ctx, SealRequest{Kind: ckpt.KindBaseline})
			if err != nil {
				t.Fatal(err)
			}
			// The target holds files the work tree then lacks: the restore
			// makes them anew (a temporary entry renamed over the path).
			for _, p := range []string{"sub/b.txt", "sub/c.txt"} {
				if err := os.Remove(filepath.Join(ws, filepath.FromSlash(p))); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := st.Seal(ctx, SealRequest{Kind: ckpt.KindManual}); err != nil {
				t.Fatal(err)
			}
			st.Close()

			cmd := exec.Command(child, ws, state)
			cmd.Env = append(os.Environ(), FaultEnv+"=temp-made", "FAULTSEAL_RESTORE="+c1.SHA)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != FaultExitCode {
				t.Fatalf("child: want exit %d at temp-made, got %v: %s", FaultExitCode, err, out)
			}
			left := tempsIn(t, filepath.Join(ws, "sub"))
			if len(left) == 0 {
				t.Fatal("the killed restore left no temporary entry: the test no longer stops it between making and renaming one")
			}

			st2, err := Open(ctx, ws, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer st2.Close()
			req := SealRequest{Kind: ckpt.KindManual}
			if told {
				req.Changed = []string{}
			}
			rec, err := st2.Seal(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if got := tempsIn(t, filepath.Join(ws, "sub")); len(got) > 0 {
				t.Fatalf("temporary entries %q still in the work tree after the next seal", got)
			}
			want := []string{"a.txt", lookalike, "other/" + platform.TempPrefix + "x"}
			for _, p := range []string{"sub/b.txt", "sub/c.txt"} {
				if _, err := os.Lstat(filepath.Join(ws, filepath.FromSlash(p))); err == nil {
					want = append(want, p) // renamed before the kill
				}
			}
			// Told or not, the seal reconciles the whole tree: cairn's index
			// may not describe what the killed restore wrote.
			assertTreeMatchesDisk(t, st2, rec.SHA, want)
			notes := strings.Join(st2.TakeNotes(), "\n")
			if !strings.Contains(notes, "temporary files a restore stopped while writing left") {
				t.Errorf("the sweep was not said: notes %q", notes)
			}
			if _, err := os.Lstat(st2.restoreRecordPath()); err == nil {
				t.Error("the restore's record outlived the sweep")
			}
			// And the restore itself, done again, completes.
			res, err := st2.Restore(ctx, ckpt.Request{Target: c1.SHA})
			if err != nil || len(res.Diff) > 0 {
				t.Fatalf("restore again: %v, %v", err, res.Diff)
			}
			if got := tempsIn(t, filepath.Join(ws, "sub")); len(got) > 0 {
				t.Fatalf("temporary entries %q after a whole restore", got)
			}
		})
	}
}

// tempsIn lists the entries in dir a restore names as its temporary ones
// (TempPrefix and a 16-digit tag).
func tempsIn(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		n := e.Name()
		if rest, ok := strings.CutPrefix(n, platform.TempPrefix); ok && len(rest) > 17 && rest[16] == '-' && recordTag.MatchString(rest[:16]) && !strings.HasSuffix(n, "-mine") {
			out = append(out, n)
		}
	}
	return out
}

// TestSweepRestoreTempsStaysBeneath: the sweep removes, in the folders its
// record names, only regular files and links with its tag; a folder swapped
// for a link is not entered, a record naming a path outside the work tree
// is not followed, and a folder, FIFO or other tag's entry stays. A record
// that cannot be read makes the next seal a full reconcile.
func TestSweepRestoreTempsStaysBeneath(t *testing.T) {
	dir, st := newTestStore(t, Options{})
	outside := t.TempDir()
	const tag = "00112233445566ff"
	tmp := func(n string) string { return platform.TempPrefix + tag + "-" + n }
	putFile(t, filepath.Join(dir, "sub", tmp("file")), "x")
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "sub", tmp("link"))); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub", tmp("dir")), 0o755); err != nil {
		t.Fatal(err)
	}
	mkfifo(t, dir, "sub/"+tmp("fifo"))
	putFile(t, filepath.Join(dir, "sub", platform.TempPrefix+"0000000000000000-x"), "another tag")
	putFile(t, filepath.Join(outside, tmp("out")), "outside")
	if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	putFile(t, filepath.Join(dir, tmp("top")), "x")
	gone, err := st.sweepRestoreTemps(restoreRecord{Tag: tag, Folders: []string{".", "sub", "link", "../" + filepath.Base(outside), outside, "gone"}})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(gone)
	if want := []string{tmp("top"), "sub/" + tmp("file"), "sub/" + tmp("link")}; strings.Join(gone, ",") != strings.Join(want, ",") {
		t.Errorf("removed %q, want %q", gone, want)
	}
	for _, p := range []string{"sub/" + tmp("dir"), "sub/" + tmp("fifo"), "sub/" + platform.TempPrefix + "0000000000000000-x"} {
		if _, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(p))); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(outside, tmp("out"))); err != nil {
		t.Errorf("outside the work tree: %v", err)
	}
	if _, err := os.Stat("/etc/passwd"); err != nil {
		t.Errorf("the link's target: %v", err)
	}
	// A torn record: nothing to remove by it, but the restore that wrote
	// it may have stopped part way: the next seal reconciles in full.
	if err := os.WriteFile(st.restoreRecordPath(), []byte(`{"tag":"00`), 0o644); err != nil {
		t.Fatal(err)
	}
	st.takeRestoreRecord(context.Background())
	if !st.restoreUnsure {
		t.Error("a torn record: the next seal is not a full reconcile")
	}
	mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, Changed: []string{}})
	if _, err := os.Lstat(st.restoreRecordPath()); err == nil || st.restoreUnsure {
		t.Errorf("the record stays after a seal (unsure %v)", st.restoreUnsure)
	}
}

// TestSweepLeavesNoRecordTemp: the temporary file of a record write a
// process was killed in (cairn/restoring.tmp-<pid>) is swept with cairn's
// other temporary files once old; a young one (a live writer's) stays.
func TestSweepLeavesNoRecordTemp(t *testing.T) {
	_, st := newTestStore(t, Options{})
	dir := filepath.Join(st.GitDir(), cairnSubdir)
	old, young := filepath.Join(dir, "restoring.tmp-4194304"), filepath.Join(dir, "restoring.tmp-4194305")
	for _, p := range []string{old, young} {
		if err := os.WriteFile(p, []byte(`{"done":true}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	then := time.Now().Add(-2 * staleTmpAge)
	if err := os.Chtimes(old, then, then); err != nil {
		t.Fatal(err)
	}
	st.sweepTmpObjects(0)
	if _, err := os.Lstat(old); err == nil {
		t.Error("an old restoring.tmp-<pid> stays")
	}
	if _, err := os.Lstat(young); err != nil {
		t.Errorf("a young one went: %v", err)
	}
}

// TestLargeRestoreRecordRead: the record of a restore writing in tens of
// thousands of folders (over a MiB) is read whole, so a killed one's
// temporaries are still found.
func TestLargeRestoreRecordRead(t *testing.T) {
	dir, st := newTestStore(t, Options{})
	var paths []string
	for i := range 60000 {
		paths = append(paths, fmt.Sprintf("folder-number-%06d/file.txt", i))
	}
	paths = append(paths, "zz/file.txt")
	const tag = "0123456789abcdef"
	if err := st.beginRestore(tag, paths); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(st.restoreRecordPath()); err != nil || fi.Size() <= 1<<20 {
		t.Fatalf("record of %d paths: %v, %v bytes; want over a MiB", len(paths), err, fi.Size())
	}
	left := "zz/" + platform.TempPrefix + tag + "-x"
	putFile(t, filepath.Join(dir, filepath.FromSlash(left)), "temp")
	st.takeRestoreRecord(context.Background())
	if _, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(left))); err == nil {
		t.Errorf("%s stays: the record was not read", left)
	}
	if !st.restoreUnsure {
		t.Error("the next seal is not a full reconcile")
	}
}
