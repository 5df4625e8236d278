//go:build unix

package snapshot

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// TestFleetFetchRefs: a store without checkpoints fetched from another
// store's refs rebuilds the same ledger (ids, kinds, labels, commits,
// parents, the root commits' trailer parents included), takes the given
// position, hands out the next id after them, and a second fetch is refused.
func TestFleetFetchRefs(t *testing.T) {
	ctx := context.Background()
	srcDir, src := newTestStore(t, Options{})
	writeFile(t, srcDir, "a.txt", "one\n", 0o644)
	mustSeal(t, src, SealRequest{Kind: ckpt.KindManual, Label: "first"})
	writeFile(t, srcDir, "b.txt", "two\n", 0o644)
	mustSeal(t, src, SealRequest{Kind: ckpt.KindCompleted, CodonID: "write", CodonName: "Write", RunID: "1-abcde"})
	writeFile(t, srcDir, "a.txt", "three\n", 0o644)
	auto := mustSeal(t, src, SealRequest{Kind: ckpt.KindAutosave})
	writeFile(t, srcDir, "c.txt", "four\n", 0o644)
	mustSeal(t, src, SealRequest{Kind: ckpt.KindAutosave})
	want := src.Records()

	dstDir, dst := newTestStore(t, Options{})
	remote := src.GitDir()
	specs := []string{"+refs/heads/*:refs/heads/*", "+refs/cairn/*:refs/cairn/*"}
	n, err := dst.FetchRefs(ctx, FetchOptions{Remote: remote, Refspecs: specs, Home: t.TempDir(), Position: auto.SHA})
	if err != nil {
		t.Fatal(err)
	}
	got := dst.Records()
	if n != len(want) || len(got) != len(want) {
		t.Fatalf("fetched %d checkpoints, ledger %d records; want %d", n, len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.ID != w.ID || g.Kind != w.Kind || g.Label != w.Label || g.SHA != w.SHA || g.Parent != w.Parent ||
			g.RunID != w.RunID || g.CodonID != w.CodonID || g.CodonName != w.CodonName || !g.Time.Equal(w.Time.Truncate(time.Second)) || !g.Recovered {
			t.Errorf("record %d: got %+v\nwant %+v", i, g, w)
		}
	}
	if p := dst.Position(); p != auto.SHA {
		t.Errorf("position %s, want %s (%s)", p, auto.SHA, auto.ID)
	}
	if m, _ := dst.Resolve(ctx, "refs/heads/main"); m != mustResolve(t, src, "refs/heads/main") {
		t.Errorf("main is %s, not the remote's", m)
	}
	// The ledger is on disk: a new open reads the same records.
	again := openTestStore(t, dstDir, Options{StateDir: filepath.Dir(filepath.Dir(filepath.Dir(dst.GitDir())))})
	if len(again.Records()) != len(want) {
		t.Errorf("reopened: %d records", len(again.Records()))
	}
	writeFile(t, dstDir, "d.txt", "five\n", 0o644)
	next := mustSeal(t, dst, SealRequest{Kind: ckpt.KindManual})
	if next.ID != "c5" || next.Parent != auto.SHA {
		t.Errorf("next seal %s parent %s; want c5 after the position %s", next.ID, next.Parent, auto.SHA)
	}
	if _, err := dst.FetchRefs(ctx, FetchOptions{Remote: remote, Refspecs: specs}); !errors.Is(err, ErrNotEmpty) {
		t.Errorf("second fetch: %v, want ErrNotEmpty", err)
	}

	// A remote that does not exist fails and leaves the store empty.
	_, empty := newTestStore(t, Options{})
	if _, err := empty.FetchRefs(ctx, FetchOptions{Remote: filepath.Join(t.TempDir(), "none.git"), Refspecs: specs}); err == nil {
		t.Error("fetch from nowhere succeeded")
	}
	if len(empty.Records()) != 0 {
		t.Errorf("records after a failed fetch: %v", empty.Records())
	}
	if _, err := os.Stat(filepath.Join(empty.GitDir(), cairnSubdir, "position")); err == nil {
		t.Error("a failed fetch set a position")
	}
}

func mustResolve(t *testing.T, st *Store, rev string) string {
	t.Helper()
	sha, ok := st.Resolve(context.Background(), rev)
	if !ok {
		t.Fatalf("resolve %s", rev)
	}
	return sha
}
