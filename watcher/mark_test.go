package watcher

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/platform/testsupport"
)

// TestMarkComesAfterEarlierChanges: a mark, made in a folder outside the
// tree, is reported after every change made to the tree before it, in any
// of its folders. A reader that waits for its mark has then read every
// change made before (the daemon's barrier before a restore).
func TestMarkComesAfterEarlierChanges(t *testing.T) {
	checkNoLeaks(t)
	root, marks := t.TempDir(), filepath.Join(t.TempDir(), "marks")
	const dirs, files = 8, 25
	for d := range dirs {
		mkdirs(t, root, fmt.Sprintf("d%d/deep", d))
	}
	w, c := startWatcher(t, Options{Root: root, Marks: marks}, nil)
	for round := range 20 {
		var want []string
		for i := range files {
			rel := fmt.Sprintf("d%d/deep/r%d-%d", i%dirs, round, i)
			if round%2 == 1 {
				rel = fmt.Sprintf("d%d/r%d-%d", i%dirs, round, i)
			}
			writeFiles(t, root, rel)
			want = append(want, rel)
		}
		name, err := w.Mark()
		if err != nil {
			t.Fatal(err)
		}
		testsupport.WaitFor(t, waitTimeout, "the mark "+name, func() bool { return c.has(name, Mark) })
		var seen []string
		for _, ch := range c.changes() {
			if ch.Op.Has(Mark) && ch.Path == name {
				break
			}
			seen = append(seen, ch.Path)
		}
		for _, rel := range want {
			if !slices.Contains(seen, rel) {
				t.Fatalf("round %d: %s, written before the mark, was not reported before it", round, rel)
			}
		}
	}
	if ents, _ := os.ReadDir(marks); len(ents) != 0 {
		t.Errorf("marks left in their folder: %v", ents)
	}
}

// TestMarkFolder: without a marks folder, or with one inside the tree
// (even through a linked folder on its way) or that is a link, Mark fails (and Start does not); two Watchers may share a
// folder, each reporting only its own marks.
func TestMarkFolder(t *testing.T) {
	checkNoLeaks(t)
	root := t.TempDir()
	w, _ := startWatcher(t, Options{Root: root}, nil)
	if _, err := w.Mark(); err == nil {
		t.Error("Mark without a marks folder succeeded")
	}
	w, _ = startWatcher(t, Options{Root: root, Marks: filepath.Join(root, "marks")}, nil)
	if _, err := w.Mark(); err == nil || !strings.Contains(err.Error(), "inside the watched tree") {
		t.Errorf("Mark with its folder inside the tree: %v", err)
	}
	// Inside the tree through a linked folder on its way: refused too.
	toRoot := filepath.Join(t.TempDir(), "to-root")
	if err := os.Symlink(root, toRoot); err != nil {
		t.Fatal(err)
	}
	w, _ = startWatcher(t, Options{Root: root, Marks: filepath.Join(toRoot, "marks-via-link")}, nil)
	if _, err := w.Mark(); err == nil || !strings.Contains(err.Error(), "inside the watched tree") {
		t.Errorf("Mark with its folder inside the tree through a link: %v", err)
	}
	elsewhere := t.TempDir()
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(elsewhere, link); err != nil {
		t.Fatal(err)
	}
	w, _ = startWatcher(t, Options{Root: root, Marks: link}, nil)
	if _, err := w.Mark(); err == nil {
		t.Error("Mark through a linked folder succeeded")
	}

	shared := t.TempDir()
	a, ca := startWatcher(t, Options{Root: root, Marks: shared}, nil)
	b, cb := startWatcher(t, Options{Root: t.TempDir(), Marks: shared}, nil)
	na, err := a.Mark()
	if err != nil {
		t.Fatal(err)
	}
	nb, err := b.Mark()
	if err != nil {
		t.Fatal(err)
	}
	ca.waitFor(t, Mark, na)
	cb.waitFor(t, Mark, nb)
	if ca.has(nb, Mark) || cb.has(na, Mark) {
		t.Error("a Watcher reported another's mark")
	}
}

// TestMarkLeftByADeadProcessSwept: a mark whose maker was killed between
// making and removing it (its pid gone) is removed when a Watcher starts on
// the folder; a live process's mark (another Watcher's) and other files stay.
func TestMarkLeftByADeadProcessSwept(t *testing.T) {
	checkNoLeaks(t)
	root, marks := t.TempDir(), filepath.Join(t.TempDir(), "marks")
	if err := os.MkdirAll(marks, 0o700); err != nil {
		t.Fatal(err)
	}
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	dead := fmt.Sprintf("mark-%d-0a0b0c0d0e0f-1", gone.Process.Pid)
	live := fmt.Sprintf("mark-%d-0a0b0c0d0e0f-7", os.Getppid())
	for _, n := range []string{dead, live, "notes.txt", "mark-x-1"} {
		if err := os.WriteFile(filepath.Join(marks, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	w, _ := startWatcher(t, Options{Root: root, Marks: marks}, nil)
	if _, err := w.Mark(); err != nil {
		t.Fatal(err)
	}
	var left []string
	ents, _ := os.ReadDir(marks)
	for _, e := range ents {
		left = append(left, e.Name())
	}
	slices.Sort(left)
	want := []string{live, "mark-x-1", "notes.txt"}
	slices.Sort(want)
	if !slices.Equal(left, want) {
		t.Fatalf("left in the marks folder: %q, want %q", left, want)
	}
}
