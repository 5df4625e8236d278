package snapshot

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cairn-dev/cairn/platform"
	"github.com/cairn-dev/cairn/restore/ckpt"
)

// Work-tree paths are resolved beneath the work tree with no symbolic link
// followed at any component (platform.Tree): a folder swapped for a link
// while cairn works, by the owner or by anyone who may write in it, makes
// that path an issue, never a path into the link's target (README.md,
// "Security"). Git's own reads and writes (update-index in the git engine,
// checkout in restores) are git's.

// useWorkTree opens the work tree for one operation (a seal, a restore, a
// verify), or shares the one open; the returned func lets it go (the last
// one out closes it). When it cannot be opened, each path asks again and
// gets the reason.
func (s *Store) useWorkTree() (release func()) {
	s.wtMu.Lock()
	defer s.wtMu.Unlock()
	if s.wt == nil {
		wt, err := platform.OpenTree(s.workTree)
		if err != nil {
			return func() {}
		}
		s.wt = wt
	}
	s.wtRefs++
	return s.releaseWorkTree
}

func (s *Store) releaseWorkTree() {
	s.wtMu.Lock()
	defer s.wtMu.Unlock()
	if s.wtRefs--; s.wtRefs == 0 {
		s.wt.Close()
		s.wt = nil
	}
}

// withWorkTree runs fn with the open work tree, or one opened for it.
func (s *Store) withWorkTree(fn func(*platform.Tree) error) error {
	s.wtMu.Lock()
	wt := s.wt
	if wt != nil {
		s.wtRefs++
	}
	s.wtMu.Unlock()
	if wt != nil {
		defer s.releaseWorkTree()
		return fn(wt)
	}
	wt, err := platform.OpenTree(s.workTree)
	if err != nil {
		return err
	}
	defer wt.Close()
	return fn(wt)
}

// lstatWork describes the work-tree path rel (slash-separated) without
// following it or any folder on its way.
func (s *Store) lstatWork(rel string) (fi fs.FileInfo, err error) {
	err = s.withWorkTree(func(t *platform.Tree) error {
		fi, err = t.Lstat(filepath.FromSlash(rel))
		return err
	})
	return fi, err
}

// openWork opens the work-tree file rel for reading: a regular file,
// resolved beneath the work tree, never through a link.
func (s *Store) openWork(rel string) (f *os.File, err error) {
	err = s.withWorkTree(func(t *platform.Tree) error {
		f, err = t.OpenRegular(filepath.FromSlash(rel))
		return err
	})
	return f, err
}

// removeWork removes the work-tree file rel from its folder resolved
// beneath the work tree.
func (s *Store) removeWork(rel string) error {
	return s.withWorkTree(func(t *platform.Tree) error { return t.Remove(filepath.FromSlash(rel)) })
}

// throughLinkReason is the issue recorded for a path that resolves through
// a symbolic link: skipped, never read.
const throughLinkReason = "resolves through a symbolic link (not followed); not read"

// walkWorkTree lists the files under a work-tree folder as a full
// reconcile sees them: each folder opened beneath the work tree, never
// following a link, leaving out excluded folders and files and the folders
// s.left() leaves out (never entered), naming the
// folders it could not read.
func (s *Store) walkWorkTree(rel string) (files []string, issues []ckpt.PathIssue) {
	err := s.withWorkTree(func(t *platform.Tree) error {
		fi, err := t.Lstat(filepath.FromSlash(rel))
		if err != nil {
			issues = append(issues, ckpt.PathIssue{Path: rel, Reason: err.Error()})
			return nil
		}
		if !fi.IsDir() {
			if !Excluded(rel) {
				files = append(files, rel)
			}
			return nil
		}
		lo := s.left()
		var walk func(dir string)
		walk = func(dir string) {
			if Excluded(dir) {
				return
			}
			if lo.any() || lo.Foreign != nil { // folders left out are never entered
				if fi, err := t.Lstat(filepath.FromSlash(dir)); err == nil && lo.walkSkips(dir, fi) {
					return
				}
			}
			ents, err := t.ReadDir(filepath.FromSlash(dir))
			if err != nil {
				issues = append(issues, ckpt.PathIssue{Path: dir, Reason: err.Error()})
			}
			slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
			for _, e := range ents {
				r := dir + "/" + e.Name()
				if dir == "." {
					r = e.Name()
				}
				if e.IsDir() {
					walk(r)
				} else if !Excluded(r) {
					files = append(files, r)
				}
			}
		}
		walk(rel)
		return nil
	})
	if err != nil {
		issues = append(issues, ckpt.PathIssue{Path: rel, Reason: err.Error()})
	}
	return files, issues
}
