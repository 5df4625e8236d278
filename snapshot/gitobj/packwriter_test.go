package gitobj_test

import (
	"bytes"
	"compress/zlib"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/snapshot/gitobj"
)

// growing is a reader that holds more bytes than it was said to: a file
// that grew while it was read.
type growing struct{ r io.Reader }

func (g *growing) Read(p []byte) (int, error) {
	n, err := g.r.Read(p)
	if err == io.EOF {
		p[0] = 'x'
		return 1, nil
	}
	return n, err
}

// TestPackWriterWritesPacksGitReads writes objects from several goroutines
// through a PackWriter whose packs are split small, in both object formats:
// every pack passes git's verify-pack with an index git builds byte for
// byte alike, every object reads back as written, fsck --strict finds
// nothing wrong, a large blob is streamed into a pack (not loose), an object
// written twice is stored once, and a file that changed while it was read
// leaves nothing behind; the same with room reserved beforehand for part
// of the objects (Reserve: the table then grows from the reserved size).
func TestPackWriterWritesPacksGitReads(t *testing.T) {
	for _, c := range []struct {
		format  string
		reserve int
	}{{"sha1", 0}, {"sha256", 0}, {"sha1", 1000}, {"sha256", 3000}} {
		format := c.format
		t.Run(fmt.Sprintf("%s/reserve=%d", format, c.reserve), func(t *testing.T) {
			ctx := context.Background()
			g, gitDir := newRepo(t, format)
			f, _ := gitobj.FormatByName(format)
			db := gitobj.NewDB(gitDir, f)
			w := db.NewPackWriter(64<<10, zlib.DefaultCompression)
			w.Reserve(c.reserve)

			large := make([]byte, 3<<20+7)
			rand.Read(large)
			var blobs [][]byte
			// Enough objects that the writer's table of ids grows twice.
			for i := range 1500 {
				blobs = append(blobs, []byte(fmt.Sprintf("file %d\n%s", i, strings.Repeat("data ", i%300*7))))
			}
			blobs = append(blobs, nil, large, blobs[3])
			ids := make([]string, len(blobs))
			var wg sync.WaitGroup
			errs := make(chan error, len(blobs))
			for i := range blobs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					id, err := w.WriteBlobFrom(bytes.NewReader(blobs[i]), int64(len(blobs[i])))
					ids[i] = id
					errs <- err
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			// A large file and a small one that grew while read: ErrChanged, nothing kept.
			big := make([]byte, 2<<20)
			if _, err := w.WriteBlobFrom(&growing{bytes.NewReader(big)}, int64(len(big))); !errors.Is(err, gitobj.ErrChanged) {
				t.Fatalf("a large file that grew: %v, want ErrChanged", err)
			}
			if _, err := w.WriteBlobFrom(&growing{strings.NewReader("ab")}, 2); !errors.Is(err, gitobj.ErrChanged) {
				t.Fatalf("a small file that grew: %v, want ErrChanged", err)
			}
			if _, err := w.WriteBlobFrom(bytes.NewReader(large), int64(len(large))); err != nil { // again: stored once
				t.Fatal(err)
			}
			var entries []gitobj.TreeEntry
			seen := map[string]bool{}
			for i, id := range ids {
				if id != f.Hash("blob", blobs[i]) {
					t.Fatalf("blob %d: id %s, want %s", i, id, f.Hash("blob", blobs[i]))
				}
				if !seen[id] {
					seen[id] = true
					entries = append(entries, gitobj.TreeEntry{Mode: gitobj.ModeFile, Name: fmt.Sprintf("f%03d", i), ID: id})
				}
			}
			data, err := gitobj.EncodeTree(entries, f)
			if err != nil {
				t.Fatal(err)
			}
			tid, err := w.Write("tree", data)
			if err != nil {
				t.Fatal(err)
			}
			ident := "cairn <cairn@localhost>"
			cid, err := w.Write("commit", gitobj.Commit{Tree: tid, Author: ident, Committer: ident, When: time.Unix(1700000000, 0), Message: "packed\n"}.Encode())
			if err != nil {
				t.Fatal(err)
			}
			if n := w.Len(); n != len(seen)+2 {
				t.Errorf("the writer holds %d objects, want %d", n, len(seen)+2)
			}
			for id := range seen {
				if !w.Has(id) {
					t.Fatalf("the writer does not hold %s, which it wrote", id)
				}
			}
			if absent := f.Hash("blob", []byte("never written")); w.Has(absent) {
				t.Errorf("the writer holds %s, which it never wrote", absent)
			}
			packs, err := w.Close()
			if err != nil {
				t.Fatal(err)
			}
			if len(packs) < 2 {
				t.Errorf("%d packs, want the objects split across several at 64 KiB", len(packs))
			}
			for _, pack := range packs {
				idx := strings.TrimSuffix(pack, ".pack") + ".idx"
				if _, err := g.Run(ctx, nil, "verify-pack", idx); err != nil {
					t.Fatalf("verify-pack %s: %v", filepath.Base(pack), err)
				}
				theirs := filepath.Join(t.TempDir(), "git.idx")
				if _, err := g.Run(ctx, nil, "index-pack", "-o", theirs, pack); err != nil {
					t.Fatal(err)
				}
				ours, _ := os.ReadFile(idx)
				gits, _ := os.ReadFile(theirs)
				if !bytes.Equal(ours, gits) {
					t.Errorf("%s: the index differs from the one git builds from the pack", filepath.Base(pack))
				}
			}
			for i, id := range ids {
				got, err := g.Run(ctx, nil, "cat-file", "blob", id)
				if err != nil || !bytes.Equal(got, blobs[i]) {
					t.Errorf("blob %d read back: %d bytes, %v; want %d bytes", i, len(got), err, len(blobs[i]))
				}
			}
			if _, _, err := db.Read(f.Hash("blob", large)); !errors.Is(err, gitobj.ErrNotFound) {
				t.Errorf("the large blob is loose (%v): want it packed", err)
			}
			if _, err := g.Run(ctx, nil, "update-ref", "refs/heads/main", cid); err != nil {
				t.Fatal(err)
			}
			if out, err := g.Run(ctx, nil, "fsck", "--full", "--strict", "--no-dangling"); err != nil || len(out) > 0 {
				t.Errorf("fsck: %v\n%s", err, out)
			}
			if out, err := g.Run(ctx, nil, "count-objects", "-v"); err != nil || !strings.Contains(string(out), "count: 0\n") {
				t.Errorf("loose objects left: %v\n%s", err, out)
			}
			for _, e := range mustReadDir(t, filepath.Join(gitDir, "objects", "pack")) {
				if strings.HasPrefix(e, "tmp_") {
					t.Errorf("temporary file left: %s", e)
				}
			}
		})
	}
}
