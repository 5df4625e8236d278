package snapshot

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/snapshot/gitobj"
)

// TestReadGitIndexAsGit: the entries read from an index git wrote (names
// long and short, nested) are what `git ls-files --stage` lists, and
// written back they read the same.
func TestReadGitIndexAsGit(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{"a": "a\n", "a.b": "ab\n", "z/y/x.txt": "x\n", strings.Repeat("long/", 300) + "x": "long\n"}
	for i := range 40 {
		files[fmt.Sprintf("d%d/f%d.go", i%5, i)] = fmt.Sprintf("package f%d\n", i)
	}
	for p, body := range files {
		abs := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(abs, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git := func(args ...string) string {
		out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).Output()
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		return string(out)
	}
	git("init", "-q")
	git("add", "-A")
	idx := filepath.Join(dir, ".git", "index")
	f, _ := gitobj.FormatByName("sha1")
	entries, err := readGitIndex(idx, f)
	if err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	for _, e := range entries {
		fmt.Fprintf(&got, "%o %s 0\t%s\n", e.mode, e.id, e.path)
	}
	if want := git("ls-files", "--stage"); got.String() != want {
		t.Fatalf("read:\n%s\ngit lists:\n%s", got.String(), want)
	}
	again := filepath.Join(t.TempDir(), "index")
	if err := writeGitIndex(again, f, entries); err != nil {
		t.Fatal(err)
	}
	back, err := readGitIndex(again, f)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(back) != fmt.Sprint(entries) {
		t.Fatal("written and read again, the entries differ")
	}
}
