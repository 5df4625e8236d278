package snapshot

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// TestOpenIndexesPackWithoutIndex: a pack whose index was lost (and is old
// enough not to be a write in progress) is indexed again when the store is
// opened, not deleted: every checkpoint it holds stays readable and git
// fsck finds nothing missing.
func TestOpenIndexesPackWithoutIndex(t *testing.T) {
	ws, st := newTestStore(t, Options{})
	var recs []ckpt.Record
	for i := range 26 {
		writeTree(t, ws, map[string]string{fmt.Sprintf("f%02d.txt", i): strings.Repeat(fmt.Sprintf("line %d\n", i), 50), "common.txt": fmt.Sprint(i)})
		recs = append(recs, mustSeal(t, st, SealRequest{Kind: ckpt.KindManual}))
	}
	gitOut(t, st, nil, "repack", "-a", "-d", "-q")
	gitOut(t, st, nil, "prune-packed")
	packs, _ := filepath.Glob(filepath.Join(st.GitDir(), "objects", "pack", "pack-*.pack"))
	if len(packs) != 1 {
		t.Fatalf("packs after repack: %v", packs)
	}
	stem := strings.TrimSuffix(packs[0], ".pack")
	for _, ext := range []string{".idx", ".rev", ".bitmap"} {
		if err := os.Remove(stem + ext); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-6 * time.Minute)
	if err := os.Chtimes(packs[0], old, old); err != nil {
		t.Fatal(err)
	}
	st.Close()
	st2 := openTestStore(t, ws, Options{StateDir: stateDirOf(st)})
	if _, err := os.Lstat(packs[0]); err != nil {
		t.Fatalf("the pack without its index is gone after open: %v", err)
	}
	if _, err := os.Lstat(stem + ".idx"); err != nil {
		t.Errorf("the pack was not indexed at open: %v", err)
	}
	if out, err := st2.git.Run(context.Background(), nil, "fsck", "--no-dangling", "--no-progress"); err != nil {
		t.Errorf("git fsck after open: %v\n%s", err, out)
	}
	for _, r := range recs {
		gitOut(t, st2, nil, "ls-tree", "-r", r.SHA)
	}
	// The store still seals on top of them.
	writeTree(t, ws, map[string]string{"after.txt": "x"})
	mustSeal(t, st2, SealRequest{Kind: ckpt.KindManual})
}

// TestOpenQuarantinesUnindexablePack: a pack without its index that git
// cannot index (cut short) is moved into cairn/quarantine/, not deleted.
func TestOpenQuarantinesUnindexablePack(t *testing.T) {
	ws, st := newTestStore(t, Options{})
	writeTree(t, ws, map[string]string{"a.txt": "a"})
	mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
	name := "pack-" + strings.Repeat("1", 40) + ".pack"
	p := filepath.Join(st.GitDir(), "objects", "pack", name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("PACK\x00\x00\x00\x02\x00\x00\x00\x05cut short"), 0o444); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-6 * time.Minute)
	if err := os.Chtimes(p, old, old); err != nil {
		t.Fatal(err)
	}
	openTestStore(t, ws, Options{StateDir: stateDirOf(st)})
	if _, err := os.Lstat(p); err == nil {
		t.Errorf("an unindexable pack stayed in objects/pack")
	}
	q := filepath.Join(st.GitDir(), cairnSubdir, quarantineSubdir, "objects", "pack", name)
	if b, err := os.ReadFile(q); err != nil || !strings.HasSuffix(string(b), "cut short") {
		t.Errorf("the unindexable pack is not in the quarantine: %v", err)
	}
}

// TestCheckupLockHolder: a stale-looking lock a live process holds open is
// reported held by that pid, with no repair; once closed, it is removable.
func TestCheckupLockHolder(t *testing.T) {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("no /proc")
	}
	ws, st := newTestStore(t, Options{})
	writeTree(t, ws, map[string]string{"a.txt": "a"})
	mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
	lock := filepath.Join(st.GitDir(), "refs", "heads", "main.lock")
	f, err := os.Create(lock)
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * time.Minute)
	if err := os.Chtimes(lock, old, old); err != nil {
		t.Fatal(err)
	}
	c := NewCheckup(st.git)
	probs := c.Locks()
	if len(probs) != 1 || probs[0].Repair != "" || !strings.Contains(probs[0].Message, fmt.Sprintf("held by pid %d", os.Getpid())) {
		t.Errorf("a held lock: %+v", probs)
	}
	f.Close()
	probs = c.Locks()
	if len(probs) != 1 || probs[0].Repair == "" || !strings.Contains(probs[0].Message, "no holder found") {
		t.Fatalf("a lock no one holds: %+v", probs)
	}
	if _, err := probs[0].Fix(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(lock); err == nil {
		t.Error("the stale lock was not removed")
	}
}
