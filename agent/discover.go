package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/cairn-dev/cairn/platform"
)

// discoverLimits bound one root's discovery.
type discoverLimits struct {
	MaxMatches  int  // matches beyond this are dropped and reported (default 1000)
	MaxDirs     int  // folders read beyond this stop the walk, reported (default 100000)
	CrossMounts bool // descend into other file systems (default false)
}

// found is one workspace folder: its path and its owner read from an open descriptor.
type found struct {
	Path     string
	UID, GID uint32
	Mode     os.FileMode
}

const (
	defaultMaxMatches = 1000
	defaultMaxDirs    = 100000
	// maxDiscoverDepth bounds the open descriptors (one per level) a walk holds.
	maxDiscoverDepth = 128
	// readDirBatch entries are read at a time so a huge folder still sees a cancel.
	readDirBatch = 256
)

// kernelTrees hold no workspaces, and walking them as root is slow (/proc
// changes every read) or has side effects; they are refused as a prefix and
// skipped by path even when mounts are crossed.
var kernelTrees = []string{"/proc", "/sys", "/dev"}

// errStopWalk ends a walk that hit a cap; the caller reports it as truncated.
var errStopWalk = errors.New("stop walk")

// discoverRoot lists the folders pattern names, never following a link.
//
// The static prefix of pattern is opened one component at a time without
// following links; everything below is read relative to open descriptors
// with O_NOFOLLOW, so a folder swapped for a link is skipped, not entered.
// A missing prefix is no match and no error. The walk stops at lim's caps
// (truncated then says which) and at ctx's cancel (the error is ctx.Err()).
func discoverRoot(ctx context.Context, pattern string, lim discoverLimits) (dirs []found, truncated string, err error) {
	prefix, segs, err := splitPattern(pattern)
	if err != nil {
		return nil, "", err
	}
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	if lim.MaxMatches <= 0 {
		lim.MaxMatches = defaultMaxMatches
	}
	if lim.MaxDirs <= 0 {
		lim.MaxDirs = defaultMaxDirs
	}
	root, err := platform.OpenDirNoFollow(prefix)
	if err != nil {
		switch {
		case errors.Is(err, platform.ErrLinkInPath):
			return nil, "", fmt.Errorf("watch root %s goes through a symbolic link: %w", pattern, err)
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
			return nil, "", nil // nothing there (yet)
		}
		return nil, "", fmt.Errorf("watch root %s: %w", pattern, err)
	}
	defer root.Close()
	uid, gid, mode, dev, err := platform.DirInfo(root)
	if err != nil {
		return nil, "", fmt.Errorf("watch root %s: %w", pattern, err)
	}
	if len(segs) == 0 { // a plain path names itself
		return []found{{Path: prefix, UID: uid, GID: gid, Mode: mode}}, "", nil
	}

	w := &walker{ctx: ctx, pattern: filepath.ToSlash(pattern), segs: segs, lim: lim, dev: dev}
	w.prune, w.bounded = pruneDepth(segs)
	// "/data/**" names /data itself, as doublestar does; "/" is never a workspace.
	if prefix != "/" && doublestar.MatchUnvalidated(w.pattern, filepath.ToSlash(prefix)) {
		w.out = append(w.out, found{Path: prefix, UID: uid, GID: gid, Mode: mode})
	}
	if err := w.walk(root, prefix, 0); err != nil && !errors.Is(err, errStopWalk) {
		return nil, "", err
	}
	slices.SortFunc(w.out, func(a, b found) int { return strings.Compare(a.Path, b.Path) })
	w.out = slices.CompactFunc(w.out, func(a, b found) bool { return a.Path == b.Path })
	return w.out, strings.Join(w.notes, "; "), nil
}

// splitPattern checks pattern and splits it into its static prefix (the
// leading components without glob meta) and the remaining segments.
func splitPattern(pattern string) (prefix string, segs []string, err error) {
	switch {
	case !filepath.IsAbs(pattern):
		return "", nil, fmt.Errorf("watch root %q: not an absolute path", pattern)
	case filepath.Clean(pattern) != pattern:
		return "", nil, fmt.Errorf("watch root %q: not a clean path (write %q)", pattern, filepath.Clean(pattern))
	case !doublestar.ValidatePattern(filepath.ToSlash(pattern)):
		return "", nil, fmt.Errorf("watch root %q: not a valid glob", pattern)
	case pattern == "/":
		return "", nil, fmt.Errorf("watch root %q: would make the whole machine one workspace", pattern)
	}
	parts := strings.Split(strings.TrimPrefix(filepath.ToSlash(pattern), "/"), "/")
	i := 0
	for i < len(parts) && !strings.ContainsAny(parts[i], `*?[{\`) {
		i++
	}
	prefix = "/" + strings.Join(parts[:i], "/")
	for _, k := range kernelTrees {
		if prefix == k || strings.HasPrefix(prefix, k+"/") {
			return "", nil, fmt.Errorf("watch root %q: %s is the kernel's own file system and holds no workspaces", pattern, k)
		}
	}
	return filepath.FromSlash(prefix), parts[i:], nil
}

// pruneDepth is how many leading segments select folder names one level
// each (a "**", or braces whose alternatives hold a "/", end that); bounded
// says nothing deeper than len(segs) can match.
func pruneDepth(segs []string) (prune int, bounded bool) {
	for i, s := range segs {
		if strings.Contains(s, "**") || !selfContained(s) || !doublestar.ValidatePattern(s) {
			return i, false
		}
	}
	return len(segs), true
}

// selfContained reports whether every brace and class in seg closes within it.
func selfContained(seg string) bool {
	depth, class := 0, false
	for i := 0; i < len(seg); i++ {
		switch c := seg[i]; {
		case c == '\\':
			i++
		case class:
			class = c != ']'
		case c == '[':
			class = true
		case c == '{':
			depth++
		case c == '}':
			depth--
		}
	}
	return depth == 0 && !class
}

// walker is the state of one discoverRoot walk.
type walker struct {
	ctx      context.Context
	pattern  string   // slash form
	segs     []string // the pattern below the static prefix
	prune    int      // segs[:prune] select names level by level
	bounded  bool     // no folder deeper than len(segs) can match
	lim      discoverLimits
	dev      uint64 // the static prefix's file system
	read     int    // folders read so far
	out      []found
	notes    []string
	deepNote bool
}

// walk reads dir (at path, depth levels below the prefix) and visits its folders.
func (w *walker) walk(dir *os.File, path string, depth int) error {
	if err := w.ctx.Err(); err != nil {
		return err
	}
	if w.read >= w.lim.MaxDirs {
		w.notes = append(w.notes, fmt.Sprintf("%s: stopped after reading %d folders (the cap); narrow the pattern", w.pattern, w.lim.MaxDirs))
		return errStopWalk
	}
	w.read++
	for {
		ents, err := dir.ReadDir(readDirBatch)
		for _, e := range ents {
			if verr := w.visit(dir, path, depth, e); verr != nil {
				return verr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("watch root %s: read %s: %w", w.pattern, path, err)
		}
		if err := w.ctx.Err(); err != nil {
			return err
		}
	}
}

// visit opens the entry e of parent when it can match or lead to a match,
// records it when it matches and descends into it when deeper levels can.
func (w *walker) visit(parent *os.File, parentPath string, depth int, e fs.DirEntry) error {
	if !e.IsDir() { // files, and symbolic links, which are never opened
		return nil
	}
	name := e.Name()
	if depth < w.prune {
		if ok, _ := doublestar.Match(w.segs[depth], name); !ok {
			return nil
		}
	}
	path := filepath.Join(parentPath, name)
	if parentPath == "/" && slices.Contains(kernelTrees, path) {
		return nil
	}
	f, err := platform.OpenDirAt(parent, name)
	if err != nil {
		if skippable(err) { // gone, forbidden, or now a link: not a workspace
			return nil
		}
		return fmt.Errorf("watch root %s: %w", w.pattern, err)
	}
	defer f.Close()
	uid, gid, mode, dev, err := platform.DirInfo(f)
	if err != nil {
		return fmt.Errorf("watch root %s: %w", w.pattern, err)
	}
	if dev != w.dev && !w.lim.CrossMounts {
		return nil
	}
	if doublestar.MatchUnvalidated(w.pattern, filepath.ToSlash(path)) {
		if len(w.out) >= w.lim.MaxMatches {
			w.notes = append(w.notes, fmt.Sprintf("%s: kept the first %d matches (the cap); the rest are not watched", w.pattern, w.lim.MaxMatches))
			return errStopWalk
		}
		w.out = append(w.out, found{Path: path, UID: uid, GID: gid, Mode: mode})
	}
	if w.bounded && depth+1 >= len(w.segs) {
		return nil
	}
	if depth+1 >= maxDiscoverDepth {
		if !w.deepNote {
			w.deepNote = true
			w.notes = append(w.notes, fmt.Sprintf("%s: did not look more than %d folders deep", w.pattern, maxDiscoverDepth))
		}
		return nil
	}
	return w.walk(f, path, depth+1)
}

// skippable errors describe the entry, not the walk: it vanished, is not
// readable, or was swapped for a link or a file since it was listed.
func skippable(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) ||
		errors.Is(err, platform.ErrLinkInPath) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.ELOOP)
}
