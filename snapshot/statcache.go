package snapshot

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	binenc "encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/cairn-dev/cairn/platform"
	"github.com/cairn-dev/cairn/snapshot/gitobj"
)

// The in-process engine's stat cache (docs/cairn-formats.md, "The stat
// cache"): what git's index is to the git engine. It holds
//   - base: the tree the index plus the pending entries stand for, and the
//     index file's identity when base was recorded (a git command that
//     rewrote the index since makes base unknown: the next seal is git's);
//   - pending: entries the in-process engine changed since the index was
//     last written, applied to the index before git next reads it;
//   - stats: for files the engine hashed, the stat data and blob, so a
//     path named again unchanged is not read again.
// The file is a journal: a whole-cache record, then one record per save
// with what changed, each checksummed; it is rewritten whole when it grows
// long. A seal saves it before the ref moves (the file system flush before
// the ref covers it, as it covers git's index).

const statCacheMagic = "cairn-statcache 2\n"

// statCacheMax bounds the stat entries kept (the most recently hashed):
// they only spare re-reading files named again.
const statCacheMax = 4096

// pendingSyncMax is how many pending entries make a seal write them into
// the index at its end, so the cache stays small.
const pendingSyncMax = 4096

// The journal is rewritten whole when it holds more than this many records,
// or grows past twice its size when last rewritten plus statJournalSlack.
const (
	statJournalMax   = 1024
	statJournalSlack = 256 << 10
)

type fileStamp struct {
	Size  int64  `json:"size"`
	Mtime int64  `json:"mtime"`
	Ctime int64  `json:"ctime"`
	Ino   uint64 `json:"ino"`
}

func stampOf(fi fs.FileInfo) fileStamp {
	return fileStamp{Size: fi.Size(), Mtime: fi.ModTime().UnixNano(), Ctime: platform.ChangeTime(fi), Ino: inode(fi)}
}

func stampFile(path string) (fileStamp, bool) {
	fi, err := os.Lstat(path)
	if err != nil {
		return fileStamp{}, false
	}
	return stampOf(fi), true
}

// statHeader binds the cache to what it describes: the object format, the
// tree the index plus the pending entries stand for (Base) and the index
// file as it was then, the checkpoint last sealed from them (Commit: the
// ledger's newest sealed record must name it, or the cache is older than
// the store and is not used), and the work tree's file system (Dev: stat
// entries of another file system vouch for nothing).
type statHeader struct {
	Format string    `json:"format"`
	Base   string    `json:"base,omitempty"`
	Index  fileStamp `json:"index"`
	Commit string    `json:"commit,omitempty"`
	Dev    uint64    `json:"dev,omitempty"`
	// Whole: a tree the engine found whole (every object it names stored),
	// and what the store held then. A new engine takes the tree as whole
	// when all of that is still stored (wholeFromCache).
	Whole *wholeWitness `json:"whole,omitempty"`
}

// wholeWitness says tree Tree was found whole while the store held what
// the witness names.
type wholeWitness struct {
	Tree string `json:"tree"`
	gitobj.Witness
}

// statEntry: a file with this stamp and mode held blob ID.
type statEntry struct {
	fileStamp
	Mode uint32
	ID   string
	seq  uint64
}

// pendEntry is an index entry to write: mode 0 removes the path.
type pendEntry struct {
	Mode uint32
	ID   string
}

type statCache struct {
	hdr     statHeader
	pending map[string]pendEntry
	stats   map[string]statEntry
	seq     uint64
	// file is the cache file's own stamp as last read or written: another
	// process's write shows as a change.
	file fileStamp
	// loaded says how the cache was read: loadedWhole, or why it is empty
	// (no file, or one that could not be read whole).
	loaded loadState
	// What changed since the file was written, for the next record.
	dirtyPend map[string]bool
	dirtyStat map[string]bool // set or removed: the map says which
	// whole makes the next save rewrite the file: nothing valid on disk, the
	// pending entries cleared, a torn record dropped, or a long journal.
	whole    bool
	records  int   // records in the file
	wholeLen int64 // the file's size when it was last written whole
}

type loadState int

const (
	loadedNew     loadState = iota // made in memory, nothing read
	loadedWhole                    // read whole and verified
	loadedMissing                  // no cache file
	loadedDamaged                  // a file that could not be read whole or verified
)

func newStatCache(format string) *statCache {
	return &statCache{hdr: statHeader{Format: format}, pending: map[string]pendEntry{}, stats: map[string]statEntry{},
		dirtyPend: map[string]bool{}, dirtyStat: map[string]bool{}, whole: true}
}

// lookup returns the blob of rel if the cache vouches for a file with this
// stat: same size, times, inode and mode. Only settled entries are kept
// (inproc.settled: git's racy rule in the work tree's own granularity), so
// a file changed since it was read shows another stamp.
func (c *statCache) lookup(rel string, st fileStamp, mode uint32) (string, bool) {
	e, ok := c.stats[rel]
	if !ok || e.fileStamp != st || e.Mode != mode {
		return "", false
	}
	return e.ID, true
}

func (c *statCache) remember(rel string, st fileStamp, mode uint32, id string) {
	c.seq++
	c.stats[rel] = statEntry{fileStamp: st, Mode: mode, ID: id, seq: c.seq}
	c.dirtyStat[rel] = true
}

// forget drops the stat entry of rel: its file no longer matches it.
func (c *statCache) forget(rel string) {
	if _, ok := c.stats[rel]; ok {
		delete(c.stats, rel)
		c.dirtyStat[rel] = true
	}
}

func (c *statCache) setPending(rel string, e pendEntry) {
	c.pending[rel] = e
	c.dirtyPend[rel] = true
}

// clearPending empties the pending entries (git's index took them).
func (c *statCache) clearPending() {
	clear(c.pending)
	clear(c.dirtyPend)
	c.whole = true
}

func (c *statCache) trim() {
	if len(c.stats) <= statCacheMax {
		return
	}
	seqs := make([]uint64, 0, len(c.stats))
	for _, e := range c.stats {
		seqs = append(seqs, e.seq)
	}
	slices.Sort(seqs)
	cut := seqs[len(seqs)-statCacheMax]
	for k, e := range c.stats {
		if e.seq < cut {
			c.forget(k)
		}
	}
}

// Record kinds: a whole cache, or the changes since the record before.
const (
	recWhole = 'W'
	recDelta = 'D'
)

// record encodes one journal record: its length, the body (kind, header
// JSON, pending entries, stat entries set or removed), and the body's
// SHA-256 (a torn or damaged record is not trusted).
func (c *statCache) record(whole bool) []byte {
	var b bytes.Buffer
	var tmp [binenc.MaxVarintLen64]byte
	uv := func(v uint64) { b.Write(tmp[:binenc.PutUvarint(tmp[:], v)]) }
	sv := func(v int64) { b.Write(tmp[:binenc.PutVarint(tmp[:], v)]) }
	str := func(s string) { uv(uint64(len(s))); b.WriteString(s) }
	kind := byte(recDelta)
	if whole {
		kind = recWhole
	}
	b.WriteByte(kind)
	h, _ := json.Marshal(c.hdr)
	str(string(h))
	var keys []string
	if whole {
		keys = slices.Collect(maps.Keys(c.pending))
	} else {
		keys = slices.Collect(maps.Keys(c.dirtyPend))
	}
	slices.Sort(keys)
	uv(uint64(len(keys)))
	for _, k := range keys {
		e := c.pending[k]
		str(k)
		uv(uint64(e.Mode))
		str(e.ID)
	}
	if whole {
		keys = slices.Collect(maps.Keys(c.stats))
	} else {
		keys = slices.Collect(maps.Keys(c.dirtyStat))
	}
	// In the order they were hashed: the decoder's order is the age trim keeps.
	slices.SortFunc(keys, func(a, b string) int { return cmp.Compare(c.stats[a].seq, c.stats[b].seq) })
	uv(uint64(len(keys)))
	for _, k := range keys {
		str(k)
		e, ok := c.stats[k]
		if !ok {
			b.WriteByte(0) // removed
			continue
		}
		b.WriteByte(1)
		uv(uint64(e.Mode))
		str(e.ID)
		sv(e.Size)
		sv(e.Mtime)
		sv(e.Ctime)
		uv(e.Ino)
	}
	body := b.Bytes()
	out := make([]byte, 0, len(body)+binenc.MaxVarintLen64+sha256.Size)
	out = binenc.AppendUvarint(out, uint64(len(body)))
	out = append(out, body...)
	sum := sha256.Sum256(body)
	return append(out, sum[:]...)
}

// encode is the whole cache as a file: the magic and one whole record.
func (c *statCache) encode() []byte {
	return append([]byte(statCacheMagic), c.record(true)...)
}

var errBadStatCache = errors.New("stat cache damaged")

// decodeStatCache reads a journal. Any record cut short or failing its
// checksum refuses the whole file: a cache that cannot be read whole may
// stand for an older state than the store's (a record lost at the end
// takes a seal's pending entries with it), and is rebuilt instead.
func decodeStatCache(data []byte) (*statCache, error) {
	if !bytes.HasPrefix(data, []byte(statCacheMagic)) {
		return nil, errBadStatCache
	}
	rest := data[len(statCacheMagic):]
	c := newStatCache("")
	c.whole = false
	for n := 0; len(rest) > 0; n++ {
		size, k := binenc.Uvarint(rest)
		end := uint64(k) + size + sha256.Size
		if k <= 0 || end > uint64(len(rest)) {
			return nil, errBadStatCache
		}
		body := rest[k : uint64(k)+size]
		sum := sha256.Sum256(body)
		if !bytes.Equal(sum[:], rest[uint64(k)+size:end]) {
			return nil, errBadStatCache
		}
		if err := c.apply(body, n == 0); err != nil {
			return nil, err
		}
		rest = rest[end:]
		c.records++
	}
	if c.records == 1 {
		c.wholeLen = int64(len(data))
	} else {
		c.wholeLen = -1 // unknown: compact at the next size check
	}
	clear(c.dirtyPend)
	clear(c.dirtyStat)
	return c, nil
}

// apply decodes one record's body (its checksum verified) into c; the first
// record must be whole.
func (c *statCache) apply(body []byte, first bool) error {
	r := bytes.NewReader(body)
	var bad bool
	uv := func() uint64 {
		v, err := binenc.ReadUvarint(r)
		bad = bad || err != nil
		return v
	}
	sv := func() int64 {
		v, err := binenc.ReadVarint(r)
		bad = bad || err != nil
		return v
	}
	str := func() string {
		n := uv()
		if bad || n > uint64(r.Len()) {
			bad = true
			return ""
		}
		s := make([]byte, n)
		r.Read(s)
		return string(s)
	}
	kind, err := r.ReadByte()
	if err != nil || kind != recWhole && kind != recDelta || first != (kind == recWhole) {
		return errBadStatCache
	}
	var hdr statHeader
	if err := json.Unmarshal([]byte(str()), &hdr); bad || err != nil {
		return errBadStatCache
	}
	c.hdr = hdr
	for n := uv(); n > 0 && !bad; n-- {
		k := str()
		c.pending[k] = pendEntry{Mode: uint32(uv()), ID: str()}
	}
	for n := uv(); n > 0 && !bad; n-- {
		k := str()
		op, err := r.ReadByte()
		if err != nil || op > 1 {
			return errBadStatCache
		}
		if op == 0 {
			delete(c.stats, k)
			continue
		}
		e := statEntry{Mode: uint32(uv()), ID: str()}
		e.Size, e.Mtime, e.Ctime, e.Ino = sv(), sv(), sv(), uv()
		c.seq++
		e.seq = c.seq
		c.stats[k] = e
	}
	if bad || r.Len() != 0 {
		return errBadStatCache
	}
	return nil
}

// workTreeDev is the file system the work tree is on (0 when unknown).
func (s *Store) workTreeDev() uint64 {
	fi, err := os.Lstat(s.workTree)
	if err != nil {
		return 0
	}
	return device(fi)
}

func (s *Store) statCachePath() string { return filepath.Join(s.gitDir, cairnSubdir, "statcache") }

// maxStatCache bounds what is read of the cache file (~120 bytes an entry:
// two million files).
const maxStatCache = 256 << 20

// loadStatCache reads the cache file; a missing or damaged one is an empty
// cache with no base (the next seal is git's, which records one), its
// loaded state saying which (Store.indexVouched).
func (s *Store) loadStatCache(format string) *statCache {
	path := s.statCachePath()
	b, err := readNoFollow(path, maxStatCache)
	if err == nil {
		if c, err := decodeStatCache(b); err == nil && c.hdr.Format == format {
			c.file, _ = stampFile(path)
			c.loaded = loadedWhole
			if dev := s.workTreeDev(); c.hdr.Dev != dev {
				// Stat data of another file system (the work tree moved, or
				// a cache from before this was recorded) vouches for nothing.
				for k := range c.stats {
					c.forget(k)
				}
				c.hdr.Dev = dev
			}
			return c
		}
	}
	c := newStatCache(format)
	c.hdr.Dev = s.workTreeDev()
	c.file, _ = stampFile(path)
	c.loaded = loadedDamaged
	if errors.Is(err, fs.ErrNotExist) {
		c.loaded = loadedMissing
	}
	return c
}

// saveStatCache appends what changed since the last save as one record,
// or writes the whole cache through a temporary file and a rename when the
// journal should start over. No fsync of its own: the seal's file-system
// flush before the ref moves covers it.
func (s *Store) saveStatCache(c *statCache) error {
	c.trim()
	path := s.statCachePath()
	whole := c.whole || c.records >= statJournalMax || c.file.Size > 2*c.wholeLen+statJournalSlack
	if !whole {
		if st, ok := stampFile(path); !ok || st != c.file {
			whole = true // not the file last read or written
		}
	}
	if whole {
		data := c.encode()
		if err := replaceUnflushed(path, data); err != nil {
			return fmt.Errorf("write the stat cache: %w", err)
		}
		c.file, _ = stampFile(path)
		c.whole, c.records, c.wholeLen = false, 1, int64(len(data))
	} else {
		st, err := appendNoFollow(path, c.record(false))
		if err != nil {
			c.whole = true // the tail may hold part of a record
			return fmt.Errorf("write the stat cache: %w", err)
		}
		c.file = st
		c.records++
	}
	c.dirtyPend, c.dirtyStat = map[string]bool{}, map[string]bool{}
	return nil
}

// appendNoFollow appends data to the file at path (never through a
// symbolic link) and returns its stamp afterwards.
func appendNoFollow(path string, data []byte) (fileStamp, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|platform.NoFollow, 0)
	if err != nil {
		return fileStamp{}, err
	}
	_, err = f.Write(data)
	var fi os.FileInfo
	if err == nil {
		fi, err = f.Stat()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fileStamp{}, err
	}
	return stampOf(fi), nil
}

// createNoFollowTrunc writes data to path, replacing a file there but never
// writing through a symbolic link.
func createNoFollowTrunc(path string, data []byte) error {
	_ = os.Remove(path)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// replaceUnflushed replaces the file at path in cairn's own folder with
// data through path.tmp-<pid> (createNoFollowTrunc) renamed over it, not
// flushed: what it writes (the position, the stat cache, a restore's
// record) is flushed with the next fsync of the store, or is rebuilt.
// A temporary file a killed writer leaves is swept (cairnTmpName).
func replaceUnflushed(path string, data []byte) error {
	tmp := fmt.Sprintf("%s.tmp-%d", path, os.Getpid())
	if err := createNoFollowTrunc(tmp, data); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// statCacheFresh reports whether the file on disk is the one c was read
// from or last wrote (another cairn process may have written it since).
func (s *Store) statCacheFresh(c *statCache) bool {
	st, _ := stampFile(s.statCachePath())
	return st == c.file
}
