package agent_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/client"
	"github.com/cairn-dev/cairn/platform/testsupport"
	"github.com/cairn-dev/cairn/restore/ckpt"
)

// A manual checkpoint holds what is on disk when it is asked for, though
// the watch has not reported the last write yet.
func TestManualCheckpointIsABarrier(t *testing.T) {
	ws := filepath.Join(t.TempDir(), "ws")
	write(t, filepath.Join(ws, "f.txt"), "x\n")
	d := startDaemon(t, "", "--watch", ws)
	waitSealed(t, d, ws)
	c := client.New(d.socket)
	for i := range 15 {
		want := fmt.Sprintf("version %d\n", i)
		write(t, filepath.Join(ws, fmt.Sprintf("n%d.txt", i)), want)
		write(t, filepath.Join(ws, "f.txt"), want)
		rec, err := c.Checkpoint(context.Background(), api.CheckpointRequest{Workspace: ws})
		if err != nil {
			t.Fatal(err)
		}
		gitDir := storeOf(t, d, ws)
		if got := git(t, gitDir, "cat-file", "blob", rec.SHA+":f.txt"); got+"\n" != want {
			t.Fatalf("checkpoint %s asked for after writing %q holds %q", rec.ID, want, got)
		}
		if got := git(t, gitDir, "cat-file", "-t", fmt.Sprintf("%s:n%d.txt", rec.SHA, i)); got != "blob" {
			t.Fatalf("checkpoint %s lacks the file written just before", rec.ID)
		}
	}
}

// fillDisk writes a file that leaves about leave bytes free on dir's file system.
func fillDisk(t *testing.T, dir string, leave int64) string {
	t.Helper()
	p := filepath.Join(dir, "filler")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		free := freeBytes(t, dir)
		if free <= leave {
			return p
		}
		n := min(int64(len(buf)), free-leave)
		if _, err := f.Write(buf[:n]); err != nil {
			return p
		}
	}
}

// A file whose blob could not be written (the store's disk full) stays
// pending, and is sealed once space returns, though it never changes again.
func TestUnsealedPathRetried(t *testing.T) {
	state := testsupport.MountTmpfs(t, "16m")
	ws := filepath.Join(t.TempDir(), "ws")
	write(t, filepath.Join(ws, "f.txt"), "x\n")
	cfg := configFile(t, "disk_floor = \"off\"\n"+fastAutosave)
	d := startDaemon(t, state, "--config", cfg, "--watch", ws)
	waitSealed(t, d, ws)
	filler := fillDisk(t, state, 256<<10)
	big := make([]byte, 3<<20) // over 1 MiB: written loose as it is read
	rand.Read(big)
	if err := os.WriteFile(filepath.Join(ws, "big.bin"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	waitRecord(t, ws, state, "a checkpoint that could not store big.bin", func(r ckpt.Record) bool {
		return r.State == ckpt.StatePartial && strings.Contains(fmt.Sprint(r.Issues), "big.bin") ||
			r.State == ckpt.StateFailed
	})
	waitState(t, d, ws, "big.bin pending", func(w api.WorkspaceStatus) bool { return w.Pending > 0 })
	os.Remove(filler)
	rec := waitRecord(t, ws, state, "a checkpoint holding big.bin", func(r ckpt.Record) bool {
		return r.State == ckpt.StateOK && r.SHA != "" && strings.Contains(git(t, storeOf(t, d, ws), "ls-tree", "--name-only", r.SHA), "big.bin")
	})
	if got := git(t, storeOf(t, d, ws), "cat-file", "-s", rec.SHA+":big.bin"); got != fmt.Sprint(len(big)) {
		t.Fatalf("big.bin sealed with %s bytes", got)
	}
	waitState(t, d, ws, "nothing pending", func(w api.WorkspaceStatus) bool { return w.Pending == 0 })
}

// Autosaves paused under the disk floor resume by themselves when space
// returns, with no further edit.
func TestDiskFloorPauseEnds(t *testing.T) {
	state := testsupport.MountTmpfs(t, "16m")
	ws := filepath.Join(t.TempDir(), "ws")
	write(t, filepath.Join(ws, "f.txt"), "x\n")
	cfg := configFile(t, "disk_floor = \"50%\"\n"+fastAutosave)
	d := startDaemon(t, state, "--config", cfg, "--watch", ws)
	waitSealed(t, d, ws)
	filler := fillDisk(t, state, 4<<20)
	write(t, filepath.Join(ws, "g.txt"), "made while the disk was full\n")
	waitState(t, d, ws, "autosaves paused with g.txt pending", func(w api.WorkspaceStatus) bool {
		return w.AutosavePaused != "" && w.Pending > 0
	})
	os.Remove(filler)
	waitRecord(t, ws, state, "an autosave holding g.txt", func(r ckpt.Record) bool {
		return r.Kind == ckpt.KindAutosave && r.SHA != "" && strings.Contains(git(t, storeOf(t, d, ws), "ls-tree", "--name-only", r.SHA), "g.txt")
	})
	waitState(t, d, ws, "autosaves resumed", func(w api.WorkspaceStatus) bool { return w.AutosavePaused == "" && w.Pending == 0 })
}

func freeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * int64(st.Bsize)
}
