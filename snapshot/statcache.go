package snapshot

import (
	"bytes"
	"crypto/sha256"
	binenc "encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
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
// It is written whole, atomically, before the ref moves (the file system
// flush before the ref covers it, as it covers git's index).

const statCacheMagic = "cairn-statcache 1\n"

// statCacheMax bounds the stat entries kept (the most recently hashed):
// they only spare re-reading files named again.
const statCacheMax = 4096

// pendingSyncMax is how many pending entries make a seal write them into
// the index at its end, so the cache stays small.
const pendingSyncMax = 4096

type fileStamp struct {
	Size  int64  `json:"size"`
	Mtime int64  `json:"mtime"`
	Ctime int64  `json:"ctime"`
	Ino   uint64 `json:"ino"`
}

func stampOf(fi fs.FileInfo) fileStamp {
	return fileStamp{Size: fi.Size(), Mtime: fi.ModTime().UnixNano(), Ctime: ctime(fi), Ino: inode(fi)}
}

func stampFile(path string) (fileStamp, bool) {
	fi, err := os.Lstat(path)
	if err != nil {
		return fileStamp{}, false
	}
	return stampOf(fi), true
}

type statHeader struct {
	Format    string    `json:"format"`
	Base      string    `json:"base,omitempty"`
	Index     fileStamp `json:"index"`
	WrittenAt int64     `json:"-"`
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
	// process's write shows as a change. Its mtime is the racy-git bound.
	file fileStamp
}

func newStatCache(format string) *statCache {
	return &statCache{hdr: statHeader{Format: format}, pending: map[string]pendEntry{}, stats: map[string]statEntry{}}
}

// lookup returns the blob of rel if the cache vouches for a file with this
// stat: same size, times, inode and mode, and older than the cache file
// (git's racy rule: a file changed in the same tick as the cache was
// written may have changed again unseen, so it is read again).
func (c *statCache) lookup(rel string, st fileStamp, mode uint32) (string, bool) {
	e, ok := c.stats[rel]
	if !ok || e.fileStamp != st || e.Mode != mode || c.file.Mtime == 0 || st.Mtime >= c.file.Mtime || st.Ctime >= c.file.Mtime {
		return "", false
	}
	return e.ID, true
}

func (c *statCache) remember(rel string, st fileStamp, mode uint32, id string) {
	c.seq++
	c.stats[rel] = statEntry{fileStamp: st, Mode: mode, ID: id, seq: c.seq}
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
			delete(c.stats, k)
		}
	}
}

// encode: magic, header JSON line, pending and stat sections, then the
// SHA-256 of everything before it (a torn or damaged file is not trusted).
func (c *statCache) encode() []byte {
	var b bytes.Buffer
	b.WriteString(statCacheMagic)
	h, _ := json.Marshal(c.hdr)
	b.Write(h)
	b.WriteByte('\n')
	var tmp [binenc.MaxVarintLen64]byte
	uv := func(v uint64) { b.Write(tmp[:binenc.PutUvarint(tmp[:], v)]) }
	sv := func(v int64) { b.Write(tmp[:binenc.PutVarint(tmp[:], v)]) }
	str := func(s string) { uv(uint64(len(s))); b.WriteString(s) }
	keys := make([]string, 0, len(c.pending))
	for k := range c.pending {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	uv(uint64(len(keys)))
	for _, k := range keys {
		e := c.pending[k]
		str(k)
		uv(uint64(e.Mode))
		str(e.ID)
	}
	keys = keys[:0]
	for k := range c.stats {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return int(c.stats[a].seq) - int(c.stats[b].seq) })
	uv(uint64(len(keys)))
	for _, k := range keys {
		e := c.stats[k]
		str(k)
		uv(uint64(e.Mode))
		str(e.ID)
		sv(e.Size)
		sv(e.Mtime)
		sv(e.Ctime)
		uv(e.Ino)
	}
	sum := sha256.Sum256(b.Bytes())
	b.Write(sum[:])
	return b.Bytes()
}

var errBadStatCache = errors.New("stat cache damaged")

func decodeStatCache(data []byte) (*statCache, error) {
	if len(data) < len(statCacheMagic)+sha256.Size || !bytes.HasPrefix(data, []byte(statCacheMagic)) {
		return nil, errBadStatCache
	}
	body, sum := data[:len(data)-sha256.Size], data[len(data)-sha256.Size:]
	if s := sha256.Sum256(body); !bytes.Equal(s[:], sum) {
		return nil, errBadStatCache
	}
	body = body[len(statCacheMagic):]
	line, rest, ok := bytes.Cut(body, []byte{'\n'})
	if !ok {
		return nil, errBadStatCache
	}
	c := newStatCache("")
	if err := json.Unmarshal(line, &c.hdr); err != nil {
		return nil, errBadStatCache
	}
	r := bytes.NewReader(rest)
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
	for n := uv(); n > 0 && !bad; n-- {
		k := str()
		c.pending[k] = pendEntry{Mode: uint32(uv()), ID: str()}
	}
	for n := uv(); n > 0 && !bad; n-- {
		k := str()
		e := statEntry{Mode: uint32(uv()), ID: str()}
		e.Size, e.Mtime, e.Ctime, e.Ino = sv(), sv(), sv(), uv()
		c.seq++
		e.seq = c.seq
		c.stats[k] = e
	}
	if bad || r.Len() != 0 {
		return nil, errBadStatCache
	}
	return c, nil
}

func (s *Store) statCachePath() string { return filepath.Join(s.gitDir, cairnSubdir, "statcache") }

// loadStatCache reads the cache file; a missing or damaged one is an empty
// cache with no base (the next seal is git's, which records one).
func (s *Store) loadStatCache(format string) *statCache {
	path := s.statCachePath()
	b, err := readNoFollow(path, 1<<30)
	if err == nil {
		if c, err := decodeStatCache(b); err == nil && c.hdr.Format == format {
			c.file, _ = stampFile(path)
			return c
		}
	}
	c := newStatCache(format)
	c.file, _ = stampFile(path)
	return c
}

// saveStatCache writes the cache atomically, without an fsync of its own:
// the seal's file-system flush before the ref moves covers it.
func (s *Store) saveStatCache(c *statCache) error {
	c.trim()
	path := s.statCachePath()
	tmp := fmt.Sprintf("%s.tmp-%d", path, os.Getpid())
	if err := createNoFollowTrunc(tmp, c.encode()); err != nil {
		return fmt.Errorf("write the stat cache: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write the stat cache: %w", err)
	}
	c.file, _ = stampFile(path)
	return nil
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

// statCacheFresh reports whether the file on disk is the one c was read
// from or last wrote (another cairn process may have written it since).
func (s *Store) statCacheFresh(c *statCache) bool {
	st, _ := stampFile(s.statCachePath())
	return st == c.file
}
