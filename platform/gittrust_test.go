//go:build unix

package platform

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckGitTrusted: each way someone else could change a repository (a
// writable .git, config, hook, info file or objects; a folder above it; a
// link inside it) is named with its fix; links and sticky folders above it
// are allowed where no one else can move them.
func TestCheckGitTrusted(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	uid := uint32(os.Geteuid())
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	repo := func(t *testing.T) string {
		dir, err := os.MkdirTemp(base, "repo")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("git", "init", "-q", dir)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1"}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git init: %v: %s", err, out)
		}
		if err := os.WriteFile(filepath.Join(dir, ".git/hooks/post-commit"), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	check := func(dir string) error { return CheckGitTrusted(uid, filepath.Join(dir, ".git"), dir) }
	t.Run("private", func(t *testing.T) {
		if err := check(repo(t)); err != nil {
			t.Fatal(err)
		}
	})
	for _, rel := range []string{"", ".git", ".git/config", ".git/hooks", ".git/hooks/post-commit", ".git/info",
		".git/info/exclude", ".git/objects", ".git/objects/info"} {
		name := rel
		if name == "" {
			name = "work tree"
		}
		t.Run("group-writable "+name, func(t *testing.T) {
			dir := repo(t)
			p := filepath.Join(dir, rel)
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(p, fi.Mode().Perm()|0o020); err != nil {
				t.Fatal(err)
			}
			var ue *UntrustedError
			err = check(dir)
			if !errors.As(err, &ue) || ue.Path != p || !strings.Contains(err.Error(), "is group-writable") ||
				!strings.HasSuffix(err.Error(), "fix: chmod g-w "+p) {
				t.Fatalf("%v", err)
			}
		})
	}
	t.Run("writable by everyone above it", func(t *testing.T) {
		dir := repo(t)
		if err := os.Chmod(base, 0o777); err != nil {
			t.Fatal(err)
		}
		defer os.Chmod(base, 0o755)
		if err := check(dir); err == nil || !strings.Contains(err.Error(), base+" is writable by everyone") {
			t.Fatalf("%v", err)
		}
		// Sticky (as /tmp): others cannot move what is not theirs.
		if err := os.Chmod(base, 0o777|os.ModeSticky); err != nil {
			t.Fatal(err)
		}
		if err := check(dir); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a link inside", func(t *testing.T) {
		dir := repo(t)
		hook := filepath.Join(dir, ".git/hooks/pre-push")
		if err := os.Symlink("/bin/true", hook); err != nil {
			t.Fatal(err)
		}
		if err := check(dir); err == nil || !strings.Contains(err.Error(), hook+" is a symbolic link") {
			t.Fatalf("%v", err)
		}
	})
	t.Run("a link above, in a folder that passes", func(t *testing.T) {
		dir := repo(t)
		link := filepath.Join(base, "link")
		if err := os.Symlink(filepath.Base(dir), link); err != nil {
			t.Fatal(err)
		}
		if err := check(link); err != nil {
			t.Fatal(err)
		}
		// The link's target is checked as the repository.
		if err := os.Chmod(dir, 0o775); err != nil {
			t.Fatal(err)
		}
		if err := check(link); err == nil || !strings.Contains(err.Error(), dir+" is group-writable") {
			t.Fatalf("%v", err)
		}
	})
	t.Run("another owner", func(t *testing.T) {
		if uid != 0 {
			t.Skip("needs root to give a file away")
		}
		dir := repo(t)
		p := filepath.Join(dir, ".git/config")
		if err := os.Lchown(p, 12345, 12345); err != nil {
			t.Fatal(err)
		}
		if err := check(dir); err == nil || !strings.Contains(err.Error(), p+" belongs to uid 12345") ||
			!strings.Contains(err.Error(), "fix: chown root "+p) {
			t.Fatalf("%v", err)
		}
	})
	t.Run("another's link in a sticky folder above", func(t *testing.T) {
		if uid != 0 {
			t.Skip("needs root to give a link away")
		}
		dir := repo(t)
		sticky, err := os.MkdirTemp(base, "sticky")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(sticky, 0o777|os.ModeSticky); err != nil {
			t.Fatal(err)
		}
		link := filepath.Join(sticky, "link")
		if err := os.Symlink(dir, link); err != nil {
			t.Fatal(err)
		}
		if err := check(link); err != nil {
			t.Fatalf("root's link: %v", err)
		}
		if err := os.Lchown(link, 12345, 12345); err != nil {
			t.Fatal(err)
		}
		if err := check(link); err == nil || !strings.Contains(err.Error(), link+" is a symbolic link of uid 12345") {
			t.Fatalf("%v", err)
		}
	})
	t.Run("missing, in a folder that passes", func(t *testing.T) {
		if err := CheckGitTrusted(uid, filepath.Join(base, "none.git"), ""); err != nil {
			t.Fatal(err)
		}
	})
}
