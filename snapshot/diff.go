package snapshot

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// maxPatch caps the patch a Diff returns.
const maxPatch = 8 << 20

// Diff compares two checkpoints: a and b are commits of the store (full SHAs
// or anything git resolves to a commit). An empty a is the empty tree; an
// empty b is the work tree as it is now (every visible file, through a copy
// of the index: nothing is sealed, no ref moves). It returns git's diffstat
// and, when patch is set, the patch (cut at 8 MiB).
func (s *Store) Diff(ctx context.Context, a, b string, patch bool) (stat, body string, err error) {
	res, err := s.DiffWith(ctx, a, b, DiffOptions{Patch: patch})
	return res.Stat, res.Patch, err
}

// DiffOptions narrow and extend a Diff.
type DiffOptions struct {
	Patch bool     // the patch too (binary files are named, never dumped)
	Files bool     // each file changed, with its status
	Paths []string // only these files (literal, slash-separated paths)
	// NamesOnly (with Files) lists the files and how each changed without
	// their line counts, and leaves Stat empty: neither reads a blob, so a
	// checkpoint of 100,000 files is listed in the time git diffs its trees.
	NamesOnly bool
}

// DiffResult is what DiffWith found.
type DiffResult struct {
	// TreeA and TreeB are the trees compared (the work tree's as staged):
	// a second DiffWith of them (line counts for some paths) compares the same.
	TreeA, TreeB string
	Stat         string
	Patch        string
	Files        []ckpt.FileChange
}

// DiffWith is Diff with options: the files changed, and only some paths.
// Two checkpoints are compared without the store's lock (their objects are
// reachable: nothing a locked step does removes them), so a diff or a show
// never waits for maintenance; the work tree side takes the lock for the
// copy of cairn's index it stages.
func (s *Store) DiffWith(ctx context.Context, a, b string, o DiffOptions) (DiffResult, error) {
	var res DiffResult
	treeOf := func(c string) (string, error) {
		if c == "" {
			return emptyTreeOf(s), nil
		}
		t, ok := s.resolve(ctx, c+"^{tree}")
		if !ok {
			return "", fmt.Errorf("unknown checkpoint: %s", c)
		}
		return t, nil
	}
	ta, err := treeOf(a)
	if err != nil {
		return res, err
	}
	if b != "" {
		tb, err := treeOf(b)
		if err != nil {
			return res, err
		}
		return s.diffTrees(ctx, ta, tb, o)
	}
	err = s.withLock(ctx, func() error {
		tb, err := s.dryTree(ctx, ta, nil)
		if err != nil {
			return err
		}
		res, err = s.diffTrees(ctx, ta, tb, o)
		return err
	})
	return res, err
}

// diffTrees compares two trees as DiffWith says.
func (s *Store) diffTrees(ctx context.Context, ta, tb string, o DiffOptions) (DiffResult, error) {
	var res DiffResult
	err := func() error {
		var spec []string
		if len(o.Paths) > 0 {
			spec = append(spec, "--")
			for _, p := range o.Paths {
				spec = append(spec, ":(literal)"+p)
			}
		}
		run := func(args ...string) ([]byte, error) {
			return s.git.Run(ctx, nil, append(append(args, ta, tb), spec...)...)
		}
		res.TreeA, res.TreeB = ta, tb
		if !o.NamesOnly {
			out, err := run("diff-tree", "-r", "--stat=200", "--no-renames", "--no-color")
			if err != nil {
				return err
			}
			res.Stat = string(out)
		}
		if o.Files {
			status, err := run("diff-tree", "-r", "-z", "--no-renames", "--name-status")
			if err != nil {
				return err
			}
			var counts []byte
			if !o.NamesOnly {
				if counts, err = run("diff-tree", "-r", "-z", "--no-renames", "--numstat"); err != nil {
					return err
				}
			}
			res.Files = fileChanges(status, counts)
		}
		if o.Patch {
			var w strings.Builder
			lw := &limitedWriter{w: &w, n: maxPatch}
			args := append([]string{"diff-tree", "-r", "-p", "--no-renames", "--no-color", "--no-ext-diff", ta, tb}, spec...)
			if err := s.git.RunTo(ctx, lw, nil, args...); err != nil {
				return err
			}
			res.Patch = w.String()
		}
		return nil
	}()
	return res, err
}

// fileChanges reads `diff-tree -z --name-status` and `-z --numstat`: a
// file git counts as "-\t-" lines is binary.
func fileChanges(status, counts []byte) []ckpt.FileChange {
	type count struct {
		added, removed int
		binary         bool
	}
	byPath := map[string]count{}
	for _, f := range strings.Split(strings.TrimSuffix(string(counts), "\x00"), "\x00") {
		n := strings.SplitN(f, "\t", 3)
		if len(n) != 3 {
			continue
		}
		var c count
		if n[0] == "-" && n[1] == "-" {
			c.binary = true
		} else {
			c.added, _ = strconv.Atoi(n[0])
			c.removed, _ = strconv.Atoi(n[1])
		}
		byPath[n[2]] = c
	}
	var out []ckpt.FileChange
	f := strings.Split(strings.TrimSuffix(string(status), "\x00"), "\x00")
	for i := 0; i+1 < len(f); i += 2 {
		fc := ckpt.FileChange{Path: f[i+1], Status: ckpt.FileChanged}
		switch f[i] {
		case "A":
			fc.Status = ckpt.FileAdded
		case "D":
			fc.Status = ckpt.FileRemoved
		}
		c := byPath[fc.Path]
		fc.Binary, fc.Added, fc.Removed = c.binary, c.added, c.removed
		out = append(out, fc)
	}
	return out
}

// emptyTreeOf is the empty tree in the store's object format.
func emptyTreeOf(s *Store) string {
	if out, err := s.git.Run(context.Background(), strings.NewReader(""), "hash-object", "-t", "tree", "--stdin"); err == nil {
		return strings.TrimSpace(string(out))
	}
	return "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
}
