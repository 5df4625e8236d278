//go:build linux

package snapshot

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"path"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/klauspost/compress/zlib"
	"golang.org/x/sys/unix"

	"github.com/cairn-dev/cairn/platform"
	"github.com/cairn-dev/cairn/restore/ckpt"
	"github.com/cairn-dev/cairn/snapshot/gitobj"
)

// The in-process engine's full seal: a first seal and a full reconcile
// (docs/engine.md, "The in-process engine"). The work tree is walked level
// by level beneath it (each folder opened once through platform.Tree, its
// names described with lstat from its descriptor, nothing followed), git's
// ignore rules are asked of check-ignore only for what cairn's index does
// not hold (and, where an ignore file changed, for what it holds), files
// whose stat the index or the stat cache vouches for are not read, the rest
// are read on every core into packs (gitobj.PackWriter), the trees are
// built from the list, and cairn's index is written whole with the stat
// data read, so the next seal, by either engine, starts from it.

// fullPackLevel is the zlib level of a full seal's pack entries: the
// fastest, as git's loose objects; a first seal is bound by compression,
// and maintenance's repack recompresses with deltas later.
const fullPackLevel = zlib.BestSpeed

// inprocFullReady returns the in-process engine for a full seal, when the
// store's options and state let it seal one exactly as git would.
func (s *Store) inprocFullReady(ctx context.Context) (*inproc, bool) {
	if s.engineName() != EngineInproc {
		return nil, false
	}
	if lo := s.left(); lo.any() || lo.Foreign != nil {
		return nil, false // folders left out: git's walk is told to skip them (ls-files -x)
	}
	e, err := s.inproc.engine(ctx)
	if err != nil {
		return nil, false
	}
	return e, true
}

// walkStat is what the walk keeps of a file's lstat: what git's index
// compares, and what the stat cache does.
type walkStat struct {
	size                 int64
	mtime, ctime         int64 // ns
	ino, dev             uint64
	mode, uid, gid       uint32
	exec, regular, isDir bool
}

func walkStatOf(st *unix.Stat_t) walkStat {
	m := st.Mode & unix.S_IFMT
	return walkStat{size: st.Size, mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano(), ino: st.Ino,
		dev: uint64(st.Dev), mode: st.Mode, uid: st.Uid, gid: st.Gid,
		exec: st.Mode&0o100 != 0, regular: m == unix.S_IFREG, isDir: m == unix.S_IFDIR}
}

// fstatOf is walkStatOf for an open file: fstat into the stack, where
// f.Stat allocates a FileInfo (twice per file a full seal reads).
func fstatOf(f *os.File) (walkStat, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return walkStat{}, &fs.PathError{Op: "stat", Path: f.Name(), Err: err}
	}
	return walkStatOf(&st), nil
}

func (w walkStat) stamp() fileStamp {
	return fileStamp{Size: w.size, Mtime: w.mtime, Ctime: w.ctime, Ino: w.ino}
}

func (w walkStat) gitMode() uint32 {
	if w.exec {
		return gitobj.ModeExec
	}
	return gitobj.ModeFile
}

// entry is w as an index entry for blob id at rel; smudged (times zero)
// when the file was too young to vouch for, so git compares its content
// again, as it does a racily clean entry.
func (w walkStat) entry(rel string, mode uint32, id string, settled bool) idxEntry {
	e := idxEntry{path: rel, mode: mode, id: id, dev: uint32(w.dev), ino: uint32(w.ino), uid: w.uid, gid: w.gid, size: uint32(w.size)}
	if settled {
		e.mtimeS, e.mtimeN = uint32(w.mtime/1e9), uint32(w.mtime%1e9)
		e.ctimeS, e.ctimeN = uint32(w.ctime/1e9), uint32(w.ctime%1e9)
	}
	return e
}

// vouches reports whether index entry x holds the content of a file with
// stat w, as git decides it: the same mode, size, times, inode and owner,
// and the entry older than the index file by the work tree's granularity
// (git's racy rule, in the work tree's own clock).
func (e *inproc) vouches(x *idxEntry, w walkStat, idxTime int64) bool {
	if x.mode != w.gitMode() || x.size != uint32(w.size) || x.ino != uint32(w.ino) || x.uid != w.uid || x.gid != w.gid ||
		x.mtimeS != uint32(w.mtime/1e9) || x.mtimeN != uint32(w.mtime%1e9) ||
		x.ctimeS != uint32(w.ctime/1e9) || x.ctimeN != uint32(w.ctime%1e9) {
		return false
	}
	return settled(w.stamp(), idxTime, e.mgrain, e.cgrain)
}

// walkFile is a file the walk found to seal, and what vouches for its
// content without reading it: the stat cache's id, or cairn's index entry.
type walkFile struct {
	rel     string
	st      walkStat
	cacheID string
	indexed *idxEntry // the index's entry, when its stat data vouch for the file
	idx     int32     // 1 + the position of its path in cairn's index (knownEntries.sorted), 0 when it holds none; whatever the pending entries say
}

// fullWalk is what a full seal found on disk.
type fullWalk struct {
	files   []*walkFile      // regular files, selected, not ignored, within the size limit
	issues  []ckpt.PathIssue // tracked paths that are no longer files
	skipped []ckpt.PathIssue // files over the size limit
	asked   int              // paths asked of check-ignore
	dirs    int              // folders walked
	// lean, when set, restores the collector's target: the walk lowered it
	// (leanGC) on finding leanGCFiles files to read.
	lean func()
	base int64 // the Go memory the process held as the walk began (goMemory)
}

// knownEntries is what cairn's index (and the pending entries over it)
// holds. The walk looks its files up folder by folder (knownEntries.folder):
// no map of every path is built for it.
type knownEntries struct {
	sorted  []idxEntry // the index's entries, sorted by path (readGitIndex)
	pending map[string]pendEntry
	pdirs   map[string]bool // the folders of pending additions
	// reask are paths a walk asks check-ignore about though the index
	// holds them (what the last restore left: Store.rejudge).
	reask map[string]bool
}

// span is a run of knownEntries.sorted: everything the index holds under
// one folder.
type span struct{ lo, hi int32 }

// folderKnown is what the index holds directly in one folder: its files
// and its subfolders, by name.
type folderKnown struct {
	k      *knownEntries
	prefix int      // the length of the folder's path and its slash (0 for the top)
	files  []int32  // sorted indices of its files, in name order
	dirs   []subRun // its subfolders, in the order of name+"/"
}

// subRun is a subfolder the index holds something under; name is a slice
// of an index path (no copy).
type subRun struct {
	name string
	span
}

// folder lists what the index holds directly in dir, whose entries are
// sp: one pass over its own files, one search per subfolder for where the
// subfolder's run ends (each run is contiguous: the index is sorted).
func (k *knownEntries) folder(dir string, sp span) folderKnown {
	f := folderKnown{k: k}
	if dir != "." {
		f.prefix = len(dir) + 1
	}
	for i := sp.lo; i < sp.hi; {
		p := k.sorted[i].path
		j := strings.IndexByte(p[f.prefix:], '/')
		if j < 0 {
			f.files = append(f.files, i)
			i++
			continue
		}
		sub := p[:f.prefix+j+1] // the subfolder's path and its slash
		in := func(n int32) bool { return strings.HasPrefix(k.sorted[n].path, sub) }
		// Gallop from i, then search what is left: a run is often short.
		step := int32(1)
		for i+step < sp.hi && in(i+step) {
			step *= 2
		}
		lo, hi := i+step/2+1, min(i+step, sp.hi)
		end := lo + int32(sort.Search(int(hi-lo), func(n int) bool { return !in(lo + int32(n)) }))
		f.dirs = append(f.dirs, subRun{name: p[f.prefix : f.prefix+j], span: span{i, end}})
		i = end
	}
	return f
}

// file returns the index's entry for the file name directly in the folder.
func (f *folderKnown) file(name string) *idxEntry {
	if i := f.at(name); i >= 0 {
		return &f.k.sorted[i]
	}
	return nil
}

// at returns the position in the index of the file name directly in the
// folder, or -1.
func (f *folderKnown) at(name string) int32 {
	i, ok := slices.BinarySearchFunc(f.files, name, func(n int32, name string) int {
		return strings.Compare(f.k.sorted[n].path[f.prefix:], name)
	})
	if !ok {
		return -1
	}
	return f.files[i]
}

// dir returns the run of the index under the subfolder name, and whether
// the index holds anything there.
func (f *folderKnown) dir(name string) (subRun, bool) {
	i, ok := slices.BinarySearchFunc(f.dirs, name, func(d subRun, name string) int { return cmpAsDir(d.name, name) })
	if !ok {
		return subRun{}, false
	}
	return f.dirs[i], true
}

// cmpAsDir compares a+"/" with b+"/" (the index's order of two folders'
// runs), without building either.
func cmpAsDir(a, b string) int {
	n := min(len(a), len(b))
	if c := strings.Compare(a[:n], b[:n]); c != 0 || len(a) == len(b) {
		return c
	}
	// One is the other's start: its slash meets the other's next byte
	// (where that is a slash too, the shorter sorts first).
	if len(a) > len(b) {
		return cmp.Or(cmp.Compare(a[n], '/'), 1)
	}
	return cmp.Or(cmp.Compare('/', b[n]), -1)
}

// find returns the index's entry for rel (a binary search: for the few
// paths looked up outside the walk's folders).
func (k *knownEntries) find(rel string) *idxEntry {
	i, ok := slices.BinarySearchFunc(k.sorted, rel, func(x idxEntry, p string) int { return strings.Compare(x.path, p) })
	if !ok {
		return nil
	}
	return &k.sorted[i]
}

func (k *knownEntries) tracked(rel string) bool {
	if p, ok := k.pending[rel]; ok {
		return p.Mode != 0
	}
	return k.find(rel) != nil
}

// old is the entry a path keeps when it cannot be read now: the index's, as
// the pending entries leave it.
func (k *knownEntries) old(rel string) (uint32, string, bool) {
	if p, ok := k.pending[rel]; ok {
		return p.Mode, p.ID, p.Mode != 0
	}
	if x := k.find(rel); x != nil {
		return x.mode, x.id, true
	}
	return 0, "", false
}

// loadKnown is entries (sorted by path, as readGitIndex returns them) with
// pending over them.
func loadKnown(entries []idxEntry, pending map[string]pendEntry) *knownEntries {
	k := &knownEntries{sorted: entries, pending: pending, pdirs: map[string]bool{}}
	for p, pe := range pending {
		if pe.Mode != 0 {
			for d := path.Dir(p); d != "." && !k.pdirs[d]; d = path.Dir(d) {
				k.pdirs[d] = true
			}
		}
	}
	return k
}

// errWalkFallback words what sends a full seal to git.
func errWalkFallback(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errFallback, fmt.Sprintf(format, args...))
}

// walk lists the work tree as git's full reconcile sees it: every regular
// file not ignored, not excluded, selected. A folder it cannot read, or
// anything else it cannot judge as git would, is errFallback.
func (e *inproc) walk(ctx context.Context, sel *Selector, k *knownEntries, idxTime int64, global bool) (*fullWalk, error) {
	s := e.s
	out := &fullWalk{base: goMemory()}
	unread := 0 // files kept that nothing vouches for
	if e.ignSrc == nil {
		e.ignSrc = map[string]ignoreSource{}
	}
	// A level's folders: each with whether everything under it is asked
	// (its rules may have changed), and its scan when it was done ahead.
	cur := []walkDir{{rel: ".", dirty: global, span: span{0, int32(len(k.sorted))}}}
	err := s.withWorkTree(func(t *platform.Tree) error {
		scan := func(dirs []walkDir) {
			listedAt := time.Now().UnixNano()
			gitobj.ForEach(len(dirs), func(i int) error {
				if dirs[i].scan == nil {
					dirs[i].scan = &dirScan{}
					e.scanDir(t, dirs[i].rel, dirs[i].span, dirs[i].dirty, listedAt, sel, k, idxTime, dirs[i].scan)
				}
				return nil
			})
		}
		scan(cur)
		for len(cur) > 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
			out.dirs += len(cur)
			var ask []string
			for _, d := range cur {
				sc := d.scan
				if sc.err != nil {
					return sc.err
				}
				// The engine's check-ignore keeps the rules it read: one
				// it may have read that changed since restarts it.
				key := d.rel
				if key == "." {
					key = ""
				}
				was, ok := e.ignSrc[key]
				if ok && !sameIgnore(was, sc.src) && e.ign != nil {
					e.ign.stop()
					e.ign = nil
				}
				if !ok || was != sc.src {
					e.ignSrc[key] = sc.src
				}
				ask = append(ask, sc.ask...)
			}
			// The next level's folders no question hangs on are scanned
			// while check-ignore answers about the others (they are kept
			// whatever it says: only what is asked can be ignored).
			var sure, maybe []walkDir
			for _, d := range cur {
				for _, c := range d.scan.cands {
					if !c.st.isDir {
						continue
					}
					if c.asked {
						maybe = append(maybe, walkDir{rel: c.rel, dirty: d.scan.dirty, span: c.under})
					} else {
						sure = append(sure, walkDir{rel: c.rel, dirty: d.scan.dirty, span: c.under})
					}
				}
			}
			ahead := make(chan struct{})
			go func() {
				defer close(ahead)
				scan(sure)
			}()
			ignored, err := e.askIgnored(ctx, ask)
			<-ahead
			if err != nil {
				return err
			}
			out.asked += len(ask)
			n := len(out.files)
			for _, d := range cur {
				n += len(d.scan.cands)
			}
			out.files = slices.Grow(out.files, n-len(out.files))
			for _, d := range cur {
				for i := range d.scan.cands {
					c := &d.scan.cands[i]
					if c.asked && ignored[c.rel] {
						continue
					}
					switch {
					case c.st.isDir:
					case !c.st.regular:
						out.issues = append(out.issues, ckpt.PathIssue{Path: c.rel, Reason: "not a regular file (" + modeType(c.st.mode).String() + ")"})
					case c.st.size > s.opts.MaxFileSize:
						out.skipped = append(out.skipped, ckpt.PathIssue{Path: c.rel, Reason: ckpt.TooLarge(s.opts.MaxFileSize, c.st.size)})
					default:
						out.files = append(out.files, &c.walkFile)
						if c.cacheID == "" && c.indexed == nil {
							unread++
						}
					}
				}
			}
			// Many files to read (a first seal): what the walk holds is
			// most of the seal's memory from here on.
			if out.lean == nil && unread >= leanGCFiles {
				out.lean = leanGC(out.base)
			}
			maybe = slices.DeleteFunc(maybe, func(d walkDir) bool { return ignored[d.rel] })
			scan(maybe)
			cur = append(sure, maybe...)
		}
		return nil
	})
	if err != nil && out.lean != nil {
		out.lean()
	}
	return out, err
}

// walkDir is a folder of a walk's level.
type walkDir struct {
	rel   string
	dirty bool     // every path under it is asked of check-ignore
	span           // what cairn's index holds under it
	scan  *dirScan // nil until scanned
}

// askIgnored asks the engine's check-ignore (started if need be) which of
// paths git ignores; an error is errFallback.
func (e *inproc) askIgnored(ctx context.Context, paths []string) (map[string]bool, error) {
	if len(paths) == 0 {
		return nil, nil
	}
	if e.ign == nil {
		ic, err := startIgnoreChecker(e.s.git)
		if err != nil {
			return nil, errWalkFallback("check-ignore: %v", err)
		}
		e.ign = ic
	}
	ignored, err := e.ign.ignored(ctx, paths)
	if err != nil {
		e.stopIgnore() // its answers may be out of step with its questions now
		return nil, errWalkFallback("check-ignore: %v", err)
	}
	return ignored, nil
}

// walkCand is an entry a folder's scan found: a file or folder kept unless
// check-ignore, asked about it, says it is ignored.
type walkCand struct {
	walkFile
	asked bool
	under span // a folder's: what cairn's index holds under it
}

// dirScan is one folder as a walk's level found it: what may go into the
// checkpoint (its files and folders), what of it to ask check-ignore about.
type dirScan struct {
	src   ignoreSource // its .gitignore, as listed
	dirty bool         // every path under it is asked (its rules may have changed)
	cands []walkCand
	ask   []string
	err   error // the seal goes to git (errWalkFallback)
}

// scanDir lists the folder dir of the work tree into sc: each entry that
// is neither cairn's own, a link, nor left out by the selection, and which
// of them check-ignore must judge (what cairn's index does not hold, or
// everything under a folder whose rules may have changed). It reads the
// walk's shared state only, so the folders of a level are scanned at once.
func (e *inproc) scanDir(t *platform.Tree, dir string, sp span, parentDirty bool, listedAt int64, sel *Selector, k *knownEntries, idxTime int64, sc *dirScan) {
	var ignoreFile []dirEnt // the folder's .gitignore, when it has one
	known := k.folder(dir, sp)
	sc.cands = make([]walkCand, 0, len(known.files)+len(known.dirs))
	err := t.ScanDir(dir, func(name string, lst *unix.Stat_t, err error) {
		if sc.err != nil {
			return
		}
		if name == ".gitignore" {
			ignoreFile = append(ignoreFile, dirEnt{name: name, st: walkStatOf(lst), err: err})
		}
		if excludedName(name, dir == ".") { // the folders above were checked as they were entered
			return
		}
		// The path: the index's own string where it holds the entry (one
		// less string per entry), else built.
		var x *idxEntry // the index's entry for a file
		pos := int32(-1)
		var run subRun // what the index holds under a folder
		var inRun bool
		rel := ""
		if err == nil && lst.Mode&unix.S_IFMT == unix.S_IFDIR {
			if run, inRun = known.dir(name); inRun {
				rel = k.sorted[run.lo].path[:known.prefix+len(name)]
			}
		} else if pos = known.at(name); pos >= 0 {
			x = &k.sorted[pos]
			rel = x.path
		}
		if rel == "" {
			rel = name
			if dir != "." {
				rel = dir + "/" + name
			}
		}
		if ntfsDotGit(name) {
			// git refuses such a name (core.protectNTFS): its staging
			// names it; left to git to say so.
			sc.err = errWalkFallback("%q: a name git refuses", rel)
			return
		}
		if err != nil {
			if err != unix.ENOENT { // else gone since the folder was listed
				sc.err = errWalkFallback("lstat %s: %v", rel, err)
			}
			return
		}
		st := walkStatOf(lst)
		var untracked bool
		switch {
		case st.isDir:
			untracked = !inRun && !k.pdirs[rel]
			x = nil
		case st.mode&unix.S_IFMT == unix.S_IFLNK:
			return // links are not checkpointed, nor followed
		case !sel.Match(rel):
			return
		default:
			if p, ok := k.pending[rel]; ok {
				untracked = p.Mode == 0
				x = nil // its stat data no longer stand
			} else {
				untracked = x == nil
			}
			if !st.regular && untracked {
				return // git's walk lists no FIFO, socket or device
			}
		}
		f := walkFile{rel: rel, st: st, idx: pos + 1}
		if st.regular {
			// Vouched for by its stat, or read later (if it is kept).
			e.mgrain.see(st.mtime)
			e.cgrain.see(st.ctime)
			if id, ok := e.cache.lookup(rel, st.stamp(), st.gitMode()); ok {
				f.cacheID = id
			} else if x != nil && e.vouches(x, st, idxTime) {
				f.indexed = x
			}
		}
		sc.cands = append(sc.cands, walkCand{walkFile: f, asked: untracked || k.reask[rel], under: run.span}) // asked, once the folder's rules are known
	})
	if err != nil {
		sc.err = errWalkFallback("folder %s: %v", dir, err)
	}
	if sc.err != nil {
		return
	}
	sc.src = e.ignoreSourceIn(ignoreFile, listedAt)
	d := parentDirty || e.ignoreFileChanged(dir, ignoreFile, &known, idxTime)
	sc.dirty = d
	for i := range sc.cands {
		c := &sc.cands[i]
		c.asked = c.asked || d
		if c.asked {
			sc.ask = append(sc.ask, c.rel)
		}
	}
}

// ownExclude reports whether info/exclude holds what the store wrote there
// (infoExclude: cairn's mandatory exclusions, which the walk leaves out
// itself).
func (s *Store) ownExclude(path string) bool {
	b, err := readNoFollow(path, maxSmallFile)
	return err == nil && string(b) == infoExclude
}

// holdsRules reports whether the ignore file at path may hold a rule: a
// line that is neither blank nor a comment (git init's info/exclude holds
// only comments), or a file that cannot be read.
func holdsRules(path string) bool {
	b, err := readNoFollow(path, maxSmallFile)
	if errors.Is(err, fs.ErrNotExist) {
		return false
	} else if err != nil {
		return true
	}
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			return true
		}
	}
	return false
}

// ntfsDotGit reports whether git's verify_path refuses name under
// core.protectNTFS (on by default everywhere): ".git" or "git~1", any case,
// followed by nothing but spaces and periods, or by ':' (a stream name).
func ntfsDotGit(name string) bool {
	l := strings.ToLower(name)
	var rest string
	switch {
	case strings.HasPrefix(l, ".git"):
		rest = l[4:]
	case strings.HasPrefix(l, "git~1"):
		rest = l[5:]
	default:
		return false
	}
	if strings.HasPrefix(rest, ":") {
		return true
	}
	return strings.Trim(rest, " .") == ""
}

// ignoreSourceIn is the folder's .gitignore as its listing describes it
// (as stampIgnore would).
func (e *inproc) ignoreSourceIn(list []dirEnt, listedAt int64) ignoreSource {
	i := slices.IndexFunc(list, func(d dirEnt) bool { return d.name == ".gitignore" })
	if i < 0 || list[i].err != nil {
		return ignoreSource{}
	}
	st := list[i].st.stamp()
	return ignoreSource{fileStamp: st, dev: list[i].st.dev, present: true, racy: !settled(st, listedAt, e.mgrain, e.cgrain)}
}

// dirEnt is a folder's entry as the walk keeps it: its lstat, compacted.
type dirEnt struct {
	name string
	st   walkStat
	err  error
}

// modeType is a file type as fs.FileMode words it.
func modeType(m uint32) fs.FileMode {
	switch m & unix.S_IFMT {
	case unix.S_IFIFO:
		return fs.ModeNamedPipe
	case unix.S_IFSOCK:
		return fs.ModeSocket
	case unix.S_IFCHR:
		return fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		return fs.ModeDevice
	}
	return fs.ModeIrregular
}

// ignoreFileChanged reports whether the folder's .gitignore may hold other
// rules than the ones cairn's index was staged under: present and not
// vouched for by its index entry, or gone while the index holds it. Then
// what the index holds under the folder is asked of git again.
func (e *inproc) ignoreFileChanged(dir string, list []dirEnt, known *folderKnown, idxTime int64) bool {
	i := slices.IndexFunc(list, func(d dirEnt) bool { return d.name == ".gitignore" })
	gone := i < 0 || list[i].err != nil
	if len(known.k.pending) > 0 {
		rel := ".gitignore"
		if dir != "." {
			rel = dir + "/.gitignore"
		}
		if p, ok := known.k.pending[rel]; ok {
			// Its index entry's stat data no longer stand.
			return !gone || p.Mode != 0
		}
	}
	x := known.file(".gitignore")
	if gone {
		return x != nil
	}
	st := list[i].st
	return !st.regular || x == nil || !e.vouches(x, st, idxTime)
}

// beforeFullHash, set by tests only, runs as each file is read (opened,
// not yet read).
var beforeFullHash func(rel string)

// hashedFile is a file as the full seal read it.
type hashedFile struct {
	mode    uint32
	id      string
	st      walkStat
	settled bool
	gone    bool
	reason  string // could not be read: the issue's reason
	skip    string // grew past the size limit: the skipped reason
}

// hashFull reads a file into the pack writer (or finds its blob stored),
// three times at most while it changes under the read. An error is the
// pack writer's: the seal cannot go on.
func (e *inproc) hashFull(pw *gitobj.PackWriter, rel string, checkStored bool) (hashedFile, error) {
	s := e.s
	for attempt := 0; ; attempt++ {
		readAt := time.Now().UnixNano()
		f, err := s.openWork(rel)
		if err != nil {
			switch {
			case errors.Is(err, platform.ErrThroughLink):
				return hashedFile{reason: throughLinkReason}, nil
			case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, platform.ErrSymlink) || errors.Is(err, platform.ErrNotRegular):
				return hashedFile{gone: true}, nil
			}
			return hashedFile{reason: gitOpenReason(rel, err)}, nil
		}
		st, err := fstatOf(f)
		if err != nil {
			f.Close()
			return hashedFile{reason: err.Error()}, nil
		}
		if beforeFullHash != nil {
			beforeFullHash(rel)
		}
		if st.size > s.opts.MaxFileSize {
			f.Close()
			return hashedFile{skip: ckpt.TooLarge(s.opts.MaxFileSize, st.size)}, nil
		}
		var id string
		if st.size <= 1<<20 {
			buf := getReadBuf()
			var data []byte
			if data, err = gitobj.ReadBlobInto(f, st.size, *buf); err == nil {
				id = e.format.Hash("blob", data)
				if !checkStored || !e.known.Has(id) {
					err = pw.WriteKnown(gitobj.Object{ID: id, Type: "blob", Data: data})
				}
			}
			putReadBuf(buf, data)
		} else {
			id, err = pw.WriteBlobFrom(f, st.size)
		}
		after, serr := fstatOf(f)
		f.Close()
		if perr := pw.Err(); perr != nil {
			return hashedFile{}, perr
		}
		if errors.Is(err, gitobj.ErrChanged) || serr == nil && after.stamp() != st.stamp() {
			if attempt < 2 {
				continue
			}
			return hashedFile{reason: "changed while the checkpoint was sealed"}, nil
		}
		if err != nil {
			return hashedFile{reason: err.Error()}, nil
		}
		return hashedFile{mode: st.gitMode(), id: id, st: st, settled: settled(st.stamp(), readAt, e.mgrain, e.cgrain)}, nil
	}
}

// A full seal of many files holds what it lists (a path, an index entry, a
// pack entry and a tree entry per file: about 350 bytes) while reading
// hundreds of MB through small buffers; at the collector's default target
// the heap doubles that. From leanGCFiles files to read on, the collector's
// target is leanGCPercent while the seal runs after its walk (a reconcile
// that reads few files keeps the default): at 100k files the
// peak RSS falls from about 70 to mostly 55-65 MiB for about 3% more CPU.
// A soft memory limit, leanMemBudget over the Go memory the process held
// when the walk began (a daemon holding more for other work is not made to
// collect without end), makes the runtime give freed pages back at once
// instead of keeping them, for a few more collections (docs/engine.md,
// "First seals and full reconciles"). Below leanGCFiles, the heap is small
// either way.
const (
	leanGCFiles   = 20_000
	leanGCPercent = 25
	leanMemBudget = 40 << 20
)

var lean struct {
	sync.Mutex
	n     int   // seals running lean
	was   int   // the target before the first of them
	limit int64 // the memory limit before them; -1: one set by the operator (GOMEMLIMIT), left alone
}

// leanGC lowers the collector's target (never raises it, nor turns it on)
// and sets a soft memory limit of base+leanMemBudget (unless one is set)
// until the returned func is called; concurrent seals share them (the
// first one's limit).
func leanGC(base int64) (restore func()) {
	lean.Lock()
	defer lean.Unlock()
	if lean.n == 0 {
		lean.was = debug.SetGCPercent(leanGCPercent)
		if lean.was >= 0 && lean.was < leanGCPercent || lean.was < 0 {
			debug.SetGCPercent(lean.was)
		}
		lean.limit = -1
		if debug.SetMemoryLimit(-1) == math.MaxInt64 {
			lean.limit = debug.SetMemoryLimit(base + leanMemBudget)
		}
	}
	lean.n++
	return func() {
		lean.Lock()
		defer lean.Unlock()
		if lean.n--; lean.n == 0 {
			debug.SetGCPercent(lean.was)
			if lean.limit >= 0 {
				debug.SetMemoryLimit(lean.limit)
			}
		}
	}
}

// goMemory is the memory the Go runtime holds now, as its memory limit
// counts it: everything it mapped, less what it gave back.
func goMemory() int64 {
	m := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(m)
	if m[0].Value.Kind() != metrics.KindUint64 || m[1].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(m[0].Value.Uint64() - m[1].Value.Uint64())
}

// readBufs keeps the full seal's read buffers between files: each grows to
// the largest file its reader met, up to readBufKeep, so reading a hundred
// thousand files allocates a few buffers, not one per file.
var readBufs = sync.Pool{New: func() any { return new([]byte) }}

const readBufKeep = 256 << 10

func getReadBuf() *[]byte { return readBufs.Get().(*[]byte) }

// putReadBuf keeps buf, or data (what was read, when buf was too small
// for it) when that is larger and not past readBufKeep.
func putReadBuf(buf *[]byte, data []byte) {
	if cap(data) > cap(*buf) && cap(data) <= readBufKeep {
		*buf = data[:0]
	}
	readBufs.Put(buf)
}

// freshTree is a tree of the new checkpoint: the folder it describes (""
// for the root, else its path and a slash), its id and its entries.
type freshTree struct {
	at   string
	id   string
	ents []gitobj.TreeEntry
}

// buildTrees makes the tree objects of entries (sorted by path), writing
// each one the store lacks into pw (all of them when checkStored is false),
// and returns them children first, the root last. Sorted paths list each
// folder's entries in git's tree order, a folder's whole content between
// them, so each tree is written as its folder ends, its entries held once,
// exactly sized (docs/engine.md, "First seals and full reconciles").
func (e *inproc) buildTrees(pw *gitobj.PackWriter, entries []idxEntry, checkStored bool) (trees []freshTree, err error) {
	type level struct {
		at, name string
		ents     []gitobj.TreeEntry // reused from folder to folder at this depth
	}
	// Each tree's id is needed at once (its parent names it); its entry in
	// the pack is compressed meanwhile on the other cores.
	writes := make(chan gitobj.Object, 64)
	var wg sync.WaitGroup
	var werr error
	var werrMu sync.Mutex
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for o := range writes {
				if err := pw.WriteKnown(o); err != nil {
					werrMu.Lock()
					werr = cmp.Or(werr, err)
					werrMu.Unlock()
				}
			}
		})
	}
	defer func() {
		close(writes)
		wg.Wait()
		if err == nil {
			err = werr
		}
	}()
	stack := []level{{}}
	end := func() error {
		l := &stack[len(stack)-1]
		ents := slices.Clone(l.ents)
		l.ents = l.ents[:0]
		data, err := gitobj.EncodeTree(ents, e.format)
		if err != nil {
			return err
		}
		id := e.format.Hash("tree", data)
		trees = append(trees, freshTree{at: l.at, id: id, ents: ents})
		if len(stack) > 1 {
			p := &stack[len(stack)-2]
			p.ents = append(p.ents, gitobj.TreeEntry{Mode: gitobj.ModeTree, Name: l.name, ID: id})
		}
		stack = stack[:len(stack)-1]
		if id == e.empty || e.whole[id] || pw.Has(id) || checkStored && e.known.Has(id) {
			return nil
		}
		writes <- gitobj.Object{ID: id, Type: "tree", Data: data}
		return nil
	}
	for _, x := range entries {
		for !strings.HasPrefix(x.path, stack[len(stack)-1].at) {
			if err := end(); err != nil {
				return nil, err
			}
		}
		at := stack[len(stack)-1].at
		for {
			i := strings.IndexByte(x.path[len(at):], '/')
			if i < 0 {
				break
			}
			name := x.path[len(at) : len(at)+i]
			at = x.path[:len(at)+i+1]
			if len(stack) < cap(stack) {
				stack = stack[:len(stack)+1]
				l := &stack[len(stack)-1]
				l.at, l.name = at, name
			} else {
				stack = append(stack, level{at: at, name: name})
			}
		}
		l := &stack[len(stack)-1]
		l.ents = append(l.ents, gitobj.TreeEntry{Mode: x.mode, Name: x.path[len(at):], ID: x.id})
	}
	for len(stack) > 0 {
		if err := end(); err != nil {
			return nil, err
		}
	}
	return trees, nil
}

// checkTrees makes sure every blob the new trees name is stored or in the
// seal's packs (a tree found whole before is not looked into again).
func (e *inproc) checkTrees(pw *gitobj.PackWriter, trees []freshTree) error {
	for _, t := range trees {
		if e.whole[t.id] {
			continue
		}
		for _, x := range t.ents {
			if !x.IsTree() && !pw.Has(x.ID) && !e.known.Has(x.ID) {
				return &errMissingObject{x.ID, "blob " + t.at + x.Name}
			}
		}
	}
	return nil
}

// markWhole notes every tree of the new checkpoint as whole, and caches
// it for the next seal (which then reads none of them from the store).
func (e *inproc) markWhole(trees []freshTree) {
	for _, t := range trees {
		if e.whole[t.id] {
			continue
		}
		if len(e.whole) < wholeMax {
			e.whole[t.id] = true
		}
		e.cacheTree(t.id, t.ents)
	}
}

// sealFull is a first seal or a full reconcile by the in-process engine.
// errFallback before anything is written means git seals the request.
func (e *inproc) sealFull(ctx context.Context, j *sealJob) (sealOutcome, error) {
	s, req, rec, sel, parent, oldTip, now := e.s, j.req, j.rec, j.sel, j.parent, j.oldTip, j.now
	s.lastOnBase = false
	// A full reconcile is what repairs a store: cairn's index may be left
	// as it is (applied to a base known whole), but not locked.
	s.dropDeadIndexLock(ctx)
	e.refreshKnown()
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
	// Found in memory is not found stored: a full reconcile is what repairs
	// a damaged store, so it looks (git's engine then seals on what is whole).
	if !e.known.Has(parent) {
		return sealOutcome{}, s.damaged("the parent checkpoint " + parent)
	}
	if ptree != e.empty && !e.known.Has(ptree) {
		return sealOutcome{}, s.damaged("the tree of the parent checkpoint " + parent)
	}
	if !s.statCacheFresh(e.cache) {
		e.cache = s.loadStatCache(e.format.Name)
	}
	// Ignore rules from files the walk does not see (info/exclude, the
	// excludes file): every path is asked of git while one is there.
	global := e.excludes != ""
	cfgFiles := s.cfgFiles()
	// cairn's own info/exclude names only what the walk never enters (Excluded).
	global = global || holdsRules(cfgFiles[3]) || !s.ownExclude(cfgFiles[2]) && holdsRules(cfgFiles[2])
	// cairn's index: the stat data of what the last seals held (none for
	// a first seal, or one that cannot be read exactly: every file is read).
	indexEntries, idxTime, err := e.loadIndex(s.git.Index)
	if err != nil {
		indexEntries, idxTime = nil, 0
	}
	// An index the stat cache does not tie to the newest checkpoint (the
	// cache lost, cut, or from another index or checkpoint) may be an older
	// staging, its later seals' and restores' pending entries gone: its stat
	// data still vouch for content, but what it tracks was not all judged
	// by the ignore rules it holds (a restore's second pre-restore
	// checkpoint stages the files it overwrites even when ignored).
	global = global || len(indexEntries) > 0 && !s.indexTiedBy(e.cache)
	k := loadKnown(indexEntries, e.cache.pending)
	// What the last restore left to judge is asked of check-ignore too: it
	// keeps, as the target's, files ignore rules may cover (Store.rejudge).
	for _, p := range s.rejudge {
		if k.reask == nil {
			k.reask = make(map[string]bool, len(s.rejudge))
		}
		k.reask[p] = true
	}
	w, err := e.walk(ctx, sel, k, idxTime, global)
	if err != nil {
		return sealOutcome{}, err
	}
	s.lastAsked = w.asked

	// Each file: vouched for by its stat, or read. When the index's stat
	// data vouch for every file it holds and for nothing else (nothing
	// changed since it was written), the entries are the index's own.
	byIndex, vouched := 0, 0 // files the index's stat data vouch for; all vouched for
	for _, f := range w.files {
		if f.indexed != nil {
			byIndex++
		}
		if f.cacheID != "" || f.indexed != nil {
			vouched++
		}
	}
	allIndexed := len(e.cache.pending) == 0 && byIndex == len(w.files) && len(w.files) == len(indexEntries)
	var entries []idxEntry
	asIndexed := 0   // entries taken from the index as they are
	asIndexedID := 0 // entries the stat cache vouched for, the index's own blob and mode
	// The paths to read (a first seal reads every file).
	var todo []string
	// 1 + each entry's position in the index, 0 for none (baseEdits); kept
	// when there is an index.
	var from []int32
	if allIndexed {
		// Shared with the engine's parse of the index: read, never written.
		entries, asIndexed = indexEntries, len(indexEntries)
		w.files = nil
	} else {
		// Room for the files to read comes after the walk is let go when
		// they are many (a first seal): the two are not held at once.
		room := len(w.files)
		if len(w.files)-vouched >= leanGCFiles {
			room = vouched
		}
		entries = make([]idxEntry, 0, room)
		if len(indexEntries) > 0 {
			from = make([]int32, 0, room)
		}
	}
	var todoIdx []int32 // walkFile.idx of each path to read
	for _, f := range w.files {
		switch {
		case f.cacheID != "":
			entries = append(entries, f.st.entry(f.rel, f.st.gitMode(), f.cacheID, true))
			if f.idx > 0 {
				if x := &indexEntries[f.idx-1]; x.id == f.cacheID && x.mode == f.st.gitMode() {
					asIndexedID++
				}
			}
		case f.indexed != nil:
			entries = append(entries, *f.indexed)
			asIndexed++
		default:
			todo = append(todo, f.rel)
			if from != nil {
				todoIdx = append(todoIdx, f.idx)
			}
			continue
		}
		if from != nil {
			from = append(from, f.idx)
		}
	}
	if w.lean != nil {
		defer w.lean()
	} else if len(todo) >= leanGCFiles {
		defer leanGC(w.base)()
	}
	// A store with little in it (a first seal) is not asked about each
	// object: one stored twice costs space until maintenance, never a
	// wrong checkpoint.
	checkStored := len(indexEntries) > 0
	pw := e.db.NewPackWriter(gitobj.DefaultMaxPack, fullPackLevel)
	closed := false
	defer func() {
		if !closed {
			pw.Abort()
		}
	}()
	// What is held per file read is its index entry, written in place by
	// its reader; the few that could not be read are kept aside. (A first
	// seal reads every file: a result per file, beside its entry and its
	// walk, was a third of the seal's memory.)
	w.files = nil
	first := len(entries)
	entries = slices.Grow(entries, len(todo))[:first+len(todo)]
	if from != nil {
		from = append(from, todoIdx...)
	}
	if len(todo) >= leanGCFiles {
		pw.Reserve(len(todo) + w.dirs + 1) // a blob per file, a tree per folder, the commit
	}
	var results []hashedFile // the stat cache remembers what was read, when it is few
	if len(todo) <= statCacheMax {
		results = make([]hashedFile, len(todo))
	}
	var failedMu sync.Mutex
	failed := map[int]hashedFile{}
	tell := progressTeller(ctx, len(todo))
	if err := gitobj.ForEach(len(todo), func(i int) error {
		h, err := e.hashFull(pw, todo[i], checkStored)
		tell(h.st.size)
		if h.gone || h.skip != "" || h.reason != "" {
			failedMu.Lock()
			failed[i] = h
			failedMu.Unlock()
		} else if err == nil {
			entries[first+i] = h.st.entry(todo[i], h.mode, h.id, h.settled)
			if results != nil {
				results[i] = h
			}
		}
		return err
	}); err != nil {
		return sealOutcome{}, err
	}
	issues, skipped := w.issues, w.skipped
	for i, h := range results {
		if h.settled && h.id != "" {
			e.cache.remember(todo[i], h.st.stamp(), h.mode, h.id) // vouched for next time, whatever the index says
		}
	}
	if len(failed) > 0 {
		// The files not read leave their places (entries and from alike).
		n := 0
		for i := range entries {
			if entries[i].path == "" {
				continue
			}
			entries[n] = entries[i]
			if from != nil {
				from[n] = from[i]
			}
			n++
		}
		entries = slices.Delete(entries, n, len(entries))
		if from != nil {
			from = from[:n]
		}
		for _, i := range slices.Sorted(maps.Keys(failed)) {
			rel, h := todo[i], failed[i]
			switch {
			case h.gone:
			case h.skip != "":
				skipped = append(skipped, ckpt.PathIssue{Path: rel, Reason: h.skip})
			default:
				issues = append(issues, ckpt.PathIssue{Path: rel, Reason: h.reason})
				if mode, id, ok := k.old(rel); ok && (pw.Has(id) || e.known.Has(id)) {
					entries = append(entries, idxEntry{path: rel, mode: mode, id: id}) // its entry stays as it was
					if from != nil {
						from = append(from, todoIdx[i])
					}
				}
			}
		}
	}
	todo = nil
	faultPoint("blob-written")
	sortIssues(issues)
	sortIssues(skipped)
	rec.Issues, rec.Skipped = dedupeIssues(issues), dedupeIssues(skipped)

	// Nothing new (every entry the index's own, none dropped, nothing
	// pending): the index stays as it is, and when the stat cache says it
	// stands for a tree found whole, that tree is the checkpoint's.
	same := len(e.cache.pending) == 0 && asIndexed == len(entries) && len(entries) == len(indexEntries) && idxTime != 0
	// When the stat cache says cairn's index (and the entries pending over
	// it) stands for a tree found whole, the checkpoint is that tree with
	// what differs applied, as an incremental seal applies it: only the
	// trees along changed paths are rebuilt, and the index stays as it is.
	idxSt, _ := stampFile(s.git.Index)
	base := e.cache.hdr.Base
	e.wholeFromCache()
	onBase := idxTime != 0 && base != "" && idxSt == e.cache.hdr.Index && e.whole[base] && e.indexMetaIs(sel)
	s.lastOnBase = onBase
	var trees []freshTree // built whole (not on a base)
	var edits map[string]edit
	tree := ""
	switch {
	case onBase:
		// Every entry the index's own blob and mode (by its stat data, or
		// the stat cache's), none dropped, nothing pending: nothing to apply.
		sameIDs := len(e.cache.pending) == 0 && asIndexed+asIndexedID == len(entries) && len(entries) == len(indexEntries)
		if !sameIDs {
			edits = baseEdits(entries, from, k)
		}
		if len(edits) == 0 {
			tree = base
			break
		}
		// The blobs first, where the rebuilt trees' check finds them.
		if err := e.finishPacks(pw, &closed); err != nil {
			return sealOutcome{}, err
		}
		e.batch = e.db.Batch()
		defer func() {
			_ = e.flushBatch() // an error marks the engine broken
			e.batch, e.fresh = nil, nil
		}()
		var replaced []string
		if tree, replaced, err = e.rebuild(ctx, s, base, edits); err != nil {
			return sealOutcome{}, err
		}
		if err := e.vouch(ctx, s, tree, base, ""); err != nil {
			return sealOutcome{}, err
		}
		if tree != base {
			e.trees.drop(replaced)
		}
	default:
		if !allIndexed { // else in the index's order
			slices.SortFunc(entries, func(a, b idxEntry) int { return strings.Compare(a.path, b.path) })
		}
		if trees, err = e.buildTrees(pw, entries, checkStored); err != nil {
			return sealOutcome{}, err
		}
		tree = trees[len(trees)-1].id
		if len(entries) == 0 && !e.known.Has(tree) {
			if _, err := pw.Write("tree", nil); err != nil {
				return sealOutcome{}, err
			}
		}
		if err := e.checkTrees(pw, trees); err != nil {
			return sealOutcome{}, err
		}
		// What is left to write is one commit: the compressors the
		// files and trees took go before the index is read and written.
		gitobj.ReleaseDeflaters()
		e.fresh = make(map[string][]gitobj.TreeEntry, len(trees))
		defer func() { e.fresh = nil }()
		for _, t := range trees {
			e.fresh[t.id] = t.ents
		}
	}
	faultPoint("tree-written")

	var counts [3]int
	if trees != nil && (ptree == "" || ptree == e.empty) {
		// On an empty parent (a first seal) every file is added: the
		// count is the list's, without a walk of the new trees.
		counts[0] = len(entries)
	} else if err := e.diff(ctx, s, ptree, tree, "", func(_ string, old, nw *gitobj.TreeEntry) {
		switch {
		case old == nil:
			counts[0]++
		case nw == nil:
			counts[2]++
		default:
			counts[1]++
		}
	}); err != nil {
		return sealOutcome{}, err
	}

	skip := req.SkipUnchanged && tree == ptree && s.nothingNew(parent, rec.Issues)
	var sha string
	if !skip {
		logical := ""
		var parents []string
		if ownRef(rec.Ref) {
			logical = parent
		} else {
			parents = []string{parent}
			if !e.known.Has(parent) {
				return sealOutcome{}, &errMissingObject{parent, "the parent checkpoint"}
			}
		}
		msg := message(req, *rec, logical, now)
		if gitobj.MessageAsIs(msg) {
			commit := gitobj.Commit{Tree: tree, Parents: parents, Author: e.ident, Committer: e.ident, When: now, Message: msg}.Encode()
			if e.batch != nil {
				sha, err = e.batch.Write("commit", commit)
			} else {
				sha, err = pw.Write("commit", commit)
			}
			if err != nil {
				return sealOutcome{}, err
			}
		}
		faultPoint("commit-written")
		if sha == "" { // git rewrites such a message: let it, once it can read the tree
			if err := e.finishPacks(pw, &closed); err != nil {
				return sealOutcome{}, err
			}
			if err := e.flushBatch(); err != nil {
				return sealOutcome{}, err
			}
			e.db.SyncAll() // git stores this commit: the flush covers what it writes
			args := []string{"commit-tree", tree, "-F", "-"}
			for _, pp := range parents {
				args = append(args, "-p", pp)
			}
			ts := isoTime(now)
			out, err := s.git.withEnv("GIT_AUTHOR_DATE="+ts, "GIT_COMMITTER_DATE="+ts).Run(ctx, strings.NewReader(msg), args...)
			if err != nil {
				return sealOutcome{}, err
			}
			sha = strings.TrimSpace(string(out))
		}
	}
	if err := e.finishPacks(pw, &closed); err != nil {
		return sealOutcome{}, err
	}
	if err := e.flushBatch(); err != nil {
		return sealOutcome{}, err
	}
	faultPoint("pack-written")
	e.markWhole(trees)

	if onBase {
		// What differs from the base waits, as an incremental seal's
		// entries do, to enter the index before git next reads it.
		for p, ed := range edits {
			if ed.del {
				e.cache.setPending(p, pendEntry{})
			} else {
				e.cache.setPending(p, pendEntry{Mode: ed.mode, ID: ed.id})
			}
		}
		e.cache.hdr.Base = tree
	} else {
		// cairn's index, whole, with the stat data read: the next seal of
		// either engine starts from it. The stat cache then stands for it.
		if !same || !e.indexMetaIs(sel) {
			if err := e.writeIndex(sel, entries); err != nil {
				return sealOutcome{}, err
			}
		}
		st, ok := stampFile(s.git.Index)
		if !ok {
			return sealOutcome{}, errors.New("cairn's index vanished as it was written")
		}
		e.cache.clearPending()
		e.cache.hdr.Base, e.cache.hdr.Index = tree, st
	}
	if skip {
		if last, ok := s.lastSealed(); ok {
			e.cache.hdr.Commit = last.SHA
		}
		return sealOutcome{skipped: true}, s.saveStatCache(e.cache)
	}
	if err := e.commitRef(ctx, rec, req.Kind, sha, oldTip); err != nil {
		return sealOutcome{}, err
	}
	return sealOutcome{sha: sha, parent: parent, counts: counts}, nil
}

// baseEdits lists what entries (the new checkpoint's files, in any order)
// change in the tree cairn's index and its pending entries stand for.
// from[i] is 1 + the position in the index of entries[i]'s path, 0 when it
// holds none (the walk found it there: no lookup by path); nil, each is
// looked up.
func baseEdits(entries []idxEntry, from []int32, k *knownEntries) map[string]edit {
	edits := map[string]edit{}
	held := make([]bool, len(k.sorted)) // index entries the new entries hold
	heldPending := map[string]bool{}    // pending paths the entries hold
	for i := range entries {
		x := &entries[i]
		var at int32
		if from != nil {
			at = from[i]
		} else if j, ok := slices.BinarySearchFunc(k.sorted, x.path, func(e idxEntry, p string) int { return strings.Compare(e.path, p) }); ok {
			at = int32(j) + 1
		}
		mode, id, ok := uint32(0), "", at > 0
		if ok {
			was := &k.sorted[at-1]
			held[at-1] = true
			mode, id = was.mode, was.id
		}
		if len(k.pending) > 0 {
			if p, pend := k.pending[x.path]; pend {
				heldPending[x.path] = true
				mode, id, ok = p.Mode, p.ID, p.Mode != 0
			}
		}
		if !ok || mode != x.mode || id != x.id {
			edits[x.path] = edit{mode: x.mode, id: x.id}
		}
	}
	for i, h := range held { // the index's paths now gone
		if p := k.sorted[i].path; !h && k.tracked(p) {
			edits[p] = edit{del: true}
		}
	}
	for p, pe := range k.pending {
		if pe.Mode != 0 && !heldPending[p] {
			edits[p] = edit{del: true}
		}
	}
	return edits
}

// finishPacks closes the seal's pack writer once, and has the engine see
// its packs.
func (e *inproc) finishPacks(pw *gitobj.PackWriter, closed *bool) error {
	if *closed {
		return nil
	}
	*closed = true
	_, err := pw.Close()
	e.refreshKnown()
	if err != nil {
		e.broken = true
	}
	return err
}

// indexMetaIs reports whether cairn's index is noted as staged under sel
// and the store's size limit.
func (e *inproc) indexMetaIs(sel *Selector) bool {
	var prev indexMeta
	b, err := readNoFollow(e.s.git.Index+".json", maxSmallFile)
	return err == nil && json.Unmarshal(b, &prev) == nil && prev == (indexMeta{Selection: sel.Key(), MaxSize: e.s.opts.MaxFileSize})
}

// writeIndex replaces cairn's index with entries, and notes the selection
// and size limit it was staged under (as the git engine's stage does).
func (e *inproc) writeIndex(sel *Selector, entries []idxEntry) error {
	s := e.s
	if err := writeGitIndex(s.git.Index, e.format, entries); err != nil {
		return err
	}
	meta := indexMeta{Selection: sel.Key(), MaxSize: s.opts.MaxFileSize}
	var prev indexMeta
	metaPath := s.git.Index + ".json"
	if b, err := readNoFollow(metaPath, maxSmallFile); err == nil {
		_ = json.Unmarshal(b, &prev)
	}
	if prev != meta {
		b, _ := json.Marshal(meta)
		if err := platform.WriteFileAtomic(metaPath, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
