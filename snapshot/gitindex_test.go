package snapshot

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/snapshot/gitobj"
)

// TestReadGitIndexMatchesGit: the entries read from an index git wrote are
// git's own (`git ls-files --stage`), in git's order; an index whose
// entries are out of order (the walk's folder lookups count on the order)
// is refused, as is one with a bad checksum.
func TestReadGitIndexMatchesGit(t *testing.T) {
	dir := t.TempDir()
	git := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	git("init", "-q")
	names := []string{"a1", "b1", "a-b/x", "a/b/c", "a/b-c", "a.b", strings.Repeat("n", 200) + "/" + strings.Repeat("m", 200) + "/f", "sp ace/é"}
	for i, n := range names {
		p := filepath.Join(dir, n)
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte(fmt.Sprint(i)), 0o644))
	}
	must(t, os.Chmod(filepath.Join(dir, "a.b"), 0o755))
	git("add", "-A")
	idx := filepath.Join(dir, ".git", "index")
	got, err := readGitIndex(idx, gitobj.SHA1)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, e := range got {
		lines = append(lines, fmt.Sprintf("%o %s 0\t%s", e.mode, e.id, e.path))
	}
	want := strings.TrimSpace(git("-c", "core.quotePath=false", "ls-files", "--stage"))
	if g := strings.Join(lines, "\n"); g != want {
		t.Fatalf("read:\n%s\ngit:\n%s", g, want)
	}

	// a1 and b1 swapped in place, the checksum made right again.
	data, err := os.ReadFile(idx)
	if err != nil {
		t.Fatal(err)
	}
	body := bytes.Clone(data[:len(data)-20])
	i, j := bytes.Index(body, []byte("a1\x00")), bytes.Index(body, []byte("b1\x00"))
	if i < 0 || j < 0 {
		t.Fatal("names not found in the index")
	}
	body[i], body[j] = 'b', 'a'
	h := indexHash(gitobj.SHA1)
	h.Write(body)
	swapped := filepath.Join(dir, "swapped")
	must(t, os.WriteFile(swapped, append(body, h.Sum(nil)...), 0o644))
	if _, err := readGitIndex(swapped, gitobj.SHA1); err != errIndexFormat {
		t.Fatalf("out of order: %v, want errIndexFormat", err)
	}
	data[len(data)-1] ^= 1
	must(t, os.WriteFile(swapped, data, 0o644))
	if _, err := readGitIndex(swapped, gitobj.SHA1); err != errIndexFormat {
		t.Fatalf("bad checksum: %v, want errIndexFormat", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

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

// TestLoadIndexBoundToItsFile: the engine keeps its parse of cairn's index
// only for the file it parsed: the same file gives the same entries without
// a read; one rewritten (in place at the same size, or replaced), its
// checksum no longer the one parsed, or its bytes damaged is read again
// (and refused when damaged); an index without a checksum is never kept.
func TestLoadIndexBoundToItsFile(t *testing.T) {
	dir := t.TempDir()
	idx := filepath.Join(dir, "index")
	entries := []idxEntry{
		{path: "a", mode: 0o100644, id: strings.Repeat("1", 40), size: 1, mtimeS: 5},
		{path: "b/c", mode: 0o100755, id: strings.Repeat("2", 40), size: 2, mtimeS: 6},
	}
	must(t, writeGitIndex(idx, gitobj.SHA1, entries))
	e := &inproc{format: gitobj.SHA1}
	load := func() []idxEntry {
		t.Helper()
		got, _, err := e.loadIndex(idx)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	first := load()
	if fmt.Sprint(first) != fmt.Sprint(entries) {
		t.Fatalf("loaded %v, want %v", first, entries)
	}
	if again := load(); &again[0] != &first[0] {
		t.Fatal("the same file was parsed again")
	}

	// Rewritten in place, the same size: another parse.
	entries[0].mtimeS = 7
	var buf bytes.Buffer
	must(t, writeGitIndex(filepath.Join(dir, "other"), gitobj.SHA1, entries))
	data, err := os.ReadFile(filepath.Join(dir, "other"))
	must(t, err)
	buf.Write(data)
	fh, err := os.OpenFile(idx, os.O_WRONLY, 0)
	must(t, err)
	_, err = fh.WriteAt(buf.Bytes(), 0)
	must(t, err)
	must(t, fh.Close())
	if got := load(); got[0].mtimeS != 7 {
		t.Fatalf("rewritten in place, still read as %v", got)
	}

	// The checksum kept is not the file's: another parse.
	kept := load()
	e.index.sum = strings.Repeat("x", 20)
	if got := load(); &got[0] == &kept[0] {
		t.Fatal("a checksum that differs kept the parse")
	}

	// Damaged in place: refused, not served from the parse.
	data[40] ^= 0xff
	must(t, os.WriteFile(idx, data, 0o644))
	if _, _, err := e.loadIndex(idx); err != errIndexFormat {
		t.Fatalf("a damaged index: %v, want errIndexFormat", err)
	}

	// No checksum (git's index.skipHash): read every time.
	data[40] ^= 0xff
	copy(data[len(data)-20:], make([]byte, 20))
	must(t, os.WriteFile(idx, data, 0o644))
	a, b := load(), load()
	if &a[0] == &b[0] || e.index != nil {
		t.Fatal("an index with no checksum was kept")
	}
}
