//go:build unix

package platform

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestReplaceFileAndSymlink: a file or link made beneath the Tree replaces
// what is at its path (a file, a planted link: the link itself, never what
// it leads to; an empty folder), never goes through a link on the way, and
// leaves no temporary file behind when it fails.
func TestReplaceFileAndSymlink(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("outside\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(root, "f"), []byte("old\n"), 0o644))
	must(os.Symlink(secret, filepath.Join(root, "planted")))
	must(os.Mkdir(filepath.Join(root, "empty"), 0o755))
	must(os.MkdirAll(filepath.Join(root, "full", "x"), 0o755))
	must(os.Symlink(outside, filepath.Join(root, "linkdir")))
	tr, err := OpenTree(root)
	must(err)
	defer tr.Close()

	must(tr.ReplaceFile("f", []byte("new\n"), 0o777, ""))
	if fi, err := os.Lstat(filepath.Join(root, "f")); err != nil || fi.Mode()&0o100 == 0 {
		t.Errorf("f after ReplaceFile 0777: %v %v", fi, err)
	}
	must(tr.ReplaceFile("planted", []byte("mine\n"), 0o666, ""))
	if b, _ := os.ReadFile(secret); string(b) != "outside\n" {
		t.Errorf("written through a planted link: %q", b)
	}
	if fi, err := os.Lstat(filepath.Join(root, "planted")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("planted is not a file now: %v %v", fi, err)
	}
	must(tr.ReplaceSymlink("empty", "f", ""))
	if l, err := os.Readlink(filepath.Join(root, "empty")); err != nil || l != "f" {
		t.Errorf("empty folder not replaced by a link: %q %v", l, err)
	}
	if err := tr.ReplaceFile("full", []byte("x"), 0o666, ""); err == nil {
		t.Error("a folder holding files was replaced")
	}
	if err := tr.ReplaceFile("linkdir/secret", []byte("x"), 0o666, ""); !errors.Is(err, ErrThroughLink) {
		t.Errorf("through a linked folder: %v, want ErrThroughLink", err)
	}
	if b, _ := os.ReadFile(secret); string(b) != "outside\n" {
		t.Errorf("written through a linked folder: %q", b)
	}
	ents, err := os.ReadDir(root)
	must(err)
	for _, e := range ents {
		if len(e.Name()) > 7 && e.Name()[:7] == ".cairn-" {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
}

// TestRewrite: a file is rewritten in place (same inode, permission bits
// kept, shorter content truncated) only when that is as safe as replacing
// it; everything an attacker or an accident could stand at the path (a
// link, a FIFO, a second name for the file, a folder, a linked folder on the
// way) and every file the write could tear or widen (read-only, another
// mode, too large for its blocks, another owner's) is refused untouched,
// for ReplaceFile to handle.
func TestRewrite(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	secret := filepath.Join(outside, "secret")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(secret, []byte("outside\n"), 0o666))
	must(os.Chmod(secret, 0o666))
	write := func(name, body string, perm os.FileMode) {
		t.Helper()
		must(os.WriteFile(filepath.Join(root, name), []byte(body), perm))
		must(os.Chmod(filepath.Join(root, name), perm))
	}
	ino := func(name string) uint64 {
		t.Helper()
		var st unix.Stat_t
		must(unix.Lstat(filepath.Join(root, name), &st))
		return uint64(st.Ino)
	}
	read := func(p string) string {
		b, _ := os.ReadFile(p)
		return string(b)
	}
	blocks := func(name string) int64 { // the bytes its blocks hold
		t.Helper()
		var st unix.Stat_t
		must(unix.Lstat(filepath.Join(root, name), &st))
		return int64(st.Blocks) * 512
	}
	tr, err := OpenTree(root)
	must(err)
	defer tr.Close()

	// Rewritten: a longer and a shorter body, an executable, a private file.
	write("f", "0123456789\n", 0o644)
	was := ino("f")
	if !tr.Rewrite("f", []byte("short\n"), false) {
		t.Fatal("f not rewritten")
	}
	if got := read(filepath.Join(root, "f")); got != "short\n" || ino("f") != was {
		t.Errorf("f = %q (inode kept: %v)", got, ino("f") == was)
	}
	if !tr.Rewrite("f", []byte("a longer body than before\n"), false) || read(filepath.Join(root, "f")) != "a longer body than before\n" {
		t.Errorf("f = %q after a longer rewrite", read(filepath.Join(root, "f")))
	}
	write("x", "#!/bin/sh\n", 0o755)
	if !tr.Rewrite("x", []byte("#!/bin/sh\nexit 0\n"), true) {
		t.Error("x (executable, written as executable) not rewritten")
	}
	write("private", "key\n", 0o600)
	if !tr.Rewrite("private", []byte("other key\n"), false) {
		t.Error("private not rewritten")
	}
	if fi, err := os.Stat(filepath.Join(root, "private")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("private's mode after the rewrite: %v %v, want 0600 kept", fi, err)
	}

	// Refused, untouched.
	must(os.Symlink(secret, filepath.Join(root, "planted")))
	write("linked", "one file, two names\n", 0o644)
	must(os.Link(filepath.Join(root, "linked"), filepath.Join(root, "other-name")))
	must(unix.Mkfifo(filepath.Join(root, "fifo"), 0o666))
	must(os.Mkdir(filepath.Join(root, "dir"), 0o755))
	must(os.Symlink(outside, filepath.Join(root, "linkdir")))
	write("readonly", "keep\n", 0o444)
	write("notexec", "plain\n", 0o644)
	write("big", "tiny\n", 0o644)
	for _, c := range []struct {
		rel  string
		exec bool
		data string
	}{
		{"planted", false, "through a link\n"},
		{"linkdir/secret", false, "through a linked folder\n"},
		{"linked", false, "seen by the other name\n"},
		{"fifo", false, "into a FIFO\n"},
		{"dir", false, "over a folder\n"},
		{"readonly", false, "over a read-only file\n"},
		{"notexec", true, "plain\n"},
		{"big", false, strings.Repeat("x", int(blocks("big"))+1)},
		{"missing", false, "nothing there\n"},
	} {
		done := make(chan bool, 1)
		go func() { done <- tr.Rewrite(c.rel, []byte(c.data), c.exec) }()
		select {
		case ok := <-done:
			if ok {
				t.Errorf("%s: rewritten", c.rel)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: Rewrite blocked", c.rel)
		}
	}
	if read(secret) != "outside\n" {
		t.Errorf("the link's target was written: %q", read(secret))
	}
	if read(filepath.Join(root, "other-name")) != "one file, two names\n" {
		t.Errorf("a second name of the file changed: %q", read(filepath.Join(root, "other-name")))
	}
	for name, want := range map[string]string{"readonly": "keep\n", "notexec": "plain\n", "big": "tiny\n"} {
		if got := read(filepath.Join(root, name)); got != want {
			t.Errorf("%s = %q, want %q untouched", name, got, want)
		}
	}

	// Another user's file, writable by all: refused (root can make one).
	if os.Geteuid() == 0 {
		write("theirs", "theirs\n", 0o666)
		must(os.Chown(filepath.Join(root, "theirs"), 65534, 65534))
		if tr.Rewrite("theirs", []byte("mine\n"), false) || read(filepath.Join(root, "theirs")) != "theirs\n" {
			t.Error("another user's file was rewritten")
		}
	}
}
