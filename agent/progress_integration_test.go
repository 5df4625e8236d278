package agent_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/agent/api"
)

// TestSealProgress: a full seal of many files tells how far it has come: a
// "progress" event (the last one at every file) on the event stream, and
// status meanwhile; none is left in status once it sealed.
func TestSealProgress(t *testing.T) {
	ws := t.TempDir()
	write(t, filepath.Join(ws, "a.txt"), "a\n")
	d := startDaemon(t, "", "--config", configFile(t, "[defaults]\nautosave = false\n"), "--watch", ws)
	waitWatching(t, d, ws)
	n := 12000
	for i := range n {
		p := filepath.Join(ws, fmt.Sprintf("d%02d", i%40), fmt.Sprintf("f%05d", i))
		if i < 40 {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(p, []byte{byte(i)}, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	events := subscribe(t, d.socket, ws)
	progress := make(chan api.Progress, 64)
	go func() {
		defer close(progress)
		for ev := range events {
			if ev.Type != api.EvProgress {
				continue
			}
			var pr api.Progress
			if b, err := json.Marshal(ev.Data); err == nil && json.Unmarshal(b, &pr) == nil {
				progress <- pr
			}
		}
	}()
	if code, body := call(t, d.socket, "POST", "/v1/checkpoint", api.CheckpointRequest{Workspace: ws, Label: "many"}); code != 200 {
		t.Fatalf("checkpoint: %d %v", code, body)
	}
	deadline := time.After(30 * time.Second)
	for done := false; !done; {
		select {
		case p, open := <-progress:
			if !open {
				t.Fatal("the event stream ended without the seal's last progress")
			}
			if p.Total < n || p.Done > p.Total || p.Op == "" || p.Since.IsZero() {
				t.Fatalf("progress %+v: want %d files or more, an operation and a start", p, n)
			}
			done = p.Done == p.Total
		case <-deadline:
			t.Fatal("no progress event at the seal's end")
		}
	}
	if w, ok := d.workspace(ws); !ok || w.Progress != nil {
		t.Errorf("status after the seal: %+v", w.Progress)
	}
}
