//go:build linux

package agent_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestAutodevAsOwnerUnderRootDaemon: a root daemon commits an autodev
// workspace's checkpoints in its owner's worker: every file git or cairn
// writes in the repository belongs to the owner, none to root.
func TestAutodevAsOwnerUnderRootDaemon(t *testing.T) {
	u := newUser(t)
	dir := filepath.Join(openBase(t), "repo")
	ownedDir(t, u, dir, map[string]string{"a.txt": "one\n"})
	asGit := func(args ...string) string {
		t.Helper()
		cmd := asUser(u, "git", append([]string{"-C", dir, "-c", "user.name=User", "-c", "user.email=u@example.com", "-c", "init.defaultBranch=main"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v as %s: %v\n%s", args, u.name, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	asGit("init", "-q")
	asGit("add", "-A")
	asGit("commit", "-q", "-m", "user: first")
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(filepath.Join(dir, "a.txt"), u.uid, u.gid); err != nil {
		t.Fatal(err)
	}

	cfg := configFile(t, fmt.Sprintf("[[watch]]\npath = %q\nlayout = \"autodev\"\n", dir))
	d := startDaemon(t, openBase(t), "--config", cfg)
	waitFor(t, 30*time.Second, "the baseline", func() bool {
		ws, ok := d.workspace(dir)
		return ok && ws.Last == "c1"
	})
	// Root asks for a checkpoint over the socket: the worker makes it, as the owner.
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("three\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := cairnRun(t, "checkpoint", dir, "--label", "as root", "--socket", d.socket)
	if code != 0 {
		t.Fatalf("checkpoint (%d): %s%s", code, out, errOut)
	}
	if s := asGit("log", "--format=%s|%an", "-2"); s != "autodev: as root|autodev\nautodev: baseline before run|autodev" {
		t.Fatalf("commits: %q", s)
	}
	// Everything under .git and .autodev/ is the owner's (git ran as the owner).
	for _, top := range []string{".git", ".autodev"} {
		_ = filepath.WalkDir(filepath.Join(dir, top), func(p string, de fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			fi, err := os.Lstat(p)
			if err != nil {
				return nil
			}
			if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != u.uid {
				t.Errorf("%s belongs to uid %d, not the owner %d", p, st.Uid, u.uid)
			}
			return nil
		})
	}
	// The private index is in the owner's state, not in root's.
	matches, _ := filepath.Glob(filepath.Join(d.state, "users", fmt.Sprint(u.uid), "autodev", "repo-*", "index"))
	if len(matches) != 1 {
		t.Fatalf("cairn's own index is not in the owner's state: %v", matches)
	}
}
