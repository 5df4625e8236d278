package snapshot

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/platform/testsupport"
	"github.com/cairn-dev/cairn/restore/ckpt"
)

// TestDiffWorkTreeSeesRacilyCleanChange: on a file system with whole-second
// timestamps, a file rewritten at the same size in the same second as the
// checkpoint that holds it (its stat then matches cairn's index entry) is a
// change in a diff against the work tree. git tells such a racily clean
// entry by comparing it with the index file's mtime; the copy of the index
// the diff stages keeps that mtime, so git checks the entry's content
// instead of trusting its stat.
func TestDiffWorkTreeSeesRacilyCleanChange(t *testing.T) {
	mnt := testsupport.MountExt4Coarse(t, 64<<20)
	for attempt := range 5 {
		dir := filepath.Join(mnt, "work", string(rune('a'+attempt)))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		st := openTestStore(t, dir, Options{Engine: EngineGit, StateDir: filepath.Join(mnt, "state", string(rune('a'+attempt)))})
		a := filepath.Join(dir, "a.txt")
		if err := os.WriteFile(a, []byte("one\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		first := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
		before, _ := os.Stat(st.git.Index)
		if err := os.WriteFile(a, []byte("two\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		after, _ := os.Stat(a)
		if before == nil || !after.ModTime().Equal(before.ModTime()) {
			continue // the rewrite fell in a later second: nothing racy to see
		}
		// The diff runs a second later, as `cairn diff` after `cairn checkpoint` may.
		time.Sleep(time.Until(after.ModTime().Truncate(time.Second).Add(time.Second + 10*time.Millisecond))) // not a wait: pacing
		res, err := st.DiffWith(context.Background(), first.SHA, "", DiffOptions{Files: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Files) != 1 || res.Files[0].Path != "a.txt" || res.Files[0].Status != ckpt.FileChanged {
			t.Fatalf("diff against the work tree: %+v, want a.txt changed", res.Files)
		}
		return
	}
	t.Skip("no rewrite fell in the checkpoint's second in 5 tries (a slow machine)")
}
