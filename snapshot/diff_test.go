package snapshot

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// TestDiffWithFiles: the files a diff lists carry their status and line
// counts, a binary file is named and never dumped, and paths narrow the
// patch to one file, also against the work tree.
func TestDiffWithFiles(t *testing.T) {
	ctx := context.Background()
	ws := t.TempDir()
	st, err := Open(ctx, ws, Options{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	putFile(t, filepath.Join(ws, "a.txt"), "a1\n")
	putFile(t, filepath.Join(ws, "gone.txt"), "bye\n")
	c1, err := st.Seal(ctx, SealRequest{Kind: ckpt.KindManual, Label: "one"})
	if err != nil {
		t.Fatal(err)
	}
	putFile(t, filepath.Join(ws, "a.txt"), "a2\nmore\n")
	putFile(t, filepath.Join(ws, "b d.bin"), "\x00\x01\x02binary")
	if err := os.Remove(filepath.Join(ws, "gone.txt")); err != nil {
		t.Fatal(err)
	}
	c2, err := st.Seal(ctx, SealRequest{Kind: ckpt.KindManual, Label: "two"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := st.DiffWith(ctx, c1.SHA, c2.SHA, DiffOptions{Files: true, Patch: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []ckpt.FileChange{
		{Path: "a.txt", Status: ckpt.FileChanged, Added: 2, Removed: 1},
		{Path: "b d.bin", Status: ckpt.FileAdded, Binary: true},
		{Path: "gone.txt", Status: ckpt.FileRemoved, Removed: 1},
	}
	if !reflect.DeepEqual(res.Files, want) {
		t.Errorf("files %+v, want %+v", res.Files, want)
	}
	if !strings.Contains(res.Patch, "Binary files /dev/null and b/b d.bin differ") || strings.Contains(res.Patch, "binary\n") {
		t.Errorf("the binary file is not named, or is dumped:\n%s", res.Patch)
	}
	one, err := st.DiffWith(ctx, c1.SHA, c2.SHA, DiffOptions{Patch: true, Paths: []string{"a.txt"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(one.Patch, "+a2") || strings.Contains(one.Patch, "gone.txt") {
		t.Errorf("patch of a.txt only:\n%s", one.Patch)
	}
	putFile(t, filepath.Join(ws, "a.txt"), "by hand\n")
	wt, err := st.DiffWith(ctx, c2.SHA, "", DiffOptions{Files: true, Patch: true, Paths: []string{"a.txt"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(wt.Files) != 1 || wt.Files[0].Path != "a.txt" || !strings.Contains(wt.Patch, "+by hand") {
		t.Errorf("against the work tree: %+v\n%s", wt.Files, wt.Patch)
	}
}
