//go:build unix

package snapshot

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// TestOpenNoCreate: opening for a read never creates a store (nor the state
// folders a plain store lives in); it says there are no checkpoints yet. A
// store that exists opens as usual.
func TestOpenNoCreate(t *testing.T) {
	ctx := context.Background()
	t.Run("plain", func(t *testing.T) {
		ws, state := t.TempDir(), filepath.Join(t.TempDir(), "state")
		writeTree(t, ws, map[string]string{"a.txt": "a"})
		_, err := Open(ctx, ws, Options{Layout: LayoutPlain, StateDir: state, NoCreate: true})
		if !errors.Is(err, ErrNoStore) || !strings.Contains(err.Error(), "no checkpoints for "+ws+" yet") {
			t.Fatalf("NoCreate open without a store: %v", err)
		}
		if _, err := os.Lstat(state); err == nil {
			t.Errorf("NoCreate open created the state directory %s", state)
		}
		st := openTestStore(t, ws, Options{StateDir: state})
		rec := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
		ro, err := Open(ctx, ws, Options{Layout: LayoutPlain, StateDir: state, NoCreate: true})
		if err != nil {
			t.Fatalf("NoCreate open of an existing store: %v", err)
		}
		if recs := ro.Records(); len(recs) != 1 || recs[0].SHA != rec.SHA {
			t.Errorf("records through a NoCreate open: %+v", recs)
		}
	})
	t.Run("hankweave", func(t *testing.T) {
		exec := hankweaveWorkspace(t)
		_, err := Open(ctx, exec, Options{NoCreate: true})
		if !errors.Is(err, ErrNoStore) {
			t.Fatalf("NoCreate open without a store: %v", err)
		}
		ents, _ := os.ReadDir(filepath.Join(exec, ".hankweave"))
		if len(ents) != 0 {
			t.Errorf("NoCreate open wrote into .hankweave: %v", ents)
		}
	})
}

// TestIssuesNamedOnce: a path reported by more than one step (a special file
// also named racy, an invalid path named twice) appears once in the record.
func TestIssuesNamedOnce(t *testing.T) {
	dir, st := newTestStore(t, Options{})
	writeTree(t, dir, map[string]string{"a.txt": "a"})
	mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
	mkfifo(t, dir, "pipe")
	writeFile(t, dir, "a.txt", "changed", 0o644)
	rec := mustSeal(t, st, SealRequest{Kind: ckpt.KindCompleted, CodonID: "c", RunID: "1-abcde",
		Changed: []string{"pipe", "a.txt", "/abs", "/abs", "pipe"},
		Racy:    []ckpt.PathIssue{{Path: "pipe", Reason: "changed after the marker"}, {Path: "a.txt", Reason: "changed after the marker"}, {Path: "a.txt", Reason: "changed after the marker"}}})
	if rec.State != ckpt.StatePartial {
		t.Fatalf("state %s, want partial (issues %q)", rec.State, rec.Issues)
	}
	got := issuePaths(rec.Issues)
	slices.Sort(got)
	if want := []string{"/abs", "a.txt", "pipe"}; !slices.Equal(got, want) {
		t.Errorf("issues name %q, want each of %q once", got, want)
	}
	for _, is := range rec.Issues {
		if is.Path == "pipe" && (!strings.Contains(is.Reason, "not a regular file") || !strings.Contains(is.Reason, "after the marker")) {
			t.Errorf("pipe's reasons were not both kept: %q", is.Reason)
		}
	}
	// Racy alone: named once too.
	writeFile(t, dir, "a.txt", "again", 0o644)
	removeAll(t, dir, "pipe")
	rec = mustSeal(t, st, SealRequest{Kind: ckpt.KindCompleted, CodonID: "c", RunID: "1-abcde", Changed: []string{"a.txt", "pipe"},
		Racy: []ckpt.PathIssue{{Path: "a.txt", Reason: "changed after the marker"}, {Path: "a.txt", Reason: "changed after the marker"}}})
	if rec.State != ckpt.StateRacy || len(rec.Issues) != 1 {
		t.Errorf("racy record: %s %q, want racy naming a.txt once", rec.State, rec.Issues)
	}
}
