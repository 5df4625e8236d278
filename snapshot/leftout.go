package snapshot

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// LeftOut are the folders of the work tree a seal and a restore never
// enter: the foreign-writable folders of a workspace served as root
// (README, "Security"). Nothing at or under them is read, staged, written,
// deleted or checked out; git is told to leave them out of its walks
// (ls-files -x, which never opens an excluded folder) and every path list
// cairn hands git is filtered first. Entries an earlier checkpoint holds
// under them leave the next checkpoint.
type LeftOut struct {
	// Dirs are slash-separated and relative to the work tree; "." leaves
	// out the whole work tree (every seal and restore is then refused).
	Dirs []string
	// Foreign, when set, is asked about each folder a seal's own walk meets
	// (lstat, no link followed): true leaves it out too, so a folder made
	// since the last check is never entered either.
	Foreign func(fi fs.FileInfo) bool
}

// ErrWorkTreeForeign refuses a seal or restore whose whole work tree is left out.
var ErrWorkTreeForeign = errors.New("the work tree is writable by someone other than its owner: nothing in it is sealed or restored as root")

// SetLeftOut sets the folders seals and restores leave out from now on (nil: none).
func (s *Store) SetLeftOut(lo *LeftOut) {
	if lo != nil {
		lo = &LeftOut{Dirs: slices.Clone(lo.Dirs), Foreign: lo.Foreign}
		slices.Sort(lo.Dirs)
	}
	s.leftOut.Store(lo)
}

// left is the store's LeftOut now (never nil).
func (s *Store) left() *LeftOut {
	if lo := s.leftOut.Load(); lo != nil {
		return lo
	}
	return &LeftOut{}
}

// any reports whether something is left out.
func (lo *LeftOut) any() bool { return len(lo.Dirs) > 0 }

// whole reports whether the whole work tree is left out.
func (lo *LeftOut) whole() bool { return slices.Contains(lo.Dirs, ".") }

// covers reports whether the work-tree path rel is at or under a left-out folder.
func (lo *LeftOut) covers(rel string) bool {
	for _, d := range lo.Dirs {
		if d == "." || rel == d || strings.HasPrefix(rel, d+"/") {
			return true
		}
	}
	return false
}

// walkSkips reports whether a seal's walk must not enter the folder rel.
func (lo *LeftOut) walkSkips(rel string, fi fs.FileInfo) bool {
	return lo.covers(rel) || (lo.Foreign != nil && fi != nil && lo.Foreign(fi))
}

// excludeArgs are ls-files options that leave the folders out of git's walk:
// with -o and --exclude-standard but without --directory, git does not open
// an excluded folder (checked with strace; see the test of left-out folders).
func (lo *LeftOut) excludeArgs() []string {
	var out []string
	for _, d := range lo.Dirs {
		out = append(out, "-x", "/"+escapeExclude(d)+"/")
	}
	return out
}

// escapeExclude makes a path an exclude pattern matching only itself: glob
// characters and a leading '!' or '#' are escaped; a character no pattern
// can hold (a newline) becomes '?', which matches a little more, never less.
func escapeExclude(p string) string {
	var b strings.Builder
	for i, r := range p {
		switch {
		case r == '\n' || r == '\r':
			b.WriteByte('?')
			continue
		case strings.ContainsRune(`*?[]\`, r), (r == '!' || r == '#') && (i == 0 || p[i-1] == '/'), r == ' ':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// filter splits paths into the ones outside the left-out folders and the ones in them.
func (lo *LeftOut) filter(paths []string) (keep, out []string) {
	if !lo.any() {
		return paths, nil
	}
	for _, p := range paths {
		if lo.covers(p) {
			out = append(out, p)
		} else {
			keep = append(keep, p)
		}
	}
	return keep, out
}

// leftOutIssues names paths a restore left alone because they are in a left-out folder.
func leftOutIssues(paths []string) []ckpt.PathIssue {
	out := make([]ckpt.PathIssue, 0, len(paths))
	for _, p := range paths {
		out = append(out, ckpt.PathIssue{Path: p, Reason: "in a folder others can write: left alone (README, \"Security\")"})
	}
	return out
}

// indexUnder lists the entries of g's index under the left-out folders. It
// reads the index alone: ls-files without -o, -m or -d stats nothing.
func (s *Store) indexUnder(ctx context.Context, g *Git, lo *LeftOut) ([]string, error) {
	args := append([]string{"ls-files", "-z", "-c", "-i"}, lo.excludeArgs()...)
	out, err := g.Run(ctx, nil, args...)
	if err != nil {
		return nil, err
	}
	return splitNul(out), nil
}

// dropLeftOut takes the entries under the left-out folders out of g's index
// (--force-remove reads nothing on disk), so no later git call of the seal
// or the restore stats, reads or writes them.
func (s *Store) dropLeftOut(ctx context.Context, g *Git, lo *LeftOut) error {
	if !lo.any() {
		return nil
	}
	under, err := s.indexUnder(ctx, g, lo)
	if err != nil || len(under) == 0 {
		return err
	}
	_, _, err = g.runMapped(ctx, nulBytes(under), "update-index", "-z", "--force-remove", "--stdin")
	return err
}

// withoutLeftOut is a commit whose tree is target's minus the left-out
// folders (parent target), built in a private index: a whole restore checks
// it out, so checkout neither writes nor deletes anything in them.
func (s *Store) withoutLeftOut(ctx context.Context, target string, lo *LeftOut) (string, error) {
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(filepath.Dir(s.git.Index), "index-leftout-"+hex.EncodeToString(rnd[:]))
	defer os.Remove(tmp)
	g := *s.git
	g.Index, g.ownIndex = tmp, true
	if _, _, err := g.runMapped(ctx, nil, "read-tree", target); err != nil {
		return "", err
	}
	if err := s.dropLeftOut(ctx, &g, lo); err != nil {
		return "", err
	}
	tree, _, err := g.runMapped(ctx, nil, "write-tree")
	if err != nil {
		return "", err
	}
	c, err := g.Run(ctx, strings.NewReader("restore target without the folders others can write\n"),
		"commit-tree", strings.TrimSpace(string(tree)), "-p", target, "-F", "-")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(c)), nil
}
