package agent_test

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// TestMaintenanceWhenIdle: with a short maintenance_idle and
// maintenance_interval, the daemon maintains an idle workspace's store by
// itself (refs and objects packed), status shows the store's figures and
// the last maintenance, and `cairn gc` through the daemon runs it at once.
func TestMaintenanceWhenIdle(t *testing.T) {
	ws, state := t.TempDir(), t.TempDir()
	write(t, filepath.Join(ws, "a.txt"), "a\n")
	cfg := filepath.Join(t.TempDir(), "cairn.toml")
	write(t, cfg, "maintenance_interval = \"500ms\"\nmaintenance_idle = \"300ms\"\n"+
		"[defaults]\nautosave_quiet = \"100ms\"\nautosave_max_wait = \"1s\"\n")
	d := startDaemon(t, state, "--config", cfg, "--watch", ws)
	waitRecord(t, ws, state, "baseline", func(r ckpt.Record) bool { return r.Kind == ckpt.KindBaseline })
	write(t, filepath.Join(ws, "b.txt"), "b\n")
	waitRecord(t, ws, state, "autosave", func(r ckpt.Record) bool { return r.Kind == ckpt.KindAutosave })
	// The run looked at is one that began once the autosave was in the
	// ledger: one begun before may have packed the refs before the
	// autosave's ref was written (seals run between its steps).
	sealed := time.Now()

	waitFor(t, 20*time.Second, "maintenance ran after the autosave and status shows it", func() bool {
		w, ok := d.workspace(ws)
		return ok && w.LastMaintenance != nil && w.LastMaintenance.Start.After(sealed) &&
			len(w.LastMaintenance.Steps) == 3 && w.LooseObjects == 0 && w.Kept == 2 && w.StoreBytes > 0
	})
	w, _ := d.workspace(ws)
	if loose, _ := filepath.Glob(filepath.Join(w.Store, "refs", "cairn", "*", "*")); len(loose) != 0 {
		t.Errorf("loose refs left: %v", loose)
	}
	git(t, w.Store, "fsck", "--no-dangling")

	out, err := runCairn(t, "status", "--socket", d.socket)
	if err != nil || !strings.Contains(out, "2 checkpoints kept") || !strings.Contains(out, "last maintenance") {
		t.Errorf("status: %v\n%s", err, out)
	}
	out, err = runCairn(t, "gc", "--socket", d.socket, "--state-dir", state, ws)
	if err != nil || !strings.Contains(out, "pack-refs") {
		t.Errorf("cairn gc through the daemon: %v\n%s", err, out)
	}
}

// TestGCWithoutDaemon: `cairn gc` on a store no daemon watches maintains it
// directly and prints the result.
func TestGCWithoutDaemon(t *testing.T) {
	ws, state := t.TempDir(), t.TempDir()
	write(t, filepath.Join(ws, "a.txt"), "a\n")
	sock := filepath.Join(t.TempDir(), "none.sock")
	if out, err := runCairn(t, "checkpoint", "--socket", sock, "--state-dir", state, ws); err != nil {
		t.Fatalf("checkpoint: %v\n%s", err, out)
	}
	out, err := cairnJSON(t, "gc", "--socket", sock, "--state-dir", state, "--json", ws)
	if err != nil || !strings.Contains(out, `"repack geometric"`) || !strings.Contains(out, `"looseObjects": 0`) {
		t.Fatalf("cairn gc: %v\n%s", err, out)
	}
	if out, err := runCairn(t, "gc", "--socket", sock, "--state-dir", state, filepath.Join(ws, "nope")); err == nil {
		t.Errorf("gc of a folder without a store succeeded: %s", out)
	}
}

// TestMaintenanceUnderLoad: a workspace whose writer makes it seal every
// ~200 ms is never idle, yet its store is maintained (the run is overdue
// after twice maintenance_interval; seals run between its steps instead of
// cancelling it), and `cairn gc --full` through the daemon finishes under
// the same load. Before, every seal cancelled maintenance and an idle-only
// schedule never started it.
func TestMaintenanceUnderLoad(t *testing.T) {
	ws, state := t.TempDir(), t.TempDir()
	write(t, filepath.Join(ws, "a.txt"), "a\n")
	cfg := filepath.Join(t.TempDir(), "cairn.toml")
	write(t, cfg, "maintenance_interval = \"300ms\"\nmaintenance_idle = \"1h\"\n"+
		"[defaults]\nautosave_quiet = \"50ms\"\nautosave_max_wait = \"300ms\"\n")
	d := startDaemon(t, state, "--config", cfg, "--watch", ws)
	waitRecord(t, ws, state, "baseline", func(r ckpt.Record) bool { return r.Kind == ckpt.KindBaseline })

	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // the busy agent
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			write(t, filepath.Join(ws, fmt.Sprintf("w/f%d.txt", i%40)), fmt.Sprintf("write %d\n", i))
		}
	}()
	defer func() { close(stop); <-done }()

	autosaves := func() int {
		n := 0
		for _, r := range ledger(t, ws, state) {
			if r.Kind == ckpt.KindAutosave {
				n++
			}
		}
		return n
	}
	waitFor(t, 60*time.Second, "autosaves under way", func() bool { return autosaves() >= 3 })
	waitFor(t, 90*time.Second, "a maintenance run that finished every step while the workspace seals", func() bool {
		w, ok := d.workspace(ws)
		return ok && w.LastMaintenance != nil && w.LastMaintenance.Error == "" && w.LastMaintenance.Skipped == "" &&
			len(w.LastMaintenance.Steps) == 3
	})
	w, _ := d.workspace(ws)
	var last struct {
		Steps map[string]time.Time `json:"steps"`
	}
	b, err := os.ReadFile(filepath.Join(w.Store, "cairn", "maintenance.json"))
	if err != nil || json.Unmarshal(b, &last) != nil || len(last.Steps) < 3 {
		t.Fatalf("maintenance state: %v %s", err, b)
	}
	before := autosaves()

	out, err := cairnJSON(t, "gc", "--full", "--json", "--socket", d.socket, "--state-dir", state, ws)
	var res struct {
		Steps   []string `json:"steps"`
		Skipped string   `json:"skipped"`
		Error   string   `json:"error"`
	}
	if err != nil || json.Unmarshal([]byte(out), &res) != nil || res.Skipped != "" || res.Error != "" ||
		!slices.Contains(res.Steps, "repack full") {
		t.Fatalf("cairn gc --full under load: %v\n%s", err, out)
	}
	waitFor(t, 60*time.Second, "autosaves go on after maintenance", func() bool { return autosaves() > before })
	git(t, w.Store, "fsck", "--no-dangling")
}

// TestStoreSizeAfterSeal: status shows the store's real size after each
// seal, not the figure measured when the store opened (or by the last
// maintenance): 4 MiB that do not compress, autosaved, are in the size
// without any maintenance run.
func TestStoreSizeAfterSeal(t *testing.T) {
	ws, state := t.TempDir(), t.TempDir()
	write(t, filepath.Join(ws, "a.txt"), "a\n")
	cfg := filepath.Join(t.TempDir(), "cairn.toml")
	write(t, cfg, "maintenance_interval = \"24h\"\n[defaults]\nautosave_quiet = \"100ms\"\nautosave_max_wait = \"1s\"\n")
	d := startDaemon(t, state, "--config", cfg, "--watch", ws)
	waitRecord(t, ws, state, "baseline", func(r ckpt.Record) bool { return r.Kind == ckpt.KindBaseline })
	w, _ := d.workspace(ws)
	before := w.StoreBytes
	noise := make([]byte, 4<<20)
	if _, err := rand.Read(noise); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "noise.bin"), noise, 0o644); err != nil {
		t.Fatal(err)
	}
	waitRecord(t, ws, state, "autosave", func(r ckpt.Record) bool { return r.Kind == ckpt.KindAutosave })
	waitFor(t, 20*time.Second, "status to count the 4 MiB sealed", func() bool {
		w, ok := d.workspace(ws)
		return ok && w.StoreBytes >= before+4<<20 && w.LastMaintenance == nil
	})
}
