//go:build unix

package agent_test

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/snapshot"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// TestSigkillUnderLoad: a writer changes a plain workspace hundreds of times
// a second while the daemon is killed with SIGKILL again and again (a bounded
// form of the fault run: 12 kills). Afterwards the store is sound (git fsck),
// every ledger id is unique and every recorded commit exists, and a final
// checkpoint holds exactly what is on disk.
func TestSigkillUnderLoad(t *testing.T) {
	kills := 12
	if testing.Short() {
		kills = 3
	}
	ws := filepath.Join(t.TempDir(), "ws")
	for i := range 200 {
		write(t, filepath.Join(ws, fmt.Sprintf("d%02d/f%03d.txt", i%20, i)), "start\n")
	}
	state := t.TempDir()
	d := startDaemon(t, state, "--config", configFile(t, fastAutosave), "--watch", ws)
	waitRecord(t, ws, state, "baseline", func(r ckpt.Record) bool { return r.Kind == ckpt.KindBaseline })

	stop := make(chan struct{})
	var ops atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewSource(1))
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			p := filepath.Join(ws, fmt.Sprintf("d%02d/f%03d.txt", rng.Intn(20), rng.Intn(300)))
			switch rng.Intn(10) {
			case 0:
				_ = os.Remove(p)
			default:
				_ = os.MkdirAll(filepath.Dir(p), 0o755)
				_ = os.WriteFile(p, []byte(fmt.Sprintf("write %d\n", n)), 0o644)
			}
			ops.Add(1)
		}
	}()
	start := time.Now()
	rng := rand.New(rand.NewSource(2))
	for range kills {
		time.Sleep(time.Duration(300+rng.Intn(1200)) * time.Millisecond)
		d.stop(syscall.SIGKILL)
		d.start()
	}
	close(stop)
	wg.Wait()
	t.Logf("%d kills, %d writes in %s (%.0f/s)", kills, ops.Load(), time.Since(start).Round(time.Millisecond),
		float64(ops.Load())/time.Since(start).Seconds())

	// A final checkpoint through the daemon holds the disk as it is now.
	var final map[string]any
	waitFor(t, 30*time.Second, "a final checkpoint", func() bool {
		code, out := call(t, d.socket, "POST", "/v1/checkpoint", api.CheckpointRequest{Workspace: ws, Label: "final"})
		final = out
		return code == 200
	})
	if final["state"] != "ok" {
		t.Errorf("final checkpoint: %v", final)
	}
	recs := ledger(t, ws, state)
	real, _ := filepath.EvalSymlinks(ws)
	gitDir := filepath.Join(state, "stores", snapshot.PlainStoreName(real), "store.git")
	git(t, gitDir, "fsck", "--no-dangling", "--no-progress")
	seen := map[string]bool{}
	for _, r := range recs {
		if seen[r.ID] {
			t.Errorf("ledger id %s recorded twice", r.ID)
		}
		seen[r.ID] = true
		if r.SHA != "" && r.State != ckpt.StateFailed {
			git(t, gitDir, "cat-file", "-e", r.SHA+"^{commit}")
		}
	}
	sha, _ := final["sha"].(string)
	want := map[string]string{}
	for _, l := range strings.Split(git(t, gitDir, "ls-tree", "-r", sha), "\n") {
		if meta, path, ok := strings.Cut(l, "\t"); ok {
			want[path] = strings.Fields(meta)[2]
		}
	}
	got := map[string]string{}
	_ = filepath.WalkDir(ws, func(p string, de fs.DirEntry, err error) error {
		if err != nil || !de.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		h := sha1.New()
		fmt.Fprintf(h, "blob %d\x00", len(b))
		h.Write(b)
		rel, _ := filepath.Rel(ws, p)
		got[filepath.ToSlash(rel)] = hex.EncodeToString(h.Sum(nil))
		return nil
	})
	if len(got) != len(want) {
		t.Errorf("final checkpoint holds %d files, the disk %d", len(want), len(got))
	}
	for p, h := range got {
		if want[p] != h {
			t.Errorf("%s: disk %s, final checkpoint %q", p, h, want[p])
		}
	}
	t.Logf("%d ledger records", len(recs))
}
