package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/cairn-dev/cairn/agent/config"
	"github.com/cairn-dev/cairn/platform"
)

// discoverLimits bound one root's discovery.
type discoverLimits struct {
	// MaxMatches is how many workspaces a root watches at most, shared
	// among their owners (choose); the walk holds at most this many new
	// matches per owner (default 1000).
	MaxMatches int
	// MaxDirs bounds the folders one walk looks at (opens); beyond it the
	// walk stops, reported (default 100000).
	MaxDirs int
	// MaxOwnerDirs bounds the folders of one owner a walk looks at: beyond
	// it that owner's folders are skipped, reported, and the walk goes on
	// with everyone else's (default MaxDirs/2).
	MaxOwnerDirs int
	CrossMounts  bool // descend into other file systems (default false)
	// Watched are the workspaces served now: a match among them is always
	// held, whatever its owner's count.
	Watched map[string]bool
}

// found is one workspace folder: its path and its owner read from an open descriptor.
type found struct {
	Path     string
	UID, GID uint32
	Mode     os.FileMode
}

// walkResult is what one root's walk found.
type walkResult struct {
	dirs []found // matches held, sorted by path
	// over counts, per folder owner, matches not held: beyond MaxMatches
	// new ones of that owner's.
	over map[uint32]int
	// notes say where the walk stopped short (the root's caps, depth).
	notes []string
	// ownerNotes say whose folders the walk stopped looking at (MaxOwnerDirs).
	ownerNotes map[uint32]string
	// partial: some folder that could hold a match was not looked at, so
	// a workspace missing from dirs may still be there (recheck).
	partial bool
	dev     uint64 // the static prefix's file system
}

const (
	defaultMaxMatches = config.DefaultMaxWorkspaces
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

// discoverRoot lists the folders pattern names, never following a link, and
// chooses the ones a root watches as choose does (nothing watched yet; each
// folder's owner its own share). truncated says what was left out and why.
func discoverRoot(ctx context.Context, pattern string, lim discoverLimits) (dirs []found, truncated string, err error) {
	res, err := walkRoot(ctx, pattern, lim)
	if err != nil {
		return nil, "", err
	}
	max := lim.MaxMatches
	if max <= 0 {
		max = defaultMaxMatches
	}
	ch := choose(res.dirs, func(f found) uint32 { return f.UID }, nil, max)
	notes := res.notes
	for _, uid := range slices.Sorted(maps.Keys(ch.left)) {
		notes = append(notes, capNote(pattern, uid, len(ch.left[uid])+res.over[uid], 0, ch, max))
	}
	for _, uid := range slices.Sorted(maps.Keys(res.over)) {
		if _, ok := ch.left[uid]; !ok {
			notes = append(notes, capNote(pattern, uid, res.over[uid], 0, ch, max))
		}
	}
	for _, uid := range slices.Sorted(maps.Keys(res.ownerNotes)) {
		notes = append(notes, res.ownerNotes[uid])
	}
	return ch.keep, strings.Join(notes, "; "), nil
}

// walkRoot lists the folders pattern names, never following a link.
//
// The static prefix of pattern is opened one component at a time without
// following links; everything below is read relative to open descriptors
// with O_NOFOLLOW, so a folder swapped for a link is skipped, not entered.
// A missing prefix is no match and no error. The walk stops at lim's caps
// (notes say which) and at ctx's cancel (the error is ctx.Err()). One
// owner's folders count against that owner's budget (MaxOwnerDirs), and at
// most MaxMatches new matches of each owner are held: an owner with many
// folders neither ends the walk for the others nor crowds out their matches.
func walkRoot(ctx context.Context, pattern string, lim discoverLimits) (*walkResult, error) {
	prefix, segs, err := splitPattern(pattern)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if lim.MaxMatches <= 0 {
		lim.MaxMatches = defaultMaxMatches
	}
	if lim.MaxDirs <= 0 {
		lim.MaxDirs = defaultMaxDirs
	}
	if lim.MaxOwnerDirs <= 0 {
		lim.MaxOwnerDirs = max(lim.MaxDirs/2, 1)
	}
	res := &walkResult{over: map[uint32]int{}, ownerNotes: map[uint32]string{}}
	root, err := platform.OpenDirNoFollow(prefix)
	if err != nil {
		switch {
		case errors.Is(err, platform.ErrLinkInPath):
			return nil, fmt.Errorf("watch root %s goes through a symbolic link: %w", pattern, err)
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
			return res, nil // nothing there (yet)
		}
		return nil, fmt.Errorf("watch root %s: %w", pattern, err)
	}
	defer root.Close()
	uid, gid, mode, dev, err := platform.DirInfo(root)
	if err != nil {
		return nil, fmt.Errorf("watch root %s: %w", pattern, err)
	}
	res.dev = dev
	if len(segs) == 0 { // a plain path names itself
		res.dirs = []found{{Path: prefix, UID: uid, GID: gid, Mode: mode}}
		return res, nil
	}

	w := &walker{ctx: ctx, pattern: filepath.ToSlash(pattern), segs: segs, lim: lim, res: res,
		lookedBy: map[uint32]int{}, held: map[uint32]int{}}
	w.prune, w.bounded = pruneDepth(segs)
	// "/data/**" names /data itself, as doublestar does; "/" is never a workspace.
	if prefix != "/" && doublestar.MatchUnvalidated(w.pattern, filepath.ToSlash(prefix)) {
		w.match(found{Path: prefix, UID: uid, GID: gid, Mode: mode})
	}
	w.looked, w.lookedBy[uid] = 1, 1
	if err := w.walk(root, prefix, 0); err != nil && !errors.Is(err, errStopWalk) {
		return nil, err
	}
	slices.SortFunc(res.dirs, func(a, b found) int { return strings.Compare(a.Path, b.Path) })
	res.dirs = slices.CompactFunc(res.dirs, func(a, b found) bool { return a.Path == b.Path })
	return res, nil
}

// recheck looks again, one by one, at the workspaces served now under
// pattern that a partial walk did not reach: each still there (opened
// without following a link, on the walk's file system unless mounts are
// crossed) is found again, so a walk cut short by someone's folders never
// releases a workspace it did not look at.
func recheck(pattern string, res *walkResult, lim discoverLimits) {
	if !res.partial {
		return
	}
	seen := map[string]bool{}
	for _, f := range res.dirs {
		seen[f.Path] = true
	}
	pat := filepath.ToSlash(pattern)
	for _, p := range slices.Sorted(maps.Keys(lim.Watched)) {
		if seen[p] || !doublestar.MatchUnvalidated(pat, filepath.ToSlash(p)) {
			continue
		}
		f, err := platform.OpenDirNoFollow(p)
		if err != nil {
			continue // gone, or now through a link: released
		}
		uid, gid, mode, dev, err := platform.DirInfo(f)
		f.Close()
		if err != nil || (dev != res.dev && !lim.CrossMounts) {
			continue
		}
		res.dirs = append(res.dirs, found{Path: p, UID: uid, GID: gid, Mode: mode})
	}
	slices.SortFunc(res.dirs, func(a, b found) int { return strings.Compare(a.Path, b.Path) })
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

// walker is the state of one walkRoot walk.
type walker struct {
	ctx      context.Context
	pattern  string   // slash form
	segs     []string // the pattern below the static prefix
	prune    int      // segs[:prune] select names level by level
	bounded  bool     // no folder deeper than len(segs) can match
	lim      discoverLimits
	res      *walkResult
	looked   int            // folders opened so far
	lookedBy map[uint32]int // folders opened so far, per owner
	held     map[uint32]int // new matches held, per owner
	deepNote bool
}

// match holds f, or counts it against its owner when they have enough held.
func (w *walker) match(f found) {
	if !w.lim.Watched[f.Path] {
		if w.held[f.UID] >= w.lim.MaxMatches {
			w.res.over[f.UID]++
			return
		}
		w.held[f.UID]++
	}
	w.res.dirs = append(w.res.dirs, f)
}

// walk reads dir (at path, depth levels below the prefix) and visits its folders.
func (w *walker) walk(dir *os.File, path string, depth int) error {
	if err := w.ctx.Err(); err != nil {
		return err
	}
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

// overBudget reports whether uid has had its share of the folders a walk
// looks at, noting it the first time.
func (w *walker) overBudget(uid uint32) bool {
	if w.lookedBy[uid] < w.lim.MaxOwnerDirs {
		return false
	}
	w.res.partial = true
	if _, ok := w.res.ownerNotes[uid]; !ok {
		w.res.ownerNotes[uid] = fmt.Sprintf("%s: stopped looking at the folders of uid %d after %d (one owner's share of the %d a root may look at); workspaces among or below the rest of them are not found",
			w.pattern, uid, w.lim.MaxOwnerDirs, w.lim.MaxDirs)
	}
	return true
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
	if w.looked >= w.lim.MaxDirs {
		w.res.partial = true
		w.res.notes = append(w.res.notes, fmt.Sprintf("%s: stopped after looking at %d folders (the cap); narrow the pattern", w.pattern, w.lim.MaxDirs))
		return errStopWalk
	}
	if len(w.res.ownerNotes) > 0 {
		// Someone had their share: a look at the entry's owner (cheaper
		// than opening it) skips the rest of theirs.
		if uid, err := platform.EntryOwner(parent, name); err == nil && w.overBudget(uid) {
			return nil
		}
	}
	f, err := platform.OpenDirAt(parent, name)
	if err != nil {
		if platform.WalkSkippable(err) { // gone, forbidden, or now a link: not a workspace
			return nil
		}
		return fmt.Errorf("watch root %s: %w", w.pattern, err)
	}
	defer f.Close()
	uid, gid, mode, dev, err := platform.DirInfo(f)
	if err != nil {
		return fmt.Errorf("watch root %s: %w", w.pattern, err)
	}
	if w.overBudget(uid) {
		return nil
	}
	w.looked++
	w.lookedBy[uid]++
	if dev != w.res.dev && !w.lim.CrossMounts {
		return nil
	}
	if doublestar.MatchUnvalidated(w.pattern, filepath.ToSlash(path)) {
		w.match(found{Path: path, UID: uid, GID: gid, Mode: mode})
	}
	if w.bounded && depth+1 >= len(w.segs) {
		return nil
	}
	if depth+1 >= maxDiscoverDepth {
		w.res.partial = true
		if !w.deepNote {
			w.deepNote = true
			w.res.notes = append(w.res.notes, fmt.Sprintf("%s: did not look more than %d folders deep", w.pattern, maxDiscoverDepth))
		}
		return nil
	}
	return w.walk(f, path, depth+1)
}

// choice is which of a root's matches it watches.
type choice struct {
	keep   []found            // sorted by path
	left   map[uint32][]found // matches not watched, per folder owner, sorted by path
	share  int                // what each owner is sure of
	owners int                // owners with matches (by key)
}

// choose picks at most max of a root's matches, shared among their owners
// (key: who a workspace's work runs as), so that one owner's many folders
// never push out another's workspaces:
//
//  1. each owner keeps the ones watched now, up to its share (max divided by
//     the owners with matches, at least 1);
//  2. each owner's new ones, up to its share;
//  3. the rest of the ones watched now, while there is room;
//  4. the rest of the new ones, while there is room.
//
// Each step takes one workspace per owner in turn (owners by key, each's in
// path order), so when room runs out it is shared too. A workspace within
// its owner's share is released only when it goes; an owner above its share
// may lose its excess when another owner's folders come.
func choose(cands []found, key func(found) uint32, watched map[string]bool, max int) choice {
	type queue struct{ kept, fresh []found }
	byKey := map[uint32]*queue{}
	for _, f := range cands {
		k := key(f)
		q := byKey[k]
		if q == nil {
			q = &queue{}
			byKey[k] = q
		}
		if watched[f.Path] {
			q.kept = append(q.kept, f)
		} else {
			q.fresh = append(q.fresh, f)
		}
	}
	keys := slices.Sorted(maps.Keys(byKey))
	ch := choice{left: map[uint32][]found{}, owners: len(keys)}
	if len(keys) == 0 {
		return ch
	}
	ch.share = max / len(keys)
	if ch.share < 1 {
		ch.share = 1
	}
	count := map[uint32]int{}
	take := func(kept bool, limit int) {
		for progress := true; progress && len(ch.keep) < max; {
			progress = false
			for _, k := range keys {
				list := &byKey[k].fresh
				if kept {
					list = &byKey[k].kept
				}
				if len(*list) == 0 || count[k] >= limit || len(ch.keep) >= max {
					continue
				}
				ch.keep = append(ch.keep, (*list)[0])
				*list = (*list)[1:]
				count[k]++
				progress = true
			}
		}
	}
	take(true, ch.share)
	take(false, ch.share)
	take(true, max)
	take(false, max)
	for _, k := range keys {
		for _, f := range append(byKey[k].kept, byKey[k].fresh...) {
			ch.left[f.UID] = append(ch.left[f.UID], f)
		}
	}
	slices.SortFunc(ch.keep, func(a, b found) int { return strings.Compare(a.Path, b.Path) })
	for uid := range ch.left {
		slices.SortFunc(ch.left[uid], func(a, b found) int { return strings.Compare(a.Path, b.Path) })
	}
	return ch
}

// capNote says that n matching folders of uid under pattern are not watched
// (released of them were watched until now), why, and names a few of them.
func capNote(pattern string, uid uint32, n, released int, ch choice, max int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d folders of uid %d that match are not watched", pattern, n, uid)
	if released > 0 {
		fmt.Fprintf(&b, " (%d of them released)", released)
	}
	// How many other owners there are is theirs: the note says only the rule.
	fmt.Fprintf(&b, ": a watch root watches at most %d folders, shared equally among the owners of its matches (room one leaves goes to the others)", max)
	if left := ch.left[uid]; len(left) > 0 {
		const named = 3
		names := make([]string, 0, named)
		for _, f := range left[:min(len(left), named)] {
			names = append(names, f.Path)
		}
		b.WriteString("; not watched: " + strings.Join(names, ", "))
		if n > len(names) {
			b.WriteString(", …")
		}
	}
	return b.String()
}
