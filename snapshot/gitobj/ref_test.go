//go:build unix

package gitobj

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReadRefAsAnAttackerLeavesIt: a Hankweave store lies in a folder its
// user controls. A loose ref that is a FIFO, a link or huge is refused at
// once (the caller lets git answer); a folder of refs is no ref; a plain
// ref and a packed one are read.
func TestReadRefAsAnAttackerLeavesIt(t *testing.T) {
	dir := t.TempDir()
	sha := strings.Repeat("ab", 20)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "refs", "heads", "folder"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "refs", "heads", "plain"), []byte(sha+"\n"), 0o644))
	must(syscall.Mkfifo(filepath.Join(dir, "refs", "heads", "fifo"), 0o644))
	secret := filepath.Join(t.TempDir(), "secret")
	must(os.WriteFile(secret, []byte(strings.Repeat("cd", 20)+"\n"), 0o644))
	must(os.Symlink(secret, filepath.Join(dir, "refs", "heads", "link")))
	must(os.WriteFile(filepath.Join(dir, "refs", "heads", "huge"), []byte(strings.Repeat("a", 1<<20)), 0o644))
	must(os.WriteFile(filepath.Join(dir, "packed-refs"), []byte("# pack-refs with: peeled\n"+sha+" refs/heads/packed\n"), 0o644))

	for ref, want := range map[string]string{"refs/heads/plain": "ok", "refs/heads/packed": "ok", "refs/heads/folder": "none",
		"refs/heads/missing": "none", "refs/heads/fifo": "error", "refs/heads/link": "error", "refs/heads/huge": "error"} {
		done := make(chan string, 1)
		go func() {
			id, ok, err := ReadRef(dir, ref)
			switch {
			case err != nil:
				done <- "error"
			case ok && id == sha:
				done <- "ok"
			case ok:
				done <- "wrong " + id
			default:
				done <- "none"
			}
		}()
		select {
		case got := <-done:
			if got != want {
				t.Errorf("%s: %s, want %s", ref, got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: ReadRef waited on the file", ref)
		}
	}
}
