package agent_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cairn-dev/cairn/agent/checkpoints"
	"github.com/cairn-dev/cairn/agent/client"
	"github.com/cairn-dev/cairn/restore/ckpt"
	"github.com/cairn-dev/cairn/snapshot"
	"github.com/cairn-dev/cairn/snapshot/retain"
)

// TestPinThroughDaemon: POST /v1/pin and /v1/unpin on a watched workspace
// write the store's pins, and the pin protects the checkpoint from a plan.
func TestPinThroughDaemon(t *testing.T) {
	ws, state := t.TempDir(), t.TempDir()
	write(t, filepath.Join(ws, "a.txt"), "a\n")
	d := startDaemon(t, state, "--watch", ws)
	base := waitRecord(t, ws, state, "baseline", func(r ckpt.Record) bool { return r.Kind == ckpt.KindBaseline })
	c := client.New(d.socket)
	ctx := context.Background()
	res, err := c.Pin(ctx, ws, base.ID, false)
	if err != nil || !res.Pinned || !res.Changed || res.SHA != base.SHA || res.Record == nil || res.Record.ID != base.ID {
		t.Fatalf("pin: %+v %v", res, err)
	}
	if _, err := c.Pin(ctx, ws, "c99", false); err == nil {
		t.Error("pinned an unknown checkpoint")
	}
	st, err := snapshot.Open(ctx, ws, snapshot.Options{Layout: snapshot.LayoutPlain, StateDir: state, NoCreate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	pins, _ := st.Pins()
	prot, err := checkpoints.Protect(st)
	if err != nil || !slices.Equal(pins, []string{base.SHA}) || !prot.SHAs[base.SHA] {
		t.Fatalf("pins %v, protected %v (%v)", pins, prot, err)
	}
	if drops, err := checkpoints.PlanRetention(st, retain.Defaults()); err != nil || len(drops) != 0 {
		t.Errorf("plan %+v %v", drops, err)
	}
	res, err = c.Pin(ctx, ws, base.SHA, true)
	if err != nil || res.Pinned || !res.Changed {
		t.Fatalf("unpin: %+v %v", res, err)
	}
	if pins, _ := st.Pins(); len(pins) != 0 {
		t.Errorf("pins after unpin %v", pins)
	}
}
