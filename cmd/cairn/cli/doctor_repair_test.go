package cli_test

import (
	"bytes"
	"compress/zlib"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/snapshot"
)

// TestDoctorRepairs: doctor --fsck finds what seals rely on damaged, each
// with the repair it would make, and exits 6; --repair makes them, says
// what it did and exits 0; nothing that could hold a checkpoint is deleted:
//   - cairn's index cut short: rebuilt from the position's tree;
//   - the stat cache torn: removed (derived);
//   - a stale cairn/index.lock no process holds: removed;
//   - a pack whose index was removed: indexed again (git index-pack);
//   - a loose object that does not hash to its name: moved to the quarantine;
//   - a ref naming a missing commit: recorded in the quarantine's
//     broken-refs, then deleted.
func TestDoctorRepairs(t *testing.T) {
	ws, state := t.TempDir(), t.TempDir()
	env := []string{"CAIRN_STATE_DIR=" + state}
	sock := filepath.Join(state, "cairn.sock")
	checkpoint := func(name string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(ws, name), []byte(name+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, se, code := cairn(t, env, "checkpoint", ws, "--state-dir", state, "--socket", sock); code != 0 {
			t.Fatalf("checkpoint: %d %s %s", code, out, se)
		}
	}
	checkpoint("a.txt")
	if out, se, code := cairn(t, env, "gc", ws, "--state-dir", state, "--socket", sock); code != 0 {
		t.Fatalf("gc: exit %d\n%s%s", code, out, se)
	}
	checkpoint("b.txt")
	checkpoint("c.txt")
	stores, _ := filepath.Glob(filepath.Join(state, "stores", "*", "store.git"))
	if len(stores) != 1 {
		t.Fatalf("stores: %v", stores)
	}
	gitDir := stores[0]
	cairnDir := filepath.Join(gitDir, "cairn")
	old := time.Now().Add(-2 * time.Minute)

	// cairn's index, cut short.
	idx := filepath.Join(cairnDir, "index")
	b, err := os.ReadFile(idx)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(idx, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	// The stat cache, torn.
	sc := filepath.Join(cairnDir, "statcache")
	b, err = os.ReadFile(sc)
	if err != nil {
		b = []byte("not a stat cache at all, cut")
	}
	if err := os.WriteFile(sc, b[:len(b)-5], 0o644); err != nil {
		t.Fatal(err)
	}
	// A lock an interrupted seal left.
	lock := filepath.Join(cairnDir, "index.lock")
	if err := os.WriteFile(lock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(lock, old, old); err != nil {
		t.Fatal(err)
	}
	// The pack gc wrote, without its index.
	packs, _ := filepath.Glob(filepath.Join(gitDir, "objects", "pack", "pack-*.pack"))
	if len(packs) == 0 {
		t.Fatal("gc left no pack")
	}
	pack := packs[0]
	stem := strings.TrimSuffix(pack, ".pack")
	for _, ext := range []string{".idx", ".rev", ".bitmap"} {
		if err := os.Remove(stem + ext); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	if err := os.Chtimes(pack, old, old); err != nil {
		t.Fatal(err)
	}
	// A loose object whose bytes are another object's.
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	zw.Write([]byte("blob 3\x00abc"))
	zw.Close()
	badObj := filepath.Join(gitDir, "objects", "ab", strings.Repeat("c", 38))
	if err := os.MkdirAll(filepath.Dir(badObj), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(badObj, z.Bytes(), 0o444); err != nil {
		t.Fatal(err)
	}
	// A ref naming a commit the store never had.
	lost := strings.Repeat("1234", 10)
	brokenRef := filepath.Join(gitDir, "refs", "cairn", "manual", "c99")
	if err := os.MkdirAll(filepath.Dir(brokenRef), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(brokenRef, []byte(lost+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	args := []string{"doctor", "--fsck", "--state-dir", state, "--socket", sock, ws}
	out, se, code := cairn(t, env, args...)
	if code != 6 {
		t.Errorf("doctor --fsck on a damaged store: exit %d, want 6\n%s%s", code, out, se)
	}
	for _, want := range []string{
		"FAIL index    cairn's index " + idx,
		"FAIL statcache stat cache " + sc,
		"FAIL lock     stale lock " + lock,
		"FAIL pack     " + pack + " has no index",
		"FAIL object   loose object " + badObj,
		"FAIL ref      refs/cairn/manual/c99 names " + lost,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor --fsck does not report %q:\n%s", want, out)
		}
	}
	// Each names its repair; the refs wait for the pack without its index,
	// which may hold their commits (it holds c1's and main's).
	if strings.Count(out, "`cairn doctor --fsck --repair` would") != 5 || !strings.Contains(out, "a pack without its index may hold it") {
		t.Errorf("findings do not name their repair:\n%s", out)
	}

	out, se, code = cairn(t, env, append([]string{"doctor", "--repair"}, args[2:]...)...)
	if code != 0 {
		t.Errorf("doctor --repair: exit %d, want 0\n%s%s", code, out, se)
	}
	for _, want := range []string{
		"did: rebuilt " + idx + " from tree",
		"did: removed " + sc,
		"did: removed " + lock,
		"did: indexed " + pack,
		"did: moved " + badObj + " to " + filepath.Join(cairnDir, "quarantine", "objects", "ab", strings.Repeat("c", 38)),
		"did: deleted refs/cairn/manual/c99 (was " + lost,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor --repair does not say %q:\n%s", want, out)
		}
	}
	if b, err := os.ReadFile(filepath.Join(cairnDir, "quarantine", "objects", "ab", strings.Repeat("c", 38))); err != nil || !bytes.Equal(b, z.Bytes()) {
		t.Errorf("the bad loose object is not kept whole in the quarantine: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(cairnDir, "quarantine", "broken-refs")); err != nil || !strings.HasPrefix(string(b), lost+" refs/cairn/manual/c99 ") {
		t.Errorf("broken-refs does not record the deleted ref: %q %v", b, err)
	}
	if _, err := os.Stat(stem + ".idx"); err != nil {
		t.Errorf("the pack was not indexed: %v", err)
	}
	_, ver, err := snapshot.FindGit(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	gitPath, _, _ := snapshot.FindGit(context.Background())
	g := snapshot.NewGit(gitPath, ver, gitDir, filepath.Dir(gitDir))
	g.Index = idx
	if ls, err := g.Run(context.Background(), nil, "ls-files"); err != nil || !strings.Contains(string(ls), "c.txt") {
		t.Errorf("cairn's index after the repair: %v\n%s", err, ls)
	}

	out, se, code = cairn(t, env, args...)
	if code != 0 {
		t.Errorf("doctor --fsck after the repair: exit %d\n%s%s", code, out, se)
	}
	checkpoint("d.txt")
	out, se, code = cairn(t, env, "list", ws, "--state-dir", state, "--socket", sock)
	if code != 0 || strings.Count(out, "\n") < 4 {
		t.Errorf("list after the repair: exit %d\n%s%s", code, out, se)
	}
}
