package sealbench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cairn-dev/cairn/snapshot"
)

// seedBatch is how many paths the runtime passes to one `git add`.
const seedBatch = 100

// gitEnv is what every reference store shares: the git found on PATH and a
// HOME holding the identity commits need.
type gitEnv struct {
	path    string
	version snapshot.Version
	home    string
}

// newGitEnv writes a .gitconfig into home. gc.auto=0 matches what cairn sets
// on its own store, so no reference pays for an automatic gc cairn never
// runs; everything else is git's default.
func newGitEnv(ctx context.Context, home string) (*gitEnv, error) {
	p, v, err := snapshot.FindGit(ctx)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(home, 0o755); err != nil {
		return nil, err
	}
	cfg := "[user]\n\tname = sealbench\n\temail = sealbench@cairn.invalid\n" +
		"[gc]\n\tauto = 0\n[maintenance]\n\tauto = false\n[commit]\n\tgpgsign = false\n"
	if err := os.WriteFile(filepath.Join(home, ".gitconfig"), []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	return &gitEnv{path: p, version: v, home: home}, nil
}

// refStore is one reference pipeline's own store over the shared work tree.
type refStore struct {
	git    *snapshot.Git
	parent string // the tip of main, as the pipeline last left it
}

// initStore makes an empty store at gitDir for workTree. index is the
// GIT_INDEX_FILE to use, or "" for the store's shared index.
func (e *gitEnv) initStore(ctx context.Context, gitDir, workTree, index string) (*refStore, error) {
	g := snapshot.NewGit(e.path, e.version, gitDir, e.home)
	if _, err := g.Run(ctx, nil, "init", "-q", "--initial-branch=main"); err != nil {
		return nil, err
	}
	g.WorkTree = workTree
	g.Index = index
	return &refStore{git: g}, nil
}

// newRefStore is initStore plus a first commit of the whole tree, so the
// pipeline starts where an incremental checkpoint would. Done outside any
// timed region.
func (e *gitEnv) newRefStore(ctx context.Context, gitDir, workTree, index string) (*refStore, error) {
	s, err := e.initStore(ctx, gitDir, workTree, index)
	if err != nil {
		return nil, err
	}
	if err := s.addAll(ctx); err != nil {
		return nil, err
	}
	s.parent, err = s.out(ctx, nil, "rev-parse", "--verify", "refs/heads/main")
	return s, err
}

// out runs git and returns its output without the trailing newline.
func (s *refStore) out(ctx context.Context, stdin []byte, args ...string) (string, error) {
	var in io.Reader // a nil *bytes.Reader would not be a nil io.Reader
	if stdin != nil {
		in = bytes.NewReader(stdin)
	}
	b, err := s.git.Run(ctx, in, args...)
	return strings.TrimSpace(string(b)), err
}

// addAll is the first-seal reference: one `git add -A` and one commit of the
// whole tree (no -f, so .gitignore leaves out what cairn's resolver does).
func (s *refStore) addAll(ctx context.Context) error {
	if _, err := s.out(ctx, nil, "add", "-A"); err != nil {
		return err
	}
	_, err := s.out(ctx, nil, "commit", "-q", "--allow-empty", "-m", "sealbench: first checkpoint")
	return err
}

// addBatches runs `git add -f` over files, seedBatch literal pathspecs per
// process, as the runtime does: each process reads the whole index and matches
// every entry against every pathspec, which is why this is quadratic.
func (s *refStore) addBatches(ctx context.Context, files []string) error {
	args := make([]string, 0, seedBatch+3)
	for i := 0; i < len(files); i += seedBatch {
		args = append(args[:0], "add", "-f", "--")
		for _, p := range files[i:min(i+seedBatch, len(files))] {
			args = append(args, ":(literal)"+p)
		}
		if _, err := s.out(ctx, nil, args...); err != nil {
			return err
		}
	}
	return nil
}

// seedA is the runtime's pipeline: reset the shared index to HEAD, add every
// resolved file in batches, commit. files is the resolved list; resolving is
// not charged to it.
func (s *refStore) seedA(ctx context.Context, files []string) error {
	if _, err := s.out(ctx, nil, "reset", "-q", "--mixed"); err != nil {
		return err
	}
	if err := s.addBatches(ctx, files); err != nil {
		return err
	}
	_, err := s.out(ctx, nil, "commit", "-q", "--allow-empty", "-m", "sealbench: seed pipeline (a)")
	return err
}

// seedB is the runtime's newer pipeline: a fresh private index read from the
// parent (so git's stat cache is lost and every file is hashed again), add
// every resolved file in batches, then plumbing to commit.
func (s *refStore) seedB(ctx context.Context, files []string) error {
	if err := os.Remove(s.git.Index); err != nil && !os.IsNotExist(err) {
		return err
	}
	parent, err := s.out(ctx, nil, "rev-parse", "--verify", "refs/heads/main")
	if err != nil {
		return err
	}
	if _, err := s.out(ctx, nil, "read-tree", parent); err != nil {
		return err
	}
	if err := s.addBatches(ctx, files); err != nil {
		return err
	}
	return s.commitIndex(ctx, parent, "sealbench: seed pipeline (b)")
}

// floor is the least git can do for an incremental checkpoint: stage exactly
// the changed paths in a persistent private index (its stat cache intact),
// then write-tree, commit-tree and a compare-and-swap update-ref.
func (s *refStore) floor(ctx context.Context, changed []string) error {
	var in bytes.Buffer
	for _, p := range changed {
		in.WriteString(p)
		in.WriteByte(0)
	}
	if _, err := s.out(ctx, in.Bytes(), "update-index", "--add", "--remove", "-z", "--stdin"); err != nil {
		return err
	}
	return s.commitIndex(ctx, s.parent, "sealbench: floor")
}

func (s *refStore) commitIndex(ctx context.Context, parent, msg string) error {
	tree, err := s.out(ctx, nil, "write-tree")
	if err != nil {
		return err
	}
	commit, err := s.out(ctx, nil, "commit-tree", tree, "-p", parent, "-m", msg)
	if err != nil {
		return err
	}
	if _, err := s.out(ctx, nil, "update-ref", "refs/heads/main", commit, parent); err != nil {
		return err
	}
	s.parent = commit
	return nil
}

// status is `git status` over the whole tree, untracked files listed one by
// one. It returns the porcelain output so the caller can check the store was
// really at the tree's state (empty output).
func (s *refStore) status(ctx context.Context) (string, error) {
	return s.out(ctx, nil, "status", "--porcelain", "-z", "--untracked-files=all")
}

// treeOf returns the tree a commit-ish points to.
func (s *refStore) treeOf(ctx context.Context, rev string) (string, error) {
	t, err := s.out(ctx, nil, "rev-parse", "--verify", rev+"^{tree}")
	if err != nil {
		return "", fmt.Errorf("sealbench: tree of %s: %w", rev, err)
	}
	return t, nil
}

// lsTree lists a tree recursively: path → mode, type and object name.
func lsTree(ctx context.Context, g *snapshot.Git, rev string) (map[string]string, error) {
	out, err := g.Run(ctx, nil, "ls-tree", "-r", "-z", "--full-tree", rev)
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, e := range strings.Split(string(out), "\x00") {
		if meta, p, ok := strings.Cut(e, "\t"); ok {
			m[p] = meta
		}
	}
	return m, nil
}

// treeDiff names the first few paths where got differs from want.
func treeDiff(got, want map[string]string) string {
	var d []string
	for p, m := range want {
		if g, ok := got[p]; !ok {
			d = append(d, "missing "+p)
		} else if g != m {
			d = append(d, "differs "+p)
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			d = append(d, "extra "+p)
		}
	}
	slices.Sort(d)
	if n := len(d); n > 5 {
		d = append(d[:5], fmt.Sprintf("and %d more", n-5))
	}
	return strings.Join(d, ", ")
}
