package workspace

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/platform"
	"github.com/cairn-dev/cairn/snapshot"
)

// Foreign-writable folders (README, "Security"): a folder someone other
// than the workspace's owner (and root) can write. Above a workspace a
// sticky folder's write bits are accepted; inside, nothing is. A workspace
// served as root leaves the ones inside out of every seal and restore
// (snapshot.LeftOut) and is refused when one above is not sticky (place);
// an owner's worker names them in status.

// maxForeignKept bounds the foreign folders a workspace remembers; past it
// a workspace served as root leaves its whole tree out.
const maxForeignKept = 10000

// foreignState is what a workspace knows of the foreign-writable folders
// inside and above it. The watch's filter (another goroutine) writes it too.
type foreignState struct {
	mu     sync.Mutex
	inside map[string]string // absolute path → why; each found without entering another
	above  []api.ForeignFolder
	acct   *platform.Accounts
}

// maxForeignDepth bounds the open descriptors (one per level) a scan holds.
const maxForeignDepth = 128

// foreignReadBatch entries are read at a time so a huge folder still sees a cancel.
const foreignReadBatch = 256

// leavesOut reports whether this process leaves foreign folders out: it
// serves the workspace as root.
func leavesOut() bool { return platform.SelfUID() == 0 }

// accounts is the group membership read by the last scan, read again when
// /etc/passwd or /etc/group changed since.
func (w *Workspace) accounts() *platform.Accounts {
	w.fg.mu.Lock()
	defer w.fg.mu.Unlock()
	if w.fg.acct == nil || w.fg.acct.Stale() {
		w.fg.acct = platform.ReadAccounts()
	}
	return w.fg.acct
}

// foreignWhy says why a folder inside the workspace (fi from lstat or
// fstat) is writable by someone other than the uid this process runs as.
func (w *Workspace) foreignWhy(fi os.FileInfo) string {
	return platform.ForeignWhy(fi, platform.SelfUID(), false, w.accounts())
}

// underForeign reports whether abs is a known foreign folder or under one.
func (w *Workspace) underForeign(abs, root string) bool {
	w.fg.mu.Lock()
	defer w.fg.mu.Unlock()
	for p := abs; ; p = filepath.Dir(p) {
		if _, ok := w.fg.inside[p]; ok {
			return true
		}
		if p == root || len(p) <= len(root) || p == filepath.Dir(p) {
			return false
		}
	}
}

// noteForeign records what a folder is now (why "" : not foreign) and
// reports whether that changed what the workspace knew.
func (w *Workspace) noteForeign(abs, why string) bool {
	w.fg.mu.Lock()
	defer w.fg.mu.Unlock()
	was, had := w.fg.inside[abs]
	switch {
	case why == "" && had:
		delete(w.fg.inside, abs)
		return true
	case why != "" && was != why:
		if w.fg.inside == nil {
			w.fg.inside = map[string]string{}
		}
		if len(w.fg.inside) >= maxForeignKept && !had {
			return false // the next scan says the tree is too shared
		}
		w.fg.inside[abs] = why
		return true
	}
	return false
}

// foreignSkip wraps the watch's filter: each folder the watch meets (its
// first walk, and every folder created or changed since) is checked with
// one lstat; as root a foreign one is neither watched nor entered, and
// the store leaves it out at once.
func (w *Workspace) foreignSkip(root string, base func(string, bool) bool) func(string, bool) bool {
	return func(rel string, isDir bool) bool {
		if base != nil && base(rel, isDir) {
			return true
		}
		abs := filepath.Join(root, filepath.FromSlash(rel))
		if leavesOut() && w.underForeign(abs, root) {
			return true
		}
		if !isDir {
			return false
		}
		// Every folder above abs is the owner's alone (or the walk stopped
		// above it), so this lstat cannot be led elsewhere.
		fi, err := os.Lstat(abs)
		if err != nil || !fi.IsDir() {
			return false
		}
		why := w.foreignWhy(fi)
		if w.noteForeign(abs, why) {
			w.pushLeftOut()
			if why != "" {
				w.log.Warn().Str("folder", abs).Str("why", why).Bool("left_out", leavesOut()).Msg("a folder in the workspace is writable by someone else")
			}
		}
		return why != "" && leavesOut()
	}
}

// checkForeign finds the foreign-writable folders in the watched tree (it
// enters none of them, nor what the watch skips) and above it, and hands
// the store what it leaves out. It runs before every full reconcile: one
// readdir and one fstat per folder, through descriptors opened without
// following a link. A tree it could not check is left out whole.
func (w *Workspace) checkForeign(ctx context.Context) {
	if w.lay == nil {
		return
	}
	root, skip := w.lay.watch()
	acct := platform.ReadAccounts()
	uid := platform.SelfUID()
	inside := map[string]string{}
	err := scanForeign(ctx, root, skip, func(fi os.FileInfo) string { return platform.ForeignWhy(fi, uid, false, acct) }, inside)
	if ctx.Err() != nil {
		return // shutting down: what was known stays
	}
	if err != nil {
		inside = map[string]string{root: "could not be checked: " + err.Error()}
	}
	var above []api.ForeignFolder
	if anc, err := platform.StatAncestors(root); err != nil {
		above = []api.ForeignFolder{{Path: filepath.Dir(root), Why: "could not be checked: " + err.Error(), Above: true}}
	} else {
		for _, a := range anc {
			if why := platform.ForeignWhy(a.Info, uid, true, acct); why != "" {
				above = append(above, api.ForeignFolder{Path: a.Path, Why: why, Above: true})
			}
		}
	}
	w.fg.mu.Lock()
	same := maps.Equal(inside, w.fg.inside) && slices.Equal(above, w.fg.above)
	w.fg.inside, w.fg.above, w.fg.acct = inside, above, acct
	w.fg.mu.Unlock()
	if !same {
		w.log.Warn().Int("inside", len(inside)).Int("above", len(above)).Bool("left_out", leavesOut()).Msg("folders others can write in or above the workspace (cairn status names them)")
	}
	w.pushLeftOut()
}

// scanForeign walks the folder root (never a link, never a folder skip
// names) and records in found every folder why calls foreign, without
// entering it. Past maxForeignKept, or deeper than maxForeignDepth, root
// itself is recorded: the tree is too shared to serve as root.
func scanForeign(ctx context.Context, root string, skip func(string, bool) bool, why func(os.FileInfo) string, found map[string]string) error {
	top, err := platform.OpenDirNoFollow(root)
	if err != nil {
		return err
	}
	defer top.Close()
	fi, err := top.Stat()
	if err != nil {
		return err
	}
	if y := why(fi); y != "" {
		found[root] = y
		return nil
	}
	var walk func(dir *os.File, rel string, depth int) error
	walk = func(dir *os.File, rel string, depth int) error {
		for {
			if err := ctx.Err(); err != nil {
				return err
			}
			ents, rerr := dir.ReadDir(foreignReadBatch)
			for _, e := range ents {
				if !e.IsDir() { // files, and links, which are never opened
					continue
				}
				r := e.Name()
				if rel != "" {
					r = rel + "/" + e.Name()
				}
				if skip != nil && skip(r, true) {
					continue
				}
				abs := filepath.Join(root, filepath.FromSlash(r))
				sub, err := platform.OpenDirAt(dir, e.Name())
				if err != nil {
					if platform.WalkSkippable(err) {
						continue
					}
					return err
				}
				fi, err := sub.Stat()
				if err == nil {
					if y := why(fi); y != "" {
						found[abs] = y
					} else if depth+1 >= maxForeignDepth {
						found[abs] = fmt.Sprintf("more than %d folders deep: not checked", maxForeignDepth)
					} else {
						err = walk(sub, r, depth+1)
					}
				}
				sub.Close()
				if err != nil {
					return err
				}
				if len(found) > maxForeignKept {
					return fmt.Errorf("more than %d folders others can write", maxForeignKept)
				}
			}
			if rerr == io.EOF {
				return nil
			}
			if rerr != nil {
				return fmt.Errorf("read %s: %w", filepath.Join(root, rel), rerr)
			}
		}
	}
	return walk(top, "", 0)
}

// pushLeftOut hands the store the foreign folders of its work tree (as
// root; an owner's worker leaves nothing out: the owner chose to share).
func (w *Workspace) pushLeftOut() {
	if !leavesOut() {
		return
	}
	st := w.Store()
	if st == nil {
		return
	}
	wt := st.WorkTree()
	w.fg.mu.Lock()
	var dirs []string
	for abs := range w.fg.inside {
		switch rel, err := filepath.Rel(wt, abs); {
		case err != nil:
			continue
		case abs == wt || strings.HasPrefix(wt, abs+string(filepath.Separator)):
			dirs = append(dirs, ".") // the work tree is in it
		case rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)):
			continue // beside the work tree (the runtime's own folders)
		default:
			dirs = append(dirs, filepath.ToSlash(rel))
		}
	}
	w.fg.mu.Unlock()
	st.SetLeftOut(&snapshot.LeftOut{Dirs: dirs, Foreign: func(fi os.FileInfo) bool { return w.foreignWhy(fi) != "" }})
}

// foreignStatus is what status names: the folders above, then the ones
// inside, the first api.ForeignShown of them, and how many more there are.
func (w *Workspace) foreignStatus() ([]api.ForeignFolder, int) {
	w.fg.mu.Lock()
	all := slices.Clone(w.fg.above)
	inside := make([]api.ForeignFolder, 0, len(w.fg.inside))
	for p, why := range w.fg.inside {
		inside = append(inside, api.ForeignFolder{Path: p, Why: why, LeftOut: leavesOut()})
	}
	w.fg.mu.Unlock()
	slices.SortFunc(inside, func(a, b api.ForeignFolder) int { return strings.Compare(a.Path, b.Path) })
	all = append(all, inside...)
	if len(all) > api.ForeignShown {
		return all[:api.ForeignShown], len(all) - api.ForeignShown
	}
	return all, 0
}
