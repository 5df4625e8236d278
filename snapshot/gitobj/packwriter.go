package gitobj

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
)

// A PackWriter writes a seal's objects into packs as they come, for a seal
// that stores many (a first seal, a full reconcile): whole objects appended
// to a temporary pack file from any number of goroutines (each compresses
// its own object, then appends it under a lock), so memory holds one object
// per writer, never the seal's objects. A blob larger than a read whole is
// compressed from its reader straight into the pack. A pack is finished
// once it holds maxPack bytes, and at Close: its object count written in its
// header, its checksum appended, renamed to pack-<checksum>.pack, then its
// version 2 index written beside it through a temporary file, so git never
// sees a pack without its index (docs/cairn-formats.md, "Packs and loose
// objects"). Nothing is fsynced: the caller flushes the file system before
// a ref names an object.
type PackWriter struct {
	db      *DB
	maxPack int64
	level   int // zlib level of the pack's entries

	mu  sync.Mutex
	f   *os.File // the pack being written, nil before the first object
	bw  *bufio.Writer
	off uint64 // where the next entry goes
	// What the writer wrote, object i at ids[i*size:], crcs[i], offs[i]
	// (offset in its pack); the pack under way holds objects first and on.
	// table finds an object by id: open addressing on the id's first bytes,
	// at most half full, holding i+1 (0: free). Per object this is about 40
	// bytes for SHA-1, a third of a map keyed by hex (a first seal holds
	// one object per file).
	ids   []byte
	crcs  []uint32
	offs  []uint64
	first int
	table []int32
	packs []string // packs finished
	err   error    // the first write that failed: the writer is done
}

// rawID is an object id in bytes, sized for the longest (SHA-256).
type rawID [32]byte

// rawOf decodes hex id of format f, ok false when it is not one.
func rawOf(f Format, id string) (r rawID, ok bool) {
	if len(id) != 2*f.Size {
		return r, false
	}
	_, err := hex.Decode(r[:f.Size], []byte(id))
	return r, err == nil
}

// find returns the slot of table where raw is, or the free slot where it
// would go. Called with w.mu held, table not empty.
func (w *PackWriter) find(raw *rawID) (slot int, found bool) {
	hs := w.db.Format.Size
	mask := len(w.table) - 1
	for s := int(binary.BigEndian.Uint64(raw[:8])) & mask; ; s = (s + 1) & mask {
		i := int(w.table[s]) - 1
		if i < 0 {
			return s, false
		}
		if string(w.ids[i*hs:(i+1)*hs]) == string(raw[:hs]) {
			return s, true
		}
	}
}

// has reports whether the writer holds raw. Called with w.mu held.
func (w *PackWriter) has(raw *rawID) bool {
	if len(w.table) == 0 {
		return false
	}
	_, found := w.find(raw)
	return found
}

// count is how many objects the writer wrote.
func (w *PackWriter) count() int { return len(w.crcs) }

// DefaultMaxPack is the size at which a PackWriter starts a new pack.
const DefaultMaxPack = 1 << 30

// NewPackWriter starts a pack writer for d: packs of at most about maxPack
// bytes (one object may take it past), entries compressed at zlib level
// level.
func (d *DB) NewPackWriter(maxPack int64, level int) *PackWriter {
	if maxPack <= 0 {
		maxPack = DefaultMaxPack
	}
	return &PackWriter{db: d, maxPack: maxPack, level: level}
}

// Has reports whether the writer holds object id (hex).
func (w *PackWriter) Has(id string) bool {
	raw, ok := rawOf(w.db.Format, id)
	if !ok {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.has(&raw)
}

// Write adds an object and returns its id.
func (w *PackWriter) Write(typ string, data []byte) (string, error) {
	id := w.db.Format.Hash(typ, data)
	return id, w.WriteKnown(Object{ID: id, Type: typ, Data: data})
}

// WriteKnown adds an object whose id is known (Format.Hash); one the writer
// holds already is not written again.
func (w *PackWriter) WriteKnown(o Object) error {
	raw, ok := rawOf(w.db.Format, o.ID)
	if !ok {
		return fmt.Errorf("pack object: bad id %q", o.ID)
	}
	w.mu.Lock()
	dup := w.has(&raw)
	w.mu.Unlock()
	if dup {
		return nil
	}
	typ, ok := packTypes[o.Type]
	if !ok {
		return fmt.Errorf("pack object %s: unknown type %q", o.ID, o.Type)
	}
	buf := getEntryBuf()
	defer putEntryBuf(buf)
	buf.b = appendEntryHeader(buf.b[:0], typ, uint64(len(o.Data)))
	if err := deflateAt(buf, w.level, func(zw io.Writer) error { _, err := zw.Write(o.Data); return err }); err != nil {
		return fmt.Errorf("pack object %s: %w", o.ID, err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.has(&raw) {
		return nil
	}
	if err := w.begin(); err != nil {
		return err
	}
	if _, err := w.bw.Write(buf.b); err != nil {
		return w.fail(err)
	}
	return w.added(&raw, uint64(len(buf.b)), crc32.ChecksumIEEE(buf.b))
}

// entryBuf collects one compressed entry.
type entryBuf struct{ b []byte }

// entryBufs keeps the writers' entry buffers between objects, so a seal of
// many files does not allocate (and collect) one per file. A buffer grown
// past entryBufKeep by a large object is let go.
var entryBufs = sync.Pool{New: func() any { return new(entryBuf) }}

const entryBufKeep = 256 << 10

func getEntryBuf() *entryBuf { return entryBufs.Get().(*entryBuf) }

func putEntryBuf(b *entryBuf) {
	if cap(b.b) <= entryBufKeep {
		b.b = b.b[:0]
		entryBufs.Put(b)
	}
}

func (e *entryBuf) Write(p []byte) (int, error) { e.b = append(e.b, p...); return len(p), nil }

// appendEntryHeader appends a pack entry's type and size.
func appendEntryHeader(b []byte, typ int, n uint64) []byte {
	c := byte(typ<<4) | byte(n&0x0f)
	for n >>= 4; n > 0; n >>= 7 {
		b = append(b, c|0x80)
		c = byte(n & 0x7f)
	}
	return append(b, c)
}

// WriteBlobFrom stores a blob of exactly size bytes read from r and returns
// its id: read whole up to 1 MiB, else compressed from r as it is read into
// a temporary file beside the packs (so a large file is never in memory,
// and the other writers go on meanwhile), then copied into the pack.
// ErrChanged means r held another number of bytes; nothing of it stays.
func (w *PackWriter) WriteBlobFrom(r io.Reader, size int64) (string, error) {
	if size <= smallBlob {
		data, err := readExactly(r, size)
		if err != nil {
			return "", err
		}
		return w.Write("blob", data)
	}
	if err := w.Err(); err != nil {
		return "", err
	}
	dir := filepath.Join(w.db.Dir, "pack")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("write blob: %w", err)
	}
	spool, err := createTemp(dir, "tmp_pack_blob_")
	if err != nil {
		return "", fmt.Errorf("write blob: %w", err)
	}
	defer discard(spool)
	crc := crc32.NewIEEE()
	bw := bufio.NewWriterSize(io.MultiWriter(spool, crc), 64<<10)
	cw := &countWriter{w: bw}
	cw.Write(appendEntryHeader(nil, packTypes["blob"], uint64(size)))
	h := w.db.Format.new()
	err = deflateAt(cw, w.level, func(zw io.Writer) error {
		writeHeader(h, "blob", size)
		n, err := io.CopyN(io.MultiWriter(h, zw), r, size)
		if err == io.EOF || err == nil && n == size && moreThan(r) {
			return ErrChanged
		}
		return err
	})
	if err == nil {
		err = cw.err
	}
	if err == nil {
		err = bw.Flush()
	}
	if errors.Is(err, ErrChanged) {
		return "", err
	} else if err != nil {
		return "", fmt.Errorf("write blob: %w", err)
	}
	var raw rawID
	copy(raw[:], h.Sum(nil))
	id := hex.EncodeToString(raw[:w.db.Format.Size])

	w.mu.Lock()
	defer w.mu.Unlock()
	if w.has(&raw) {
		return id, nil
	}
	if err := w.begin(); err != nil {
		return "", err
	}
	// The buffered entries go first, then this one, copied whole.
	if err := w.bw.Flush(); err != nil {
		return "", w.fail(err)
	}
	if _, err := spool.Seek(0, io.SeekStart); err != nil {
		return "", w.fail(err)
	}
	n, err := io.Copy(w.f, spool)
	if err == nil && uint64(n) != cw.n {
		err = io.ErrShortWrite
	}
	if err != nil {
		return "", w.fail(err)
	}
	return id, w.added(&raw, cw.n, crc.Sum32())
}

// countWriter counts what it writes and keeps the first error.
type countWriter struct {
	w   io.Writer
	n   uint64
	err error
}

func (c *countWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += uint64(n)
	c.err = err
	return n, err
}

// begin opens a new pack file when none is open. Called with w.mu held.
func (w *PackWriter) begin() error {
	if w.err != nil {
		return w.err
	}
	if w.f != nil {
		return nil
	}
	dir := filepath.Join(w.db.Dir, "pack")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return w.fail(err)
	}
	f, err := createTemp(dir, "tmp_pack_")
	if err != nil {
		return w.fail(err)
	}
	w.f, w.off, w.first = f, 12, w.count()
	if w.bw == nil {
		w.bw = bufio.NewWriterSize(f, 256<<10)
	} else {
		w.bw.Reset(f)
	}
	// The object count is written when the pack is finished.
	if _, err := w.bw.Write([]byte("PACK\x00\x00\x00\x02\x00\x00\x00\x00")); err != nil {
		return w.fail(err)
	}
	return nil
}

// added notes an entry of n bytes just written, and finishes the pack once
// it is full. Called with w.mu held.
func (w *PackWriter) added(raw *rawID, n uint64, crc uint32) error {
	if 2*(w.count()+1) > len(w.table) {
		w.rehash(max(1024, 2*len(w.table)))
	}
	s, _ := w.find(raw)
	w.table[s] = int32(w.count() + 1)
	w.ids = append(w.ids, raw[:w.db.Format.Size]...)
	w.crcs = append(w.crcs, crc)
	w.offs = append(w.offs, w.off)
	w.off += n
	if w.off >= uint64(w.maxPack) {
		return w.finish()
	}
	return nil
}

// rehash makes the table size slots (a power of two) and places every
// object written in it. Called with w.mu held.
func (w *PackWriter) rehash(size int) {
	w.table = make([]int32, size)
	hs := w.db.Format.Size
	for i := range w.count() {
		var r rawID
		copy(r[:], w.ids[i*hs:(i+1)*hs])
		s, _ := w.find(&r)
		w.table[s] = int32(i + 1)
	}
}

// Reserve makes room for n more objects: a writer told how many it will
// write (a first seal: one per file and per folder) neither grows its
// lists nor rebuilds its table as it goes, each growth a copy held beside
// the old one.
func (w *PackWriter) Reserve(n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n <= 0 || w.err != nil {
		return
	}
	w.ids = slices.Grow(w.ids, n*w.db.Format.Size)
	w.crcs = slices.Grow(w.crcs, n)
	w.offs = slices.Grow(w.offs, n)
	size := max(1024, len(w.table))
	for 2*(w.count()+n) > size {
		size *= 2
	}
	if size > len(w.table) {
		w.rehash(size)
	}
}

// fail ends the writer with err, removing the pack under way. Called with
// w.mu held.
func (w *PackWriter) fail(err error) error {
	if w.err == nil {
		w.err = fmt.Errorf("write pack: %w", err)
	}
	if w.f != nil {
		discard(w.f)
		w.f = nil
	}
	return w.err
}

// finish completes the pack under way: its count, its checksum (the file
// read back: the count comes first), its name, then its index. Called with
// w.mu held.
func (w *PackWriter) finish() error {
	if w.f == nil {
		return nil
	}
	f := w.f
	n := w.count() - w.first
	if n == 0 { // every entry was taken back
		discard(f)
		w.f = nil
		return nil
	}
	if err := w.bw.Flush(); err != nil {
		return w.fail(err)
	}
	var cnt [4]byte
	binary.BigEndian.PutUint32(cnt[:], uint32(n))
	if _, err := f.WriteAt(cnt[:], 8); err != nil {
		return w.fail(err)
	}
	h := w.db.Format.new()
	if _, err := io.Copy(h, bufio.NewReaderSize(io.NewSectionReader(f, 0, int64(w.off)), 256<<10)); err != nil {
		return w.fail(err)
	}
	sum := h.Sum(nil)
	if _, err := f.WriteAt(sum, int64(w.off)); err != nil {
		return w.fail(err)
	}
	hs := w.db.Format.Size
	ids, crcs, offs := w.ids[w.first*hs:], w.crcs[w.first:], w.offs[w.first:]
	idx := w.db.Format.packIndexOf(n, func(i int) []byte { return ids[i*hs : (i+1)*hs] },
		func(i int) uint32 { return crcs[i] }, func(i int) uint64 { return offs[i] }, sum)
	w.f = nil
	dir := filepath.Join(w.db.Dir, "pack")
	base := filepath.Join(dir, "pack-"+hex.EncodeToString(sum))
	created := false
	if w.db.freshen(base + ".pack") { // the same objects in the same order: that pack
		discard(f)
	} else if err := w.db.finalize(f, base+".pack", filepath.Base(base)+".pack"); err != nil {
		return w.fail(err)
	} else {
		created = true
	}
	var err error
	if fault := idxFaultHook(); fault != nil {
		err = fault()
	} else {
		err = w.db.writeFileOnce(dir, base+".idx", idx)
	}
	if err != nil {
		// A pack without its index is invisible to git and would stay: the
		// one just written goes (as DB.writePack does).
		if created {
			if _, serr := os.Lstat(base + ".idx"); serr != nil {
				os.Remove(base + ".pack")
			}
		}
		return w.fail(err)
	}
	w.packs = append(w.packs, base+".pack")
	w.first = w.count()
	return nil
}

// Close finishes the pack under way and returns the packs written; after an
// error, the packs finished before it (whole, named by an index) and the error.
// The writer then lets go of its list of objects (a first seal's is one per
// file): Has and Len know none of them after Close.
func (w *PackWriter) Close() ([]string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.finish()
	}
	w.ids, w.crcs, w.offs, w.table, w.first = nil, nil, nil, nil, 0
	return w.packs, w.err
}

// Abort drops the pack under way (a seal that stops before its objects are
// needed); packs finished stay, as objects no ref names yet.
func (w *PackWriter) Abort() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f != nil {
		discard(w.f)
		w.f = nil
	}
	if w.err == nil {
		w.err = errors.New("write pack: aborted")
	}
}

// Len is how many objects the writer wrote.
func (w *PackWriter) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.count()
}

// Err is the error that ended the writer (a pack that could not be
// written), or nil.
func (w *PackWriter) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// ReadBlob reads exactly size bytes from r: ErrChanged when r holds fewer
// or more (a file that changed while it was read).
func ReadBlob(r io.Reader, size int64) ([]byte, error) { return readExactly(r, size) }

// ReadBlobInto is ReadBlob into buf, grown when it is smaller than size:
// a caller that reads many files keeps one buffer.
func ReadBlobInto(r io.Reader, size int64, buf []byte) ([]byte, error) {
	if int64(cap(buf)) < size {
		return readExactly(r, size)
	}
	return readFill(r, buf[:size])
}
