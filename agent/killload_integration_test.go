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
	seedLoad(t, ws)
	state := t.TempDir()
	d := startDaemon(t, state, "--config", configFile(t, fastAutosave), "--watch", ws)
	waitRecord(t, ws, state, "baseline", func(r ckpt.Record) bool { return r.Kind == ckpt.KindBaseline })

	stop := make(chan struct{})
	var ops atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		loadWriter(ws, nil, rand.New(rand.NewSource(1)), stop, &ops)
	}()
	start := time.Now()
	rng := rand.New(rand.NewSource(2))
	for range kills {
		time.Sleep(time.Duration(300+rng.Intn(1200)) * time.Millisecond) // not a wait: a kill at a random point
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
	gitDir := plainGitDir(t, state, ws)
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

// seedLoad makes the 200 files of a workspace under load, d00..d19/f<n>.txt.
func seedLoad(t *testing.T, ws string) {
	t.Helper()
	for i := range 200 {
		write(t, filepath.Join(ws, fmt.Sprintf("d%02d/f%03d.txt", i%20, i)), fmt.Sprintf("start %d\n", i))
	}
}

// loadWriter changes files under ws until stop closes, counting its
// changes in n: creates, edits (appends), same-size rewrites, deletes and
// renames across the 20 folders seedLoad makes, and now and then a
// same-size rewrite of a big file big/big<0-5>.bin where there is one, in
// bursts of 0.05–0.5 s at up to 500 ops/s with pauses of up to 0.25 s. own,
// if not nil, is called on each file and folder it creates (as root for a
// user's workspace: to give them to the user).
func loadWriter(ws string, own func(string), rng *rand.Rand, stop <-chan struct{}, n *atomic.Int64) {
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	name := func() string {
		return filepath.Join(ws, fmt.Sprintf("d%02d/f%03d.txt", rng.Intn(20), rng.Intn(300)))
	}
	give := func(p string) {
		if own != nil {
			own(filepath.Dir(p))
			own(p)
		}
	}
	burst := time.Now().Add(time.Duration(50+rng.Intn(450)) * time.Millisecond)
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		if time.Now().After(burst) {
			// A pause now and then lets the quiet period pass: autosaves
			// then start at many moments, not only at the maximum wait.
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(rng.Intn(250)) * time.Millisecond):
			}
			burst = time.Now().Add(time.Duration(50+rng.Intn(450)) * time.Millisecond)
		}
		p := name()
		if rng.Intn(40) == 0 { // a big file rewritten whole, same size
			p = filepath.Join(ws, fmt.Sprintf("big/big%d.bin", rng.Intn(6)))
			if b, err := os.ReadFile(p); err == nil {
				rng.Read(b)
				_ = os.WriteFile(p, b, 0o644)
			}
			n.Add(1)
			continue
		}
		switch op := rng.Intn(10); {
		case op < 3: // create or overwrite
			_ = os.MkdirAll(filepath.Dir(p), 0o755)
			_ = os.WriteFile(p, fmt.Appendf(nil, "write %d %x\n", i, rng.Int63()), 0o644)
			give(p)
		case op < 5: // edit: append a line
			if fh, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0); err == nil {
				fmt.Fprintf(fh, "edit %d\n", i)
				fh.Close()
			}
		case op < 8: // same-size rewrite, in place
			if b, err := os.ReadFile(p); err == nil && len(b) > 0 {
				b[rng.Intn(len(b))] = byte('a' + rng.Intn(26))
				if fh, err := os.OpenFile(p, os.O_WRONLY, 0); err == nil {
					_, _ = fh.WriteAt(b, 0)
					fh.Close()
				}
			}
		case op < 9: // delete
			_ = os.Remove(p)
		default: // rename, maybe into another folder, maybe over a file
			q := name()
			_ = os.MkdirAll(filepath.Dir(q), 0o755)
			give(q)
			_ = os.Rename(p, q)
		}
		n.Add(1)
	}
}
