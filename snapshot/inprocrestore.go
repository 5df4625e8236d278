package snapshot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/cairn-dev/cairn/platform"
	"github.com/cairn-dev/cairn/restore/ckpt"
	"github.com/cairn-dev/cairn/snapshot/gitobj"
)

// The in-process restore (docs/engine.md, "Restore"): with the in-process
// engine, a restore reads the two trees (the target's and the pre-restore
// checkpoint's) and the blobs it writes from the store itself, checks every
// one before anything is sealed or written, and writes the work tree through
// the beneath-only, no-link file layer (platform.Tree), several files at
// once, each made under a temporary name beside it and renamed over what was
// there. It keeps what the git path (`git checkout --force`) guarantees:
// the modes git records (the exec bit), symbolic links made as links,
// deletions only of files the position's checkpoint tracked, and a file
// swapped for a folder (or back) in the order that lets both exist.
// Whatever it cannot do as git would (a left-out folder, a dry run, a
// submodule entry, a blob too large to hold, a store config the engine does
// not read) goes the git way.

// restoreWriters is how many files a restore writes at once: creating and
// renaming a file is mostly waiting on the file system's journal, which
// more requests in flight overlap (1,000 files on ext4 here: 4 writers
// 434 ms, 8 369 ms, 16 320 ms; medians of 7).
const restoreWriters = 8

// maxHeldBlobs bounds the blob bytes a restore keeps between reading them
// (the check) and writing them; the rest are read again when written.
var maxHeldBlobs int64 = 64 << 20 // a variable for tests

// ipRestore is one in-process restore under way.
type ipRestore struct {
	s        *Store
	e        *inproc
	target   string // the target commit
	tTree    string // its tree
	pTree    string // the position's tree ("" without one)
	prefixes []string
	// tracked are the paths the position's checkpoint holds that the target
	// lacks: the only ones a restore may delete.
	tracked map[string]bool
	// cleared are the kept paths removed because a write needed their place.
	cleared map[string]bool
	// where names a path of the target for each blob, for a refusal.
	where map[string]string
	mu    sync.Mutex // e's reader (its cat-file)
	hmu   sync.Mutex // held, heldN
	held  map[string][]byte
	heldN int64
	sizes map[string]int64
	read  map[string]bool // blobs read whole and found whole
}

// inprocRestorer returns the in-process restore for this request, or nil
// when the restore goes the git way.
func (s *Store) inprocRestorer(ctx context.Context, opts ckpt.Request) *inproc {
	if s.engineName() != EngineInproc || opts.DryRun {
		return nil
	}
	if lo := s.left(); lo.any() || lo.Foreign != nil {
		return nil
	}
	e, err := s.inproc.engine(ctx)
	if err != nil {
		return nil
	}
	return e
}

// errTooLarge means a blob is too large to be read whole in memory.
var errTooLarge = errors.New("a blob too large to hold")

// readBlob reads one blob whole (by cairn, else by the engine's cat-file),
// checked against its id.
func (r *ipRestore) readBlob(ctx context.Context, id string) ([]byte, error) {
	typ, data, err := r.e.readHere(id)
	if errors.Is(err, gitobj.ErrNotFound) {
		r.mu.Lock()
		typ, data, err = r.e.readByGit(ctx, r.s, id)
		r.mu.Unlock()
	} else if err != nil && strings.Contains(err.Error(), "read whole") {
		return nil, errTooLarge
	}
	if err != nil {
		return nil, err
	}
	if typ != "blob" {
		return nil, fmt.Errorf("a %s, not a blob", typ)
	}
	return data, nil
}

// readBlobs reads the blobs ids name that were not read yet, keeping their
// bytes up to maxHeldBlobs, and returns those lost: read by cairn several
// at once (loose or packed, inproc.readHere), then what it could not read
// streamed through one cat-file.
func (r *ipRestore) readBlobs(ctx context.Context, ids []string) ([]ckpt.LostObject, error) {
	var todo []string
	for _, id := range ids {
		if !r.read[id] {
			todo = append(todo, id)
		}
	}
	slices.Sort(todo)
	todo = slices.Compact(todo)
	// Each blob is kept (within the budget) or dropped as soon as it is
	// read: only its size stays.
	problems := make([]error, len(todo))
	sizes := make([]int64, len(todo))
	got := func(i int, typ string, data []byte, err error) {
		if err == nil && typ != "blob" {
			err = fmt.Errorf("a %s, not a blob", typ)
		}
		problems[i], sizes[i] = err, int64(len(data))
		if err == nil {
			r.hmu.Lock()
			if r.heldN+int64(len(data)) <= maxHeldBlobs {
				r.held[todo[i]] = data
				r.heldN += int64(len(data))
			}
			r.hmu.Unlock()
		}
	}
	packed := make([]bool, len(todo))
	gitobj.ForEach(len(todo), func(i int) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		typ, data, err := r.e.readHere(todo[i])
		switch {
		case errors.Is(err, gitobj.ErrNotFound):
			packed[i] = true
			return nil
		case err != nil && strings.Contains(err.Error(), "read whole"):
			err = errTooLarge
		}
		got(i, typ, data, err)
		return nil
	})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var ask []int
	for i := range todo {
		if packed[i] {
			ask = append(ask, i)
		}
	}
	if len(ask) > 0 {
		pids := make([]string, len(ask))
		for j, i := range ask {
			pids[j] = todo[i]
		}
		r.mu.Lock()
		err := r.e.readPacked(ctx, r.s, pids, func(j int, typ string, data []byte, err error) {
			got(ask[j], typ, data, err)
		})
		r.mu.Unlock()
		if err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var lost []ckpt.LostObject
	for i, id := range todo {
		err := problems[i]
		switch {
		case errors.Is(err, errTooLarge):
			return nil, errFallback
		case errors.Is(err, errMissing):
			lost = append(lost, ckpt.LostObject{SHA: id, Type: "blob", Path: r.where[id], Problem: "missing"})
			continue
		case err != nil:
			lost = append(lost, ckpt.LostObject{SHA: id, Type: "blob", Path: r.where[id], Problem: "unreadable: " + err.Error()})
			continue
		}
		r.read[id] = true
		r.sizes[id] = sizes[i]
	}
	return lost, nil
}

// blob is a blob's bytes, held since the check or read again.
func (r *ipRestore) blob(ctx context.Context, id string) ([]byte, error) {
	r.hmu.Lock()
	data, ok := r.held[id]
	r.hmu.Unlock()
	if ok {
		return data, nil
	}
	return r.readBlob(ctx, id)
}

// diffTrees calls fn for each path whose entry differs from tree a to tree
// b under prefixes, as inproc.diff does; the trees of b the store cannot
// read are returned as lost (a's trees are the position's, read before).
func (r *ipRestore) diffTrees(ctx context.Context, a, b string, fn func(p string, old, new *gitobj.TreeEntry)) ([]ckpt.LostObject, error) {
	var lost []ckpt.LostObject
	var walk func(a, b, prefix string) error
	walk = func(a, b, prefix string) error {
		if a == b {
			return nil
		}
		dir := strings.TrimSuffix(prefix, "/")
		if dir != "" && !relevantFolder(dir, r.prefixes) {
			return nil
		}
		ta, err := r.e.tree(ctx, r.s, a)
		if err != nil {
			return err
		}
		tb, err := r.e.tree(ctx, r.s, b)
		if err == nil && b != "" && b != r.e.empty && !r.e.known.Has(b) {
			// Parsed before (the engine's cache), gone from the store since.
			err = errMissing
		}
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			// Lost: named, and the folder's files are unknown.
			lost = append(lost, ckpt.LostObject{SHA: b, Type: "tree", Path: dir, Problem: treeProblem(err)})
			return nil
		}
		side := func(x gitobj.TreeEntry, removed bool) error {
			p := prefix + x.Name
			if x.IsTree() {
				if removed {
					return walk(x.ID, "", p+"/")
				}
				return walk("", x.ID, p+"/")
			}
			if !under(p, r.prefixes) {
				return nil
			}
			if removed {
				fn(p, &x, nil)
			} else {
				fn(p, nil, &x)
			}
			return nil
		}
		return gitobj.MergeEntries(ta, tb, func(x, y *gitobj.TreeEntry) error {
			switch {
			case y == nil:
				return side(*x, true)
			case x == nil:
				return side(*y, false)
			case x.IsTree():
				return walk(x.ID, y.ID, prefix+x.Name+"/")
			case (x.ID != y.ID || x.Mode != y.Mode) && under(prefix+x.Name, r.prefixes):
				fn(prefix+x.Name, x, y)
			}
			return nil
		})
	}
	r.e.prefetchDiff(ctx, a, b, func(dir string) bool { return relevantFolder(dir, r.prefixes) })
	err := walk(a, b, "")
	return lost, err
}

// treeProblem words why a tree could not be read, as a refusal names it.
func treeProblem(err error) string {
	if errors.Is(err, errMissing) {
		return "missing"
	}
	return "unreadable: " + err.Error()
}

// checkInproc is checkTarget done in-process: the target's trees along what
// differs from the position, and the blobs the restore will most likely
// write (those and the ones at paths the watcher saw change), each read
// whole and hashed. errFallback sends the restore the git way (nothing done
// yet).
func (s *Store) checkInproc(ctx context.Context, e *inproc, target, pos string, prefixes, changed []string) (*ipRestore, error) {
	r := &ipRestore{s: s, e: e, target: target, prefixes: prefixes, tracked: map[string]bool{},
		where: map[string]string{}, held: map[string][]byte{}, sizes: map[string]int64{}, read: map[string]bool{}}
	// What the store holds now: a pack or a loose object removed since the
	// engine last looked is seen (and, in a new engine, the packs are
	// known before the first object is read: no cat-file is started for
	// what cairn can read itself).
	e.refreshKnown()
	t, err := e.commitTree(ctx, s, target)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		return nil, &ckpt.TargetDamagedError{Target: target, Lost: []ckpt.LostObject{{SHA: target, Type: "commit", Problem: treeProblem(err)}}}
	}
	r.tTree = t
	if pos != "" {
		if r.pTree, err = e.commitTree(ctx, s, pos); err != nil {
			return nil, errFallback // the git way names what is wrong with it
		}
		if _, err := e.tree(ctx, s, r.pTree); err != nil {
			return nil, errFallback
		}
	}
	var want []string
	sub := false
	lost, err := r.diffTrees(ctx, r.pTree, r.tTree, func(p string, old, nw *gitobj.TreeEntry) {
		switch {
		case nw == nil:
			r.tracked[p] = true
		case nw.Mode == gitobj.ModeGitlink:
			sub = true
		default:
			want = append(want, nw.ID)
			if w, ok := r.where[nw.ID]; !ok || p < w {
				r.where[nw.ID] = p
			}
		}
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		return nil, errFallback
	}
	if sub {
		return nil, errFallback // a submodule entry: git makes its folder
	}
	for _, p := range changed {
		if !under(p, prefixes) {
			continue
		}
		x, err := e.entryAt(ctx, s, r.tTree, p)
		if err == nil && x != nil && !x.IsTree() && x.Mode != gitobj.ModeGitlink {
			want = append(want, x.ID)
			if _, ok := r.where[x.ID]; !ok {
				r.where[x.ID] = p
			}
		}
	}
	more, err := r.readBlobs(ctx, want)
	if err != nil {
		return nil, err
	}
	if lost = append(lost, more...); len(lost) > 0 {
		return nil, s.refuseDamaged(ctx, target, lost)
	}
	return r, nil
}

// leadingFolder reports whether the folder holding rel is a folder on disk
// (every folder on its way one, no link followed): git's check of a
// deleted entry's leading path before it schedules its folders' removal.
func leadingFolder(t *platform.Tree, rel string) bool {
	d := path.Dir(rel)
	if d == "." {
		return true
	}
	fi, err := t.Lstat(filepath.FromSlash(d))
	return err == nil && fi.IsDir()
}

// ipChange is one path the in-process restore writes, deletes or keeps.
type ipChange struct {
	path string
	mode uint32 // the target's; 0: the target lacks it
	id   string
	del  bool // tracked: deleted
	add  bool // written where the pre-restore checkpoint holds nothing
	// was is the pre-restore checkpoint's entry at path (nil: it holds none).
	was *gitobj.TreeEntry
}

// planInproc fills the plan from the pre-restore tree before to the target,
// and reads the blobs it writes that the check did not. errFallback (a blob
// too large to hold) comes with the changes and no plan.
func (r *ipRestore) planInproc(ctx context.Context, res *ckpt.Outcome, work *restoreWork, before string) ([]ipChange, error) {
	var ch []ipChange
	_, err := r.diffTrees(ctx, before, r.tTree, func(p string, old, nw *gitobj.TreeEntry) {
		if nw == nil {
			ch = append(ch, ipChange{path: p, del: r.tracked[p], was: old})
			return
		}
		ch = append(ch, ipChange{path: p, mode: nw.Mode, id: nw.ID, add: old == nil, was: old})
		if _, ok := r.where[nw.ID]; !ok {
			r.where[nw.ID] = p
		}
	})
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, c := range ch {
		if c.mode == gitobj.ModeGitlink {
			return nil, fmt.Errorf("%s: a submodule entry appeared in the target", c.path)
		}
		if c.mode != 0 {
			ids = append(ids, c.id)
		}
	}
	lost, err := r.readBlobs(ctx, ids)
	if errors.Is(err, errFallback) {
		return ch, err // the changes, for overwritten; the plan is git's
	}
	if err != nil {
		return nil, err
	}
	if len(lost) > 0 {
		return nil, r.s.refuseDamaged(ctx, r.target, lost)
	}
	// The old sizes of deleted files: the pre-restore checkpoint holds the
	// files on disk as they are.
	for _, c := range ch {
		switch {
		case c.mode == 0 && c.del:
			var size int64
			if fi, err := r.s.lstatWork(c.path); err == nil {
				size = fi.Size()
			}
			res.Delete = append(res.Delete, ckpt.PlanFile{Path: c.path, Size: size, Action: ckpt.ActionDelete})
		case c.mode == 0:
			res.Kept++
			work.kept = append(work.kept, c.path)
		default:
			act := ckpt.ActionModify
			if c.add {
				act = ckpt.ActionAdd
			}
			res.Write = append(res.Write, ckpt.PlanFile{Path: c.path, Size: r.sizes[c.id], Action: act})
			work.wrote[c.path] = blobID{c.id, fmt.Sprintf("%o", c.mode)}
		}
	}
	return ch, nil
}

// applyInproc makes the work tree the target's at the planned paths:
// deletions first (deepest first, each emptied folder removed after, as git
// does), then every write, several at once, each folder on its way made
// beneath the work tree. A path it could not write is left for verify to
// name; an error is returned only when the restore cannot go on.
func (r *ipRestore) applyInproc(ctx context.Context, ch []ipChange, tag string) error {
	s := r.s
	return s.withWorkTree(func(t *platform.Tree) error {
		// Deletions, deepest first, so a folder's files go before it.
		var dels []string
		for _, c := range ch {
			if c.mode == 0 && c.del {
				dels = append(dels, c.path)
			}
		}
		slices.SortFunc(dels, func(a, b string) int { return strings.Compare(b, a) })
		emptied := map[string]bool{}
		for _, p := range dels {
			err := t.Remove(filepath.FromSlash(p))
			switch {
			case err == nil, errors.Is(err, fs.ErrNotExist) && leadingFolder(t, p):
				// Gone (or already gone from a folder still there): its
				// folders go too if that leaves them empty, as git's
				// checkout removes them.
				for d := path.Dir(p); d != "."; d = path.Dir(d) {
					emptied[d] = true
				}
			case errors.Is(err, fs.ErrNotExist):
				// Its folder is gone too: git's checkout removes none of
				// its folders then, and neither does this.
			case errors.Is(err, platform.ErrThroughLink), errors.Is(err, syscall.ENOTDIR):
				// A folder on its way is a link now (never followed), or
				// a file: verify names what is left.
			case errors.Is(err, syscall.ENOTEMPTY), errors.Is(err, syscall.EEXIST):
				// A folder in its place holding files: kept.
			default:
				return fmt.Errorf("delete %s: %w", p, err)
			}
		}
		// A tracked file already gone from disk (so not in the plan) from a
		// folder still there: its folders go if empty, as git's checkout
		// removes them (it leaves them all when the file's own folder is
		// gone as well).
		for p := range r.tracked {
			if d := path.Dir(p); d == "." || emptied[d] || !leadingFolder(t, p) {
				continue
			}
			for d := path.Dir(p); d != "." && !emptied[d]; d = path.Dir(d) {
				emptied[d] = true
			}
		}
		// What stands in the way of a write and the target lacks: a file
		// where a folder goes, files in a folder where a file goes. git's
		// checkout removes them; so does this, but only those the
		// pre-restore checkpoint holds (the kept paths): anything else in
		// the way stays, and verify names the path not written.
		r.cleared = map[string]bool{}
		for _, p := range r.inTheWay(ch) {
			if err := t.Remove(filepath.FromSlash(p)); err == nil {
				r.cleared[p] = true
				for d := path.Dir(p); d != "."; d = path.Dir(d) {
					emptied[d] = true
				}
			}
		}
		// Folders the deletions emptied go, deepest first, as git's
		// checkout removes them; one still holding anything stays.
		var dirs []string
		for d := range emptied {
			dirs = append(dirs, d)
		}
		slices.SortFunc(dirs, func(a, b string) int { return strings.Compare(b, a) })
		for _, d := range dirs {
			// Only an empty folder: whatever stands at d now (a file the
			// target lacks where a tracked folder was) stays.
			_ = t.RemoveDir(filepath.FromSlash(d))
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		// The folders the new files go into, each made once, one at a time
		// (a parent may be a link to replace), before the files. A file the
		// pre-restore checkpoint holds has its folder (one removed since
		// fails its write, which verify names).
		var writes []ipChange
		dirs = dirs[:0]
		seen := map[string]bool{}
		for _, c := range ch {
			if c.mode == 0 {
				continue
			}
			writes = append(writes, c)
			if d := path.Dir(c.path); c.add && d != "." && !seen[d] {
				seen[d] = true
				dirs = append(dirs, d)
			}
		}
		slices.Sort(dirs)
		failed := map[string]bool{}
		for _, d := range dirs {
			if err := r.makeDir(t, d); err != nil {
				failed[d] = true // verify names the files not written
			}
		}
		return gitobj.ForEachN(len(writes), restoreWriters, func(i int) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			c := writes[i]
			if failed[path.Dir(c.path)] {
				return nil
			}
			data, err := r.blob(ctx, c.id)
			if err != nil {
				return fmt.Errorf("read %s for %s: %w", c.id, c.path, err)
			}
			rel := filepath.FromSlash(c.path)
			exec := c.mode == gitobj.ModeExec
			switch {
			case c.mode == gitobj.ModeSymlink:
				err = t.ReplaceSymlink(rel, string(data), tag)
			case c.was != nil && !c.was.IsTree() && t.Rewrite(rel, data, exec):
				// A file the pre-restore checkpoint holds, rewritten in
				// the blocks it has (platform.Tree.Rewrite says when).
			case exec:
				err = t.ReplaceFile(rel, data, 0o777, tag)
			default:
				err = t.ReplaceFile(rel, data, 0o666, tag)
			}
			_ = err // a path not written (a folder with files in its place, a link on the way) is verify's to name
			return nil
		})
	})
}

// makeDir makes the folder rel and those above it beneath the work tree,
// never through a link. A symbolic link, FIFO or socket standing where a
// folder goes is removed (the entry itself, never what a link leads to), as
// git's checkout removes it: cairn holds none of them. A regular file there
// is one the pre-restore checkpoint lacks (the kept ones are gone already):
// it stays, and the paths under it are not written.
func (r *ipRestore) makeDir(t *platform.Tree, rel string) error {
	err := t.MkdirAll(filepath.FromSlash(rel), 0o777, -1, -1)
	if err == nil {
		return nil
	}
	parts := strings.Split(rel, "/")
	for i := range parts {
		p := filepath.FromSlash(strings.Join(parts[:i+1], "/"))
		fi, lerr := t.Lstat(p)
		if errors.Is(lerr, fs.ErrNotExist) {
			break
		}
		if lerr != nil {
			return lerr
		}
		if fi.IsDir() {
			continue
		}
		if fi.Mode().IsRegular() {
			return err
		}
		if rerr := t.Remove(p); rerr != nil {
			return rerr
		}
		break
	}
	return t.MkdirAll(filepath.FromSlash(rel), 0o777, -1, -1)
}

// inTheWay lists, deepest first, the kept paths (untracked at the position,
// held by the pre-restore checkpoint, absent from the target) that stand
// where a write must go: one at a folder above a written path, or one
// under a written path.
func (r *ipRestore) inTheWay(ch []ipChange) []string {
	var kept []string
	keptSet := map[string]bool{}
	for _, c := range ch {
		if c.mode == 0 && !c.del {
			kept = append(kept, c.path)
			keptSet[c.path] = true
		}
	}
	if len(kept) == 0 {
		return nil
	}
	slices.Sort(kept)
	way := map[string]bool{}
	for _, c := range ch {
		if c.mode == 0 {
			continue
		}
		for d := path.Dir(c.path); d != "."; d = path.Dir(d) {
			if keptSet[d] {
				way[d] = true
			}
		}
		pre := c.path + "/"
		i, _ := slices.BinarySearch(kept, pre)
		for ; i < len(kept) && strings.HasPrefix(kept[i], pre); i++ {
			way[kept[i]] = true
		}
	}
	out := make([]string, 0, len(way))
	for p := range way {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b string) int { return strings.Compare(b, a) })
	return out
}

// indexAfter brings cairn's index to what the restore wrote: for a whole
// restore on the base the engine recorded, as pending entries (the index
// plus them stand for the target's tree, on which the next in-process seal
// builds); otherwise through one `update-index --index-info`, the engine's
// pending entries first.
func (r *ipRestore) indexAfter(ctx context.Context, before string, ch []ipChange) error {
	s, e := r.s, r.e
	c := e.cache
	if len(r.prefixes) == 0 && c != nil && s.statCacheFresh(c) && c.hdr.Base == before {
		if st, ok := stampFile(s.git.Index); ok && st == c.hdr.Index {
			for _, x := range ch {
				c.setPending(x.path, pendEntry{Mode: x.mode, ID: x.id})
				c.forget(x.path)
			}
			c.hdr.Base = r.tTree
			return s.saveStatCache(c)
		}
	}
	if err := s.inproc.syncIndex(ctx); err != nil {
		return err
	}
	var in bytes.Buffer
	zero := strings.Repeat("0", e.format.HexLen())
	for _, pass := range []bool{true, false} { // removals first
		for _, x := range ch {
			if (x.mode == 0) != pass {
				continue
			}
			if x.mode == 0 && !x.del && len(r.prefixes) > 0 && !r.cleared[x.path] {
				continue // kept on disk: a restore of paths leaves its entry, as git's does
			}
			if x.mode == 0 {
				fmt.Fprintf(&in, "0 %s\t%s\x00", zero, x.path)
			} else {
				fmt.Fprintf(&in, "%o %s\t%s\x00", x.mode, x.id, x.path)
			}
		}
	}
	if in.Len() == 0 {
		return nil
	}
	_, _, err := s.git.runMapped(ctx, in.Bytes(), "update-index", "-z", "--index-info")
	return err
}

// detachHead points the store's HEAD at the target, as the git way's
// `checkout --detach` leaves it (the store's own HEAD, never a user's).
func (r *ipRestore) detachHead(ctx context.Context) error {
	_, err := r.s.git.Run(ctx, nil, "update-ref", "--no-deref", "-m", "cairn: restore to "+r.target, "HEAD", r.target)
	return err
}

// overwritten lists the files on disk at paths the plan adds (the
// pre-restore checkpoint holds nothing there) that the restore would
// overwrite: regular files, not excluded, as addOverwritten stages them.
// unvouched lists the paths the plan overwrites or deletes whose file on
// disk may not be what the pre-restore checkpoint holds there. A restore
// told the watch's dirty set (changed) sealed only those paths: a write the
// watch missed would be overwritten with no checkpoint holding it. Each
// file is vouched for by the stat cache (a settled stamp of that blob) or
// by its content; anything else (another mode, not a regular file, gone,
// unreadable) is listed.
func (r *ipRestore) unvouched(ch []ipChange, changed []string) []string {
	told := make(map[string]bool, len(changed))
	for _, p := range changed {
		told[p] = true
	}
	isTold := func(p string) bool {
		for ; p != "."; p = path.Dir(p) {
			if told[p] {
				return true
			}
		}
		return false
	}
	var ask []ipChange
	for _, c := range ch {
		if c.was != nil && !c.was.IsTree() && c.was.Mode != gitobj.ModeGitlink && (c.del || c.mode != 0) && !isTold(c.path) {
			ask = append(ask, c)
		}
	}
	bad := make([]bool, len(ask))
	for i := range bad {
		bad[i] = true // unless found to hold it
	}
	_ = r.s.withWorkTree(func(t *platform.Tree) error {
		return gitobj.ForEach(len(ask), func(i int) error {
			bad[i] = !r.holds(t, ask[i].path, ask[i].was)
			return nil
		})
	})
	var out []string
	for i, c := range ask {
		if bad[i] {
			out = append(out, c.path)
		}
	}
	return out
}

// holds reports whether the work-tree file rel is blob was, by the stat
// cache or by reading it (t: the work tree, opened once for all of them).
func (r *ipRestore) holds(t *platform.Tree, rel string, was *gitobj.TreeEntry) bool {
	fi, err := t.Lstat(filepath.FromSlash(rel))
	if err != nil || !fi.Mode().IsRegular() {
		return false
	}
	mode := uint32(gitobj.ModeFile)
	if fi.Mode()&0o100 != 0 {
		mode = gitobj.ModeExec
	}
	if mode != was.Mode {
		return false
	}
	if id, ok := r.e.cache.lookup(rel, stampOf(fi), mode); ok {
		return id == was.ID
	}
	f, err := t.OpenRegular(filepath.FromSlash(rel))
	if err != nil {
		return false
	}
	defer f.Close()
	id, exec, err := blobHashOf(f, len(was.ID))
	return err == nil && id == was.ID && exec == (mode == gitobj.ModeExec)
}

// overwritten lists the files on disk the plan ch replaces that the
// pre-restore checkpoint does not hold (ignored, over the size limit,
// written since): a file where the target adds a path or needs a folder,
// and the files in a folder where the target adds a file. A second
// pre-restore checkpoint stages them (stageFiles) before any is replaced;
// the plan is of the restore's paths only, so nothing outside them is
// staged. blocked are the folders where the target adds a file that hold
// what no checkpoint can.
func (r *ipRestore) overwritten(ch []ipChange) (out, blocked []string) {
	held := map[string]bool{} // what the pre-restore checkpoint holds and the target lacks
	for _, c := range ch {
		if c.mode == 0 {
			held[c.path] = true
		}
	}
	folders, seen := map[string]bool{}, map[string]bool{}
	for _, c := range ch {
		if !c.add {
			continue
		}
		// A folder that holds what no checkpoint can stays as it is, and
		// verify names the path not written (blocked: git's way, should
		// the restore fall back to it, would remove it).
		in, block := r.s.standingAt(c.path, folders)
		if block {
			blocked = append(blocked, c.path)
		}
		for _, p := range in {
			if held[p] || seen[p] || Excluded(p) {
				continue
			}
			seen[p] = true
			out = append(out, p)
		}
	}
	return out, blocked
}
