package snapshot

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// A named pipe where git opens an ignore or attributes file without
// looking first (.gitignore, .gitattributes) blocks git for good: `git
// status` hangs there too. A seal, by either engine, told the pipe or
// reconciling the whole tree, ends failed, naming the pipe, long before its
// context would; the store is not harmed, and once the pipe is gone the next
// seal is ok. Before, the seal waited on git until its context ended (the
// daemon's never does).
func TestSealWithNamedPipeForIgnoreFileFails(t *testing.T) {
	t.Parallel()
	for _, eng := range []string{EngineInproc, EngineGit} {
		for _, where := range []string{".gitignore", "sub/.gitignore", "sub/.gitattributes", "held/sub/.gitattributes", "held/.gitignore"} {
			t.Run(eng+"/"+where, func(t *testing.T) {
				t.Parallel()
				// held/: another process holds the pipe open for writing
				// and sends nothing, so git's open goes through and its
				// read waits (git reads an attributes file; an ignore file
				// it finds empty by its size, and reads nothing).
				held := strings.HasPrefix(where, "held/")
				where = strings.TrimPrefix(where, "held/")
				dir, st := newTestStore(t, Options{Engine: eng})
				writeTree(t, dir, map[string]string{"f0": "zero\n", "sub/a.txt": "a\n"})
				mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
				pipe := filepath.Join(dir, filepath.FromSlash(where))
				if err := syscall.Mkfifo(pipe, 0o644); err != nil {
					t.Fatal(err)
				}
				if held {
					w, err := os.OpenFile(pipe, os.O_RDWR, 0) // never blocks on Linux
					if err != nil {
						t.Fatal(err)
					}
					defer w.Close()
				}
				writeFile(t, dir, "sub/a.txt", "b\n", 0o644)
				for _, changed := range [][]string{{where, "sub/a.txt"}, {"sub/a.txt"}, nil} {
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
					rec, err := st.Seal(ctx, SealRequest{Kind: ckpt.KindManual, Changed: changed})
					cancel()
					switch {
					case errors.Is(err, context.DeadlineExceeded):
						t.Fatalf("told %q: the seal waited on git until its context ended: %v", changed, err)
					case err == nil && rec.State != ckpt.StateFailed:
						// The in-process engine reads no attributes file: told
						// the pipe, it names it as no regular file. Nor does
						// git read an ignore file whose open went through.
						if !(strings.HasSuffix(where, ".gitattributes") && eng == EngineInproc) && !(held && strings.HasSuffix(where, ".gitignore")) {
							t.Fatalf("told %q: sealed %s by %s with a named pipe at %s", changed, rec.State, st.lastEngine, where)
						}
					case err == nil || !strings.Contains(err.Error(), "named pipe") || !strings.Contains(err.Error(), where):
						t.Fatalf("told %q: %v; want an error naming the pipe %s", changed, err, where)
					}
					// git killed while it held cairn's index lock: the lock,
					// provably dead, does not outlive it.
					if _, err := os.Lstat(st.git.Index + ".lock"); err == nil {
						t.Fatalf("told %q: cairn/index.lock left behind", changed)
					}
				}
				if err := os.Remove(pipe); err != nil {
					t.Fatal(err)
				}
				rec := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
				if rec.State != ckpt.StateOK {
					t.Fatalf("with the pipe gone: %s, %v", rec.State, rec.Issues)
				}
			})
		}
	}
}

// The watch judges only its own children: a process stuck opening a pipe
// that this one did not start (here one whose parent exited, as a reaped
// git's pid could be taken by) is left alone; a child stuck the same way is
// named, with the pipe.
func TestBlockedOnFIFOOnlyOwnChildren(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pipe := filepath.Join(dir, "p")
	if err := syscall.Mkfifo(pipe, 0o644); err != nil {
		t.Fatal(err)
	}
	// Both readers are let go at the end by a writer opening the pipe.
	defer func() {
		if f, err := os.OpenFile(pipe, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	}()
	out, err := exec.Command("sh", "-c", `cat "$1" </dev/null >/dev/null 2>&1 & echo $!`, "sh", pipe).Output()
	if err != nil {
		t.Fatal(err)
	}
	orphan, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	child := exec.Command("cat", pipe)
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Wait()
	defer child.Process.Kill()
	waitFIFOOpen := func(pid int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/wchan", pid))
			if strings.TrimSpace(string(b)) == "wait_for_partner" {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("pid %d not waiting in a pipe's open (wchan %q)", pid, b)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitFIFOOpen(orphan)
	waitFIFOOpen(child.Process.Pid)
	if why := blockedOnFIFO(orphan); why != "" {
		t.Errorf("another process's wait judged: %s", why)
	}
	if why := blockedOnFIFO(child.Process.Pid); !strings.Contains(why, pipe) {
		t.Errorf("the child's wait: %q, want the pipe %s named", why, pipe)
	}
}
