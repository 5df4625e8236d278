package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/cairn-dev/cairn/platform"
	"github.com/cairn-dev/cairn/restore/ckpt"
	"github.com/cairn-dev/cairn/snapshot/gitobj"
)

// inproc is the in-process engine for one store, from its start to the
// store dropping it, with the state it keeps between seals: the stat
// cache, the tree cache, the check-ignore and cat-file processes and the
// objects known stored (docs/engine.md, "The seam"). inprocState holds it.
type inproc struct {
	s    *Store
	home *inprocState // what holds it, and answers for the index it shares with git
	// broken is set when a pack the seal gathered could not be written:
	// the store drops the engine once the seal returns, so the next one
	// starts again from what was saved.
	broken bool
	format gitobj.Format
	db     *gitobj.DB
	batch  *gitobj.Batch // the new objects of the seal under way, written as one pack
	// fresh are the trees the seal under way made: only in its batch until
	// it is written, so kept here whatever the tree cache drops meanwhile.
	fresh   map[string][]gitobj.TreeEntry
	ident   string // "Name <email>", as git would write it
	logAll  string // core.logAllRefUpdates
	cfg     [4]fileStamp
	cfgOK   bool
	cache   *statCache
	index   *parsedIndex // cairn's index as last parsed (loadIndex)
	trees   treeCache
	commits map[string]string // commit → its tree
	ign     *ignoreChecker
	// ignSrc are the ignore files the checker may have read, by folder, as
	// they were when it was asked about a path under them: one that is no
	// longer the same file (edited, replaced, its folder swapped, gone)
	// restarts the checker, which would answer from the old rules.
	ignSrc map[string]ignoreSource
	cat    *catFile
	empty  string // the empty tree's id
	// known answers whether an object is stored; whole holds the trees
	// whose every object was found stored, under the packs known has seen
	// (cleared when one is gone or changed). A seal names no object
	// without either (inproc.vouch).
	known *gitobj.Known
	whole map[string]bool
	// The work tree's timestamp granularities, learned from its own times
	// (settled).
	mgrain, cgrain *grain
	// excludes is core.excludesFile: ignore rules from a file the engine
	// does not watch (a full seal then asks git about every path).
	excludes string
}

// ignoreSource is what an ignore file was: its stamp and file system, or absent.
// A racy one was stamped too soon after it was written for its stamp to
// tell a later rewrite apart (settled): on a file system with 1-second
// times, an ignore file rewritten in place with as many bytes within the
// second keeps every field.
type ignoreSource struct {
	fileStamp
	dev     uint64
	present bool
	racy    bool
}

// stampIgnore stamps the ignore file at path; readAt is cairn's clock,
// taken before the stamp (the checker reads the file after it).
func (e *inproc) stampIgnore(path string, readAt int64) ignoreSource {
	fi, err := os.Lstat(path)
	if err != nil {
		return ignoreSource{}
	}
	st := stampOf(fi)
	return ignoreSource{fileStamp: st, dev: device(fi), present: true, racy: !settled(st, readAt, e.mgrain, e.cgrain)}
}

// sameIgnore reports whether the checker's rules from an ignore file
// stamped was still hold for one stamped now: only a settled stamp vouches.
func sameIgnore(was, now ignoreSource) bool {
	return !was.racy && was == now
}

// rollUpEvery is how many small packs of whole objects the in-process
// engine lets a store hold before it merges them (gitobj.DB.RollUp), a seal
// writing one: git looks in every pack's index for an object.
const rollUpEvery = 16

// treeCacheMax bounds the tree entries kept in memory between seals (a
// variable for tests).
var treeCacheMax = 200_000

// treeCache holds parsed trees in two generations: when the young one is
// full it becomes the old one, and a tree found old is moved young. The
// trees in use stay (a full cache never drops them all at once, which
// would make the next seal read every tree along its paths from disk).
type treeCache struct {
	young, old map[string][]gitobj.TreeEntry
	n          int // entries in young
}

func (c *treeCache) get(id string) ([]gitobj.TreeEntry, bool) {
	if t, ok := c.young[id]; ok {
		return t, true
	}
	t, ok := c.old[id]
	if ok {
		c.put(id, t)
	}
	return t, ok
}

// drop forgets trees: the versions a seal replaced, which only a base that
// went back in time would read again (from the store, then).
func (c *treeCache) drop(ids []string) {
	for _, id := range ids {
		if t, ok := c.young[id]; ok {
			delete(c.young, id)
			c.n -= len(t) + 1
		}
		delete(c.old, id)
	}
}

func (c *treeCache) put(id string, t []gitobj.TreeEntry) {
	if c.young == nil || c.n+len(t) > treeCacheMax/2 {
		c.old, c.young, c.n = c.young, map[string][]gitobj.TreeEntry{}, 0
	}
	c.young[id] = t
	c.n += len(t) + 1
}

// close stops the engine's git processes; its state stays.
func (e *inproc) close() {
	e.stopIgnore()
	e.cat.stop()
	e.cat = nil
	if e.known != nil {
		e.known.Release()
	}
}

// sealed keeps the stat cache small once a checkpoint is recorded: past
// pendingSyncMax pending entries, git's index takes them now.
func (e *inproc) sealed(ctx context.Context) {
	if len(e.cache.pending) > pendingSyncMax {
		if serr := e.home.syncIndex(ctx); serr != nil {
			zerologCtx(ctx).Warn().Err(serr).Msg("writing the in-process engine's entries into the index failed")
		}
	}
}

// stopIgnore stops the ignore checker and forgets what it read.
func (e *inproc) stopIgnore() {
	e.ign.stop()
	e.ign = nil
	e.ignSrc = nil
}

// ignoreChanged reports whether an ignore file the checker may have read
// for a path among files is no longer the file it read, noting the ones it
// will read now. The sources are stamped before the checker is asked, so a
// file changed after the stamp shows as a change at the next seal.
func (e *inproc) ignoreChanged(workTree string, files []string) bool {
	if e.ignSrc == nil {
		e.ignSrc = map[string]ignoreSource{}
	}
	seen := map[string]bool{}
	changed := false
	readAt := time.Now().UnixNano()
	for _, f := range files {
		for dir := path.Dir(f); ; dir = path.Dir(dir) {
			if dir == "." {
				dir = ""
			}
			if seen[dir] {
				break
			}
			seen[dir] = true
			now := e.stampIgnore(filepath.Join(workTree, filepath.FromSlash(dir), ".gitignore"), readAt)
			if was, ok := e.ignSrc[dir]; ok && !sameIgnore(was, now) {
				changed = true
			}
			e.ignSrc[dir] = now
			if dir == "" {
				break
			}
		}
	}
	return changed
}

// cfgFiles are the files whose change may change what git would do: the
// store's config, the identity's .gitconfig, and the ignore files git reads
// once (info/exclude, the user's global excludes).
func (s *Store) cfgFiles() [4]string {
	return [4]string{filepath.Join(s.gitDir, "config"), filepath.Join(s.home, ".gitconfig"),
		filepath.Join(s.gitDir, "info", "exclude"), filepath.Join(s.home, "git", "ignore")}
}

// readObject reads an object: without git when it can (readHere), else
// through the engine's cat-file (readByGit).
func (e *inproc) readObject(ctx context.Context, s *Store, id string) (string, []byte, error) {
	if typ, data, err := e.readHere(id); !errors.Is(err, gitobj.ErrNotFound) {
		return typ, data, err
	}
	return e.readByGit(ctx, s, id)
}

// readHere reads id without git: a packed object from the packs the engine
// knows (gitobj.Known.ReadPacked; most of a store's objects are packed, and
// a look for a loose file first would be a failed open each), else a loose
// one, each checked against its id. gitobj.ErrNotFound means git is to be
// asked: an object in a pack the engine has not seen, or one it could not
// read exactly, is git's to find or to name as damaged.
func (e *inproc) readHere(id string) (string, []byte, error) {
	if e.known != nil {
		if typ, data, err := e.known.ReadPacked(id); err == nil {
			return typ, data, nil
		}
	}
	return e.db.Read(id)
}

// errNotItsID is an object git gave whose content does not hash to its id.
var errNotItsID = errors.New("content does not match its id")

// readByGit reads id through the engine's cat-file, started if need be,
// and checks the answer against its id.
func (e *inproc) readByGit(ctx context.Context, s *Store, id string) (string, []byte, error) {
	var err error
	if e.cat == nil {
		if e.cat, err = startCatFile(s.git); err != nil {
			return "", nil, err
		}
	}
	typ, data, err := e.cat.read(ctx, id)
	if err != nil && !errors.Is(err, errMissing) {
		e.cat.stop()
		e.cat = nil
	}
	if err == nil && e.format.Hash(typ, data) != id {
		err = errNotItsID
	}
	return typ, data, err
}

// packedBatch is how many objects readPacked asks cat-file for in one
// exchange: each exchange has coprocTimeout to finish.
const packedBatch = 128

// readPacked reads ids (objects readHere could not read) through the
// engine's cat-file, streamed in batches rather than one round trip each,
// and calls fn with each in order, checked against its id: an object git
// cannot read (git stops there) gets the error, and the rest go to a new
// cat-file, as readObject retries.
func (e *inproc) readPacked(ctx context.Context, s *Store, ids []string, fn func(i int, typ string, data []byte, err error)) error {
	answer := fn
	fn = func(i int, typ string, data []byte, err error) {
		if err == nil && e.format.Hash(typ, data) != ids[i] {
			err = errNotItsID
		}
		answer(i, typ, data, err)
	}
	for start := 0; start < len(ids); {
		if err := ctx.Err(); err != nil {
			return err
		}
		if e.cat == nil {
			var err error
			if e.cat, err = startCatFile(s.git); err != nil {
				fn(start, "", nil, err)
				start++
				continue
			}
		}
		end := min(start+packedBatch, len(ids))
		n, err := e.cat.readMany(ctx, ids[start:end], func(j int, typ string, data []byte, err error) {
			fn(start+j, typ, data, err)
		})
		asked := end - start
		start += n
		if err == nil {
			continue
		}
		e.cat.stop()
		e.cat = nil
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if n < asked { // not a failed write after every answer came
			fn(start, "", nil, err)
			start++
		}
	}
	return nil
}

func (e *inproc) tree(ctx context.Context, s *Store, id string) ([]gitobj.TreeEntry, error) {
	if t, ok := e.cachedTree(id); ok {
		return t, nil
	}
	typ, data, err := e.readObject(ctx, s, id)
	if err != nil {
		return nil, fmt.Errorf("tree %s: %w", id, err)
	}
	if typ != "tree" {
		return nil, fmt.Errorf("object %s is a %s, not a tree", id, typ)
	}
	t, err := gitobj.ParseTree(data, e.format)
	if err != nil {
		return nil, fmt.Errorf("tree %s: %w", id, err)
	}
	e.cacheTree(id, t)
	return t, nil
}

// prefetchDiff reads, on every core, the trees a walk of what differs from
// tree a to tree b will read (folders for which relevant says false are not
// entered), level by level, into the tree cache; the walk then finds them
// there. What cannot be read here (a tree cat-file must read, a damaged
// one) is left for the walk, which reads it (and reports it) as before. A
// cancelled ctx stops it at the next level (the walk then says so).
func (e *inproc) prefetchDiff(ctx context.Context, a, b string, relevant func(dir string) bool) {
	type pair struct{ a, b, dir string }
	level := []pair{{a, b, ""}}
	for len(level) > 0 && ctx.Err() == nil {
		var ids []string
		for _, p := range level {
			for _, id := range [2]string{p.a, p.b} {
				if id == "" || id == e.empty {
					continue
				}
				if _, ok := e.fresh[id]; ok {
					continue
				}
				if _, ok := e.trees.get(id); !ok {
					ids = append(ids, id)
				}
			}
		}
		got := make([][]gitobj.TreeEntry, len(ids))
		_ = gitobj.ForEach(len(ids), func(i int) error {
			typ, data, err := e.readHere(ids[i])
			if err != nil || typ != "tree" {
				return nil
			}
			if t, err := gitobj.ParseTree(data, e.format); err == nil {
				got[i] = t
			}
			return nil
		})
		for i, t := range got {
			if t != nil {
				e.cacheTree(ids[i], t)
			}
		}
		var next []pair
		for _, p := range level {
			ta, aok := e.cachedTree(p.a)
			tb, bok := e.cachedTree(p.b)
			if !aok || !bok {
				continue // the walk reads it, and says why it cannot
			}
			prefix := p.dir
			if prefix != "" {
				prefix += "/"
			}
			add := func(x, y string, name string) {
				if x != y && relevant(prefix+name) {
					next = append(next, pair{x, y, prefix + name})
				}
			}
			_ = gitobj.MergeEntries(ta, tb, func(x, y *gitobj.TreeEntry) error {
				switch {
				case y == nil:
					if x.IsTree() {
						add(x.ID, "", x.Name)
					}
				case x == nil:
					if y.IsTree() {
						add("", y.ID, y.Name)
					}
				case x.IsTree():
					add(x.ID, y.ID, x.Name)
				}
				return nil
			})
		}
		level = next
	}
}

// cachedTree is tree id when it is held (no read): "" and the empty tree
// are held, empty.
func (e *inproc) cachedTree(id string) ([]gitobj.TreeEntry, bool) {
	if id == "" || id == e.empty {
		return nil, true
	}
	if t, ok := e.fresh[id]; ok {
		return t, true
	}
	return e.trees.get(id)
}

func (e *inproc) cacheTree(id string, t []gitobj.TreeEntry) {
	e.trees.put(id, t)
}

// commitTree returns the tree of a commit, errMissing when the store lacks it.
func (e *inproc) commitTree(ctx context.Context, s *Store, id string) (string, error) {
	if t, ok := e.commits[id]; ok {
		return t, nil
	}
	typ, data, err := e.readObject(ctx, s, id)
	if err != nil {
		return "", err
	}
	if typ != "commit" {
		return "", fmt.Errorf("object %s is a %s, not a commit", id, typ)
	}
	t, err := gitobj.CommitTree(data)
	if err != nil {
		return "", fmt.Errorf("commit %s: %w", id, err)
	}
	if len(e.commits) > 1024 {
		clear(e.commits)
	}
	e.commits[id] = t
	return t, nil
}

// entryAt finds the entry at a slash-separated path under tree root.
func (e *inproc) entryAt(ctx context.Context, s *Store, root, rel string) (*gitobj.TreeEntry, error) {
	cur := gitobj.TreeEntry{Mode: gitobj.ModeTree, ID: root}
	for _, c := range strings.Split(rel, "/") {
		if !cur.IsTree() {
			return nil, nil
		}
		t, err := e.tree(ctx, s, cur.ID)
		if err != nil {
			return nil, err
		}
		i := slices.IndexFunc(t, func(x gitobj.TreeEntry) bool { return x.Name == c })
		if i < 0 {
			return nil, nil
		}
		cur = t[i]
	}
	return &cur, nil
}

// walkBlobs calls fn for every non-tree entry under tree id, by full path.
func (e *inproc) walkBlobs(ctx context.Context, s *Store, id, prefix string, fn func(string, gitobj.TreeEntry)) error {
	t, err := e.tree(ctx, s, id)
	if err != nil {
		return err
	}
	for _, x := range t {
		p := prefix + x.Name
		if x.IsTree() {
			if err := e.walkBlobs(ctx, s, x.ID, p+"/", fn); err != nil {
				return err
			}
			continue
		}
		fn(p, x)
	}
	return nil
}

// diff calls fn for each path whose entry differs from tree a to tree b
// (either may be ""), as `diff-tree -r` lists them: old or new nil for a
// path added or removed; a file replaced by a folder is a removal and additions.
func (e *inproc) diff(ctx context.Context, s *Store, a, b, prefix string, fn func(p string, old, new *gitobj.TreeEntry)) error {
	if a == b {
		return nil
	}
	ta, err := e.tree(ctx, s, a)
	if err != nil {
		return err
	}
	tb, err := e.tree(ctx, s, b)
	if err != nil {
		return err
	}
	side := func(x gitobj.TreeEntry, removed bool) error {
		p := prefix + x.Name
		if x.IsTree() {
			if removed {
				return e.diff(ctx, s, x.ID, "", p+"/", fn)
			}
			return e.diff(ctx, s, "", x.ID, p+"/", fn)
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
			return e.diff(ctx, s, x.ID, y.ID, prefix+x.Name+"/", fn)
		case x.ID != y.ID || x.Mode != y.Mode:
			fn(prefix+x.Name, x, y)
		}
		return nil
	})
}

// edit is what a staging does to one path: remove its entry (if it is not a
// folder), or set it to a blob, replacing whatever stands in the way.
type edit struct {
	del  bool
	mode uint32
	id   string
}

type editNode struct {
	leaf *edit
	kids map[string]*editNode
}

func (n *editNode) hasAdd() bool {
	if n.leaf != nil && !n.leaf.del {
		return true
	}
	for _, k := range n.kids {
		if k.hasAdd() {
			return true
		}
	}
	return false
}

// rebuild applies edits to tree root, writing only the trees along edited
// paths, and returns the new root and the trees it replaced. The trees are
// built first, then written together (gitobj.DB.WriteAll).
func (e *inproc) rebuild(ctx context.Context, s *Store, root string, edits map[string]edit) (string, []string, error) {
	top := &editNode{}
	for p, ed := range edits {
		n := top
		for _, c := range strings.Split(p, "/") {
			if n.kids == nil {
				n.kids = map[string]*editNode{}
			}
			k := n.kids[c]
			if k == nil {
				k = &editNode{}
				n.kids[c] = k
			}
			n = k
		}
		n.leaf = &ed
	}
	nt := newTrees{entries: map[string][]gitobj.TreeEntry{}}
	id, err := e.editTree(ctx, s, root, top, &nt)
	if err != nil {
		return "", nil, err
	}
	if err := e.batch.WriteAll(nt.objs); err != nil {
		return "", nil, err
	}
	for id, t := range nt.entries {
		e.cacheTree(id, t)
	}
	e.fresh = nt.entries
	if id == "" { // nothing left: git writes the empty tree
		id, err = e.batch.Write("tree", nil)
	}
	// A replaced tree may stand elsewhere in the new one too (two folders
	// alike): those stay.
	replaced := slices.DeleteFunc(nt.replaced, func(r string) bool { _, ok := nt.entries[r]; return ok || r == id })
	return id, replaced, err
}

// newTrees are the trees a rebuild made, to be written and cached.
type newTrees struct {
	objs     []gitobj.Object
	entries  map[string][]gitobj.TreeEntry
	replaced []string // trees of the base that new ones replace
}

// editTree returns the id of tree id with n's edits applied ("" when empty),
// adding the trees it makes to nt.
func (e *inproc) editTree(ctx context.Context, s *Store, id string, n *editNode, nt *newTrees) (string, error) {
	old, err := e.tree(ctx, s, id)
	if err != nil {
		return "", err
	}
	entries := slices.Clone(old)
	at := func(name string) int {
		return slices.IndexFunc(entries, func(x gitobj.TreeEntry) bool { return x.Name == name })
	}
	changed := false
	names := make([]string, 0, len(n.kids))
	for name := range n.kids {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		k := n.kids[name]
		i := at(name)
		kidAdds := false
		for _, kk := range k.kids {
			kidAdds = kidAdds || kk.hasAdd()
		}
		if k.leaf != nil && !k.leaf.del && !kidAdds {
			x := gitobj.TreeEntry{Mode: k.leaf.mode, Name: name, ID: k.leaf.id}
			if i >= 0 {
				if entries[i] != x {
					entries[i], changed = x, true
				}
			} else {
				entries, changed = append(entries, x), true
			}
			continue
		}
		if k.leaf != nil && k.leaf.del && i >= 0 && !entries[i].IsTree() {
			entries = slices.Delete(entries, i, i+1)
			i, changed = -1, true
		}
		if len(k.kids) == 0 {
			continue
		}
		sub := ""
		switch {
		case k.leaf != nil && !k.leaf.del: // a file and files under its name at once: git's --replace keeps the latter
		case i >= 0 && entries[i].IsTree():
			sub = entries[i].ID
		case !kidAdds:
			continue // nothing under a file or nothing at all: the removals find nothing
		}
		nid, err := e.editTree(ctx, s, sub, &editNode{kids: k.kids}, nt)
		if err != nil {
			return "", err
		}
		switch {
		case nid == "" && i >= 0:
			entries = slices.Delete(entries, i, i+1)
			changed = true
		case nid == "":
		case i >= 0:
			x := gitobj.TreeEntry{Mode: gitobj.ModeTree, Name: name, ID: nid}
			if entries[i] != x {
				entries[i], changed = x, true
			}
		default:
			entries, changed = append(entries, gitobj.TreeEntry{Mode: gitobj.ModeTree, Name: name, ID: nid}), true
		}
	}
	if !changed {
		if len(entries) == 0 {
			return "", nil
		}
		return id, nil
	}
	if len(entries) == 0 {
		if id != "" {
			nt.replaced = append(nt.replaced, id)
		}
		return "", nil
	}
	data, err := gitobj.EncodeTree(entries, e.format)
	if err != nil {
		return "", err
	}
	nid := e.format.Hash("tree", data)
	if id != "" && id != nid {
		nt.replaced = append(nt.replaced, id)
	}
	if _, dup := nt.entries[nid]; !dup {
		nt.entries[nid] = entries
		nt.objs = append(nt.objs, gitobj.Object{ID: nid, Type: "tree", Data: data})
	}
	return nid, nil
}

// inprocPlan is the in-process engine's planSource: its base tree, and the
// long-running check-ignore.
type inprocPlan struct {
	s    *Store
	e    *inproc
	base string
}

func (ip inprocPlan) trackedUnder(ctx context.Context, paths []string) ([]string, error) {
	var out []string
	for _, p := range paths {
		x, err := ip.e.entryAt(ctx, ip.s, ip.base, p)
		if err != nil {
			return nil, err
		}
		switch {
		case x == nil:
		case x.IsTree():
			if err := ip.e.walkBlobs(ctx, ip.s, x.ID, p+"/", func(q string, _ gitobj.TreeEntry) { out = append(out, q) }); err != nil {
				return nil, err
			}
		default:
			out = append(out, p)
		}
	}
	return out, nil
}

func (ip inprocPlan) considerUnignored(ctx context.Context, p *stagePlan, sel *Selector, files []string, links *linkCache) error {
	s, e := ip.s, ip.e
	var ask []string
	restart := false
	for _, f := range files {
		if !links.underLink(s, f) {
			ask = append(ask, f)
		}
		restart = restart || path.Base(f) == ".gitignore"
	}
	if restart { // it read the old rules
		e.stopIgnore()
	}
	if e.ignoreChanged(s.workTree, ask) && e.ign != nil {
		// An ignore file it read was edited, replaced or removed (a folder
		// holding a self-ignoring one swapped for another): the rules it
		// holds are not the disk's. The stamps just taken are kept: they
		// are what the new checker reads.
		e.ign.stop()
		e.ign = nil
	}
	if len(ask) > 0 && e.ign == nil {
		ic, err := startIgnoreChecker(s.git)
		if err != nil {
			return fmt.Errorf("%w: %v", errFallback, err)
		}
		e.ign = ic
	}
	ign := e.ign
	// A few paths (a seal's usual lot): git answers while they are read,
	// and inproc.seal drops the ignored ones (ignoredNow).
	err := s.considerAsked(p, sel, files, links, func() (map[string]bool, error) {
		if len(ask) == 0 {
			return map[string]bool{}, nil
		}
		return ign.ignored(ctx, ask)
	})
	if err != nil {
		e.stopIgnore()
		return fmt.Errorf("%w: check-ignore: %v", errFallback, err)
	}
	return nil
}

// hashed is a file as the in-process engine read it.
type hashed struct {
	gone   bool   // missing (or no longer a file) when read
	mode   uint32 // 100644 or 100755
	id     string
	reason string // could not be read: the issue's reason
}

// hashJob is one file to store, and what reading it found.
type hashJob struct {
	rel    string
	h      hashed
	st     fileStamp
	read   bool  // read now, not vouched for by the stat cache: remember it
	readAt int64 // when it was opened, by cairn's clock
}

// hashFiles stores the blobs of work-tree files, several at once (most of a
// small file's time is opening, creating and renaming files), and notes
// those it read in the stat cache.
func (e *inproc) hashFiles(rels []string) []hashJob {
	jobs := make([]hashJob, len(rels))
	for i, rel := range rels {
		jobs[i].rel = rel
	}
	gitobj.ForEach(len(jobs), func(i int) error { e.hashFile(&jobs[i]); return nil })
	for _, j := range jobs {
		switch {
		case j.read && settled(j.st, j.readAt, e.mgrain, e.cgrain):
			e.cache.remember(j.rel, j.st, j.h.mode, j.h.id)
		case j.read:
			e.cache.forget(j.rel) // too young to vouch for: read again next time
		}
	}
	return jobs
}

// hashFile stores the blob of a work-tree file (or finds it in the stat
// cache). It only reads the stat cache: hashFiles runs it from several
// goroutines.
func (e *inproc) hashFile(j *hashJob) {
	s := e.s
	for attempt := 0; ; attempt++ {
		readAt := time.Now().UnixNano()
		f, err := s.openWork(j.rel)
		if err != nil {
			if errors.Is(err, platform.ErrThroughLink) {
				// A folder on its way is a link now (swapped while the
				// seal ran): named, never read.
				j.h = hashed{reason: throughLinkReason}
				return
			}
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, platform.ErrSymlink) || errors.Is(err, platform.ErrNotRegular) {
				j.h = hashed{gone: true}
				return
			}
			j.h = hashed{reason: gitOpenReason(j.rel, err)}
			return
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			j.h = hashed{reason: err.Error()}
			return
		}
		mode := uint32(gitobj.ModeFile)
		if fi.Mode()&0o100 != 0 {
			mode = gitobj.ModeExec
		}
		st := stampOf(fi)
		e.mgrain.see(st.Mtime)
		e.cgrain.see(st.Ctime)
		if id, ok := e.cache.lookup(j.rel, st, mode); ok && e.has(id) {
			f.Close()
			j.h = hashed{mode: mode, id: id}
			return
		}
		id, err := e.batch.WriteBlobFrom(f, fi.Size())
		f.Close()
		if errors.Is(err, gitobj.ErrChanged) && attempt < 2 {
			continue
		}
		if errors.Is(err, gitobj.ErrChanged) {
			j.h = hashed{reason: "changed while the checkpoint was sealed"}
			return
		}
		if err != nil {
			j.h = hashed{reason: err.Error()}
			return
		}
		j.h, j.st, j.read, j.readAt = hashed{mode: mode, id: id}, st, true, readAt
		return
	}
}

// releasePacks restarts cat-file (git never forgets a pack it opened: it
// would hold the ones a repack removed, and their space) and has Known look
// at the packs again.
func (e *inproc) releasePacks() {
	if e.cat != nil {
		e.cat.stop()
		e.cat = nil
	}
	if e.known != nil {
		e.refreshKnown()
	}
}

// flushBatch writes the seal's in-memory batch (the trees and commit of a
// seal on the base), if there is one.
func (e *inproc) flushBatch() error {
	if e.batch == nil || e.batch.Len() == 0 {
		return nil
	}
	pack, err := e.batch.Flush()
	if err != nil {
		e.broken = true
		return err
	}
	// Trees found whole may name what it holds: known sees it now, so that
	// its removal before the next seal is seen as a loss.
	e.known.AddPack(pack)
	return nil
}

// has reports whether object id is stored, or in the seal's pack.
func (e *inproc) has(id string) bool {
	return e.batch != nil && e.batch.Has(id) || e.known.Has(id)
}

// errMissingObject means an object a seal would name is not stored (a
// foreign prune or repack, a damaged or deleted pack): nothing cairn caches
// about the store can be trusted, and the seal goes the slow, exact way.
type errMissingObject struct{ id, what string }

func (e *errMissingObject) Error() string {
	return fmt.Sprintf("object %s (%s) is missing from the store", e.id, e.what)
}

// wholeWitnessLoose bounds the loose objects a stat cache's witness of a
// whole tree names; past it, none is written (a new engine checks the
// tree itself).
const wholeWitnessLoose = 64

// wholeFromCache takes the stat cache's base as whole when the cache says
// it was found whole and everything the store held then is still stored,
// as the engine that found it would if it had looked again (refreshKnown).
// A new engine (`cairn restore` or `cairn checkpoint` with no daemon) then
// does not rebuild or walk every tree of it. The caller refreshed known.
func (e *inproc) wholeFromCache() {
	h := e.cache.hdr
	if h.Base == "" || e.whole[h.Base] || h.Whole == nil || h.Whole.Tree != h.Base {
		return
	}
	if e.known.Holds(h.Whole.Witness) {
		e.whole[h.Base] = true
	}
}

// wholeMax bounds the trees remembered as whole: past it they are checked
// again from the root at the next seal.
const wholeMax = 1 << 20

// vouch checks that every object tree id names is stored or in the seal's
// pack, so the checkpoint never points at a missing object. A tree found
// whole before (under the packs seen since) is not walked again; in a tree
// the seal made, only the entries that differ from was (its version in the
// base, when that was whole) are checked.
func (e *inproc) vouch(ctx context.Context, s *Store, id, was, at string) error {
	if id == "" || id == e.empty || e.whole[id] {
		return nil
	}
	if !e.has(id) {
		return &errMissingObject{id, "tree " + at}
	}
	t, err := e.tree(ctx, s, id)
	if err != nil {
		return err
	}
	var before map[string]gitobj.TreeEntry
	if was != "" && e.whole[was] {
		if bt, err := e.tree(ctx, s, was); err == nil {
			before = make(map[string]gitobj.TreeEntry, len(bt))
			for _, x := range bt {
				before[x.Name] = x
			}
		}
	}
	for _, x := range t {
		b, inBefore := before[x.Name]
		if inBefore && b == x {
			continue
		}
		switch {
		case x.IsTree():
			prev := ""
			if inBefore && b.IsTree() {
				prev = b.ID
			}
			if err := e.vouch(ctx, s, x.ID, prev, at+x.Name+"/"); err != nil {
				return err
			}
		case x.Mode == gitobj.ModeGitlink: // a commit of another repository: not stored here
		case !e.has(x.ID):
			return &errMissingObject{x.ID, "blob " + at + x.Name}
		}
	}
	if len(e.whole) >= wholeMax {
		clear(e.whole)
	}
	e.whole[id] = true
	return nil
}

// ignoredNow takes check-ignore's answer, if it was left to come while the
// files were read, and turns the ignored paths into removals, dropping what
// was noted about them (as the git engine's dropIgnored does).
func (e *inproc) ignoredNow(p *stagePlan, edits map[string]edit) error {
	if p.ignored == nil {
		return nil
	}
	ig, err := p.ignored()
	p.ignored = nil
	if err != nil {
		e.stopIgnore()
		return fmt.Errorf("%w: check-ignore: %v", errFallback, err)
	}
	if len(ig) == 0 {
		return nil
	}
	for f := range ig {
		edits[f] = edit{del: true}
	}
	keep := func(v []ckpt.PathIssue) []ckpt.PathIssue {
		return slices.DeleteFunc(v, func(is ckpt.PathIssue) bool { return ig[is.Path] })
	}
	p.issues, p.skipped = keep(p.issues), keep(p.skipped)
	return nil
}

// gitOpenReason words an open failure as git's update-index does.
func gitOpenReason(rel string, err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	msg := err.Error()
	if msg != "" {
		msg = strings.ToUpper(msg[:1]) + msg[1:]
	}
	return fmt.Sprintf("open(%q): %s", rel, msg)
}

// seal is an incremental seal by the in-process engine (docs/engine.md, "How
// a seal works"). errFallback before anything is written means the git engine
// must seal the request.
func (e *inproc) seal(ctx context.Context, j *sealJob) (sealOutcome, error) {
	s, req, rec, sel, parent, oldTip, now := e.s, j.req, j.rec, j.sel, j.parent, j.oldTip, j.now
	var sha string
	var counts [3]int
	for _, c := range req.Changed {
		if path.Base(c) == ".gitignore" {
			// Ignore rules moved: this seal is git's, and the checker,
			// which read the old rules, starts again for the next one.
			e.stopIgnore()
			return sealOutcome{}, errFallback
		}
	}
	base := e.cache.hdr.Base
	// What the store holds: a pack gone or changed, or a loose object
	// removed, since the last seal makes every tree checked again.
	e.refreshKnown()
	e.wholeFromCache()
	// New objects are gathered and written as one pack before the stat
	// cache is saved and the ref moves. The caches may name them sooner (a
	// new tree is cached as it is made): a seal that ends early writes what
	// it gathered, and one whose pack could not be written drops the engine,
	// so the next seal starts again from what was saved.
	e.batch = e.db.Batch()
	flush := e.flushBatch
	defer func() {
		_ = flush() // an error marks the engine broken
		e.batch, e.fresh = nil, nil
	}()
	// The parent and its tree must be there, or nothing is sealed on top.
	ptree, err := e.commitTree(ctx, s, parent)
	if errors.Is(err, errMissing) {
		return sealOutcome{}, s.damaged("the parent checkpoint " + parent)
	} else if err != nil {
		return sealOutcome{}, err
	}
	if _, err := e.tree(ctx, s, ptree); errors.Is(err, errMissing) {
		return sealOutcome{}, s.damaged("the tree of the parent checkpoint " + parent)
	} else if err != nil {
		return sealOutcome{}, err
	}
	if _, err := e.tree(ctx, s, base); err != nil {
		return sealOutcome{}, fmt.Errorf("%w: base tree: %v", errFallback, err)
	}

	p, err := s.planPaths(ctx, inprocPlan{s: s, e: e, base: base}, sel, req.Changed)
	if err != nil {
		return sealOutcome{}, err
	}
	// An answer of check-ignore still under way is awaited however the seal ends.
	defer func() {
		if p.ignored != nil {
			if _, err := p.ignored(); err != nil {
				e.stopIgnore() // its answers may be out of step with its questions now
			}
		}
	}()
	edits := map[string]edit{}
	for _, r := range p.remove {
		edits[r] = edit{del: true}
	}
	for _, g := range p.gone {
		edits[g] = edit{del: true}
	}
	// Each file is read; one that changed meanwhile is read again, twice,
	// then named (as the git engine's applyPlan does).
	todo := slices.Clone(p.add)
	sort.Strings(todo)
	if hook := beforeHashHook(); hook != nil {
		// The test's moment comes once check-ignore has answered (it
		// refuses a path beyond a link, which sends the seal to git).
		if err := e.ignoredNow(p, edits); err != nil {
			return sealOutcome{}, err
		}
		hook()
	}
	for attempt := 0; len(todo) > 0; attempt++ {
		jobs := e.hashFiles(todo)
		for _, j := range jobs {
			rel, h := j.rel, j.h
			switch {
			case h.reason != "":
				p.issues = append(p.issues, ckpt.PathIssue{Path: rel, Reason: h.reason})
				delete(edits, rel) // its entry stays as it was
				delete(p.stat, rel)
			case h.gone:
				edits[rel] = edit{del: true}
			default:
				edits[rel] = edit{mode: h.mode, id: h.id}
			}
		}
		todo = s.changedSinceRead(p, todo, attempt == 2)
		for _, rel := range todo {
			e.cache.forget(rel) // its cached stat no longer vouches for it
		}
	}
	if err := e.ignoredNow(p, edits); err != nil {
		return sealOutcome{}, err
	}
	faultPoint("blob-written")
	sortIssues(p.issues)
	sortIssues(p.skipped)
	rec.Issues, rec.Skipped = dedupeIssues(p.issues), dedupeIssues(p.skipped)

	tree, replaced, err := e.rebuild(ctx, s, base, edits)
	if err != nil {
		return sealOutcome{}, err
	}
	// Every object the new tree names is stored or in this seal's pack.
	if err := e.vouch(ctx, s, tree, base, ""); err != nil {
		return sealOutcome{}, err
	}
	faultPoint("tree-written")

	// The index now stands for tree plus the entries it lacks. The record's
	// counts compare with the parent's tree: the same walk when the base is
	// that tree, as it is after a seal by either engine.
	count := func(old, nw *gitobj.TreeEntry) {
		switch {
		case old == nil:
			counts[0]++
		case nw == nil:
			counts[2]++
		default:
			counts[1]++
		}
	}
	// The pending entries change only once both walks are done: a walk
	// that fails leaves the cache standing for the base it had.
	type pend struct {
		path string
		p    pendEntry
	}
	var pending []pend
	if err := e.diff(ctx, s, base, tree, "", func(q string, old, nw *gitobj.TreeEntry) {
		if nw == nil {
			pending = append(pending, pend{q, pendEntry{}})
		} else {
			pending = append(pending, pend{q, pendEntry{Mode: nw.Mode, ID: nw.ID}})
		}
		if base == ptree {
			count(old, nw)
		}
	}); err != nil {
		return sealOutcome{}, err
	}
	if base != ptree {
		if err := e.diff(ctx, s, ptree, tree, "", func(_ string, old, nw *gitobj.TreeEntry) { count(old, nw) }); err != nil {
			return sealOutcome{}, err
		}
	}
	for _, p := range pending {
		e.cache.setPending(p.path, p.p)
	}
	// The versions the new trees replaced are read no more (the diffs above
	// were their last use): kept, they would make the cache a history.
	if tree != base {
		e.trees.drop(replaced)
	}
	e.cache.hdr.Base = tree
	// The stat cache is saved once the objects it names are written (a
	// process killed between the two must not leave it naming a tree the
	// store lacks).
	if req.SkipUnchanged && tree == ptree && s.nothingNew(parent, rec.Issues) {
		if err := flush(); err != nil {
			return sealOutcome{}, err
		}
		return sealOutcome{skipped: true}, s.saveStatCache(e.cache)
	}

	logical := ""
	var parents []string
	if ownRef(rec.Ref) {
		logical = parent
	} else {
		parents = []string{parent}
		if !e.has(parent) {
			return sealOutcome{}, &errMissingObject{parent, "the parent checkpoint"}
		}
	}
	msg := message(req, *rec, logical, now)
	if gitobj.MessageAsIs(msg) {
		sha, err = e.batch.Write("commit", gitobj.Commit{Tree: tree, Parents: parents, Author: e.ident, Committer: e.ident,
			When: now, Message: msg}.Encode())
	} else { // git rewrites such a message: let it, once it can read the tree
		if err := flush(); err != nil {
			return sealOutcome{}, err
		}
		e.db.SyncAll() // git stores this commit: the flush covers what it writes
		args := []string{"commit-tree", tree, "-F", "-"}
		for _, pp := range parents {
			args = append(args, "-p", pp)
		}
		ts := isoTime(now)
		var out []byte
		out, err = s.git.withEnv("GIT_AUTHOR_DATE="+ts, "GIT_COMMITTER_DATE="+ts).Run(ctx, strings.NewReader(msg), args...)
		sha = strings.TrimSpace(string(out))
	}
	if err != nil {
		return sealOutcome{}, err
	}
	faultPoint("commit-written")
	if err := flush(); err != nil {
		return sealOutcome{}, err
	}
	faultPoint("pack-written")
	// Once there are rollUpEvery small packs they are merged, the new pack
	// flushed with the seal's objects and the old ones removed after the
	// ref moved (maintenance merges them all). Not while a maintenance
	// repack runs beside the seal: it would find packs it listed gone, and
	// it merges them itself.
	var rolledUp []string
	var rerr error
	if !s.repacking.Load() {
		_, rolledUp, rerr = e.db.RollUp(rollUpEvery)
	}
	if rerr != nil {
		zerologCtx(ctx).Warn().Err(rerr).Msg("merging the in-process engine's packs failed; they stay as they are")
	}
	if len(rolledUp) > 0 {
		faultPoint("packs-merged")
	}
	if err := e.commitRef(ctx, rec, req.Kind, sha, oldTip); err != nil {
		return sealOutcome{}, err
	}
	if err := gitobj.RemovePacks(rolledUp); err != nil {
		zerologCtx(ctx).Warn().Err(err).Msg("removing packs merged into one failed; their objects are stored twice until maintenance")
	}
	if len(rolledUp) > 0 {
		// The merged pack holds what the removed ones held: the trees
		// found whole stay so.
		e.known.Refresh()
	}
	if len(rolledUp) > 0 && e.cat != nil {
		// git never forgets a pack it opened: the long-running reader would
		// hold the removed ones (and their space) for the daemon's life.
		e.cat.stop()
		e.cat = nil
	}
	return sealOutcome{sha: sha, parent: parent, counts: counts}, nil
}

// refreshKnown looks at what the store holds again: a pack gone or changed,
// or a loose object removed, since the engine last looked makes every tree
// checked again, and the long-running cat-file start over (git never
// forgets a pack it opened: one removed since would still answer for
// objects the store no longer holds).
func (e *inproc) refreshKnown() {
	if !e.known.Refresh() {
		return
	}
	clear(e.whole)
	if e.cat != nil {
		e.cat.stop()
		e.cat = nil
	}
}

// commitRef ends a seal: the stat cache, saved as standing for checkpoint
// sha, then rec's ref moved from oldTip to sha under its lock, once the
// objects and packs the engine stored and the ref's new value are on disk
// (gitobj.DB.Sync: those files fsynced, or one syncfs when git stored some
// or, in a Hankweave store, the runtime did: WatchForeign).
// The stat cache is not flushed: a cache a crash left behind names an older
// checkpoint than the ledger's, and is rebuilt (statCacheFresh).
func (e *inproc) commitRef(ctx context.Context, rec *ckpt.Record, kind ckpt.Kind, sha, oldTip string) error {
	s := e.s
	e.cache.hdr.Commit = sha
	e.cache.hdr.Whole = nil
	if b := e.cache.hdr.Base; b != "" && e.whole[b] {
		if w, ok := e.known.Witness(wholeWitnessLoose); ok {
			e.cache.hdr.Whole = &wholeWitness{Tree: b, Witness: w}
		}
	}
	if err := s.saveStatCache(e.cache); err != nil {
		return err
	}
	beforeUpdateRef()
	mv, err := e.lockRef(rec.Ref, sha)
	if err != nil {
		return fmt.Errorf("ref %s moved while sealing (another writer?); not overwritten: %w", rec.Ref, err)
	}
	defer mv.release()
	var lock []string
	if mv.lock != nil {
		lock = append(lock, mv.lock.LockPath())
	}
	if err := e.db.Sync(lock...); err != nil {
		return err
	}
	if err := mv.finish(ctx, s, oldTip, "cairn: "+string(kind)+" "+rec.ID); err != nil {
		return fmt.Errorf("ref %s moved while sealing (another writer?); not overwritten: %w", rec.Ref, err)
	}
	return nil
}

// refMove is a ref update under way: the in-process engine's holds
// <ref>.lock with the new value from lockRef to finish; one left to git
// (lock nil) is done in finish by update-ref.
type refMove struct {
	e        *inproc
	ref, sha string
	lock     *gitobj.RefLock
}

// lockRef starts moving ref to sha with git's lock-file protocol, the lock
// written but not flushed (commitRef flushes it with the objects). A ref HEAD points
// to, or one outside cairn's own namespaces, is left to git (its HEAD log too).
func (e *inproc) lockRef(ref, sha string) (*refMove, error) {
	s := e.s
	mv := &refMove{e: e, ref: ref, sha: sha}
	head, _ := readNoFollow(filepath.Join(s.gitDir, "HEAD"), maxSmallFile)
	if !(strings.HasPrefix(ref, "refs/cairn/") || strings.HasPrefix(ref, "refs/heads/run-")) ||
		strings.TrimSpace(strings.TrimPrefix(string(head), "ref:")) == ref {
		return mv, nil
	}
	// Under the store lock no cairn runs, nor any git one started (proc.go):
	// a lock in a plain store is a dead writer's. The runtime writes a
	// Hankweave store's refs itself.
	stale := time.Duration(0)
	if s.layout == LayoutHankweave {
		stale = time.Minute
	}
	l, err := gitobj.LockRef(s.gitDir, ref, sha, stale, false)
	if err != nil {
		return nil, err
	}
	mv.lock = l
	return mv, nil
}

// finish compares the ref with old and moves it, with msg in its reflog.
func (mv *refMove) finish(ctx context.Context, s *Store, old, msg string) error {
	if mv.lock == nil {
		_, err := s.git.Run(ctx, nil, "update-ref", "-m", msg, mv.ref, mv.sha, old)
		faultPoint("ref-locked")
		faultPoint("ref-renamed")
		return err
	}
	faultPoint("ref-locked")
	create := false
	switch mv.e.logAll {
	case "always":
		create = true
	case "", "true", "yes", "on", "1":
		create = strings.HasPrefix(mv.ref, "refs/heads/") // core.bare is false: git logs branches
	}
	log := &gitobj.Reflog{Ident: mv.e.ident, When: time.Now(), Message: msg, Create: create}
	return mv.lock.Commit(old, log, func() { faultPoint("ref-renamed") })
}

// release removes a lock finish did not commit.
func (mv *refMove) release() { mv.lock.Release() }
