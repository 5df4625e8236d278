package gitobj

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/cairn-dev/cairn/platform"
)

// A Batch collects the new objects of one seal and writes them as one pack
// and its index (docs/cairn-formats.md, "Packs and loose objects"): two
// files instead of one per object. Creating a file costs far more than
// compressing a small object, and, when the folders' blocks have left the
// cache, a disk read per object's folder too. Objects are compressed as they are added, from
// any goroutine; Flush writes the pack. Blobs too large to hold whole, and
// objects once the batch holds maxBatch bytes, are written loose at once.
// Nothing is fsynced: the caller flushes the file system before a ref names
// an object, as for loose ones.
type Batch struct {
	db   *DB
	mu   sync.Mutex
	objs []packEntry
	seen map[string]bool
	size int64
}

// maxBatch bounds the compressed bytes a batch holds in memory.
const maxBatch = 64 << 20

// packEntry is an object for a new pack: its raw id, its entry as a pack
// stores it (type and size, then zlib) in data or, copied from another
// pack, at off in src, and the entry's CRC-32.
type packEntry struct {
	id      []byte
	data    []byte
	src     io.ReaderAt
	srcPath string
	off     int64
	n       int64 // length of the entry
	crc     uint32
}

// Batch starts a batch of objects for db.
func (d *DB) Batch() *Batch { return &Batch{db: d, seen: map[string]bool{}} }

// Len is how many objects the batch holds for its pack.
func (b *Batch) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.objs)
}

// Write adds an object and returns its id.
func (b *Batch) Write(typ string, data []byte) (string, error) {
	id := b.db.Format.Hash(typ, data)
	return id, b.add(Object{ID: id, Type: typ, Data: data})
}

// WriteAll adds objects whose ids are known, compressing them on several
// goroutines.
func (b *Batch) WriteAll(objs []Object) error {
	return ForEach(len(objs), func(i int) error { return b.add(objs[i]) })
}

// WriteBlobFrom stores a blob of exactly size bytes read from r, as
// DB.WriteBlobFrom does: one read whole goes into the pack, a larger one is
// written loose as it is read.
func (b *Batch) WriteBlobFrom(r io.Reader, size int64) (string, error) {
	if size > smallBlob {
		return b.db.WriteBlobFrom(r, size)
	}
	data, err := readExactly(r, size)
	if err != nil {
		return "", err
	}
	return b.Write("blob", data)
}

// Has reports whether the batch holds object id for its pack.
func (b *Batch) Has(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.seen[id]
}

func (b *Batch) add(o Object) error {
	b.mu.Lock()
	dup, full := b.seen[o.ID], b.size >= maxBatch
	b.mu.Unlock()
	if dup {
		return nil
	}
	if full {
		return b.db.writeKnown(o)
	}
	typ, ok := packTypes[o.Type]
	if !ok {
		return fmt.Errorf("pack object %s: unknown type %q", o.ID, o.Type)
	}
	raw, err := hex.DecodeString(o.ID)
	if err != nil || len(raw) != b.db.Format.Size {
		return fmt.Errorf("pack object: bad id %q", o.ID)
	}
	var buf bytes.Buffer
	buf.Grow(len(o.Data)/2 + 32)
	n := uint64(len(o.Data))
	c := byte(typ<<4) | byte(n&0x0f)
	for n >>= 4; n > 0; n >>= 7 {
		buf.WriteByte(c | 0x80)
		c = byte(n & 0x7f)
	}
	buf.WriteByte(c)
	if err := b.db.deflateTo(&buf, func(w io.Writer) error { _, err := w.Write(o.Data); return err }); err != nil {
		return fmt.Errorf("pack object %s: %w", o.ID, err)
	}
	e := packEntry{id: raw, data: buf.Bytes(), n: int64(buf.Len()), crc: crc32.ChecksumIEEE(buf.Bytes())}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.seen[o.ID] {
		return nil
	}
	b.seen[o.ID] = true
	b.objs = append(b.objs, e)
	b.size += int64(len(e.data))
	return nil
}

// packTypes are the pack's numbers for whole (undeltified) objects.
var packTypes = map[string]int{"commit": 1, "tree": 2, "blob": 3, "tag": 4}

// Flush writes the objects added since the last Flush as one pack and its
// index in objects/pack, and returns the pack's path ("" when there were
// none). The pack is named before its index, as git does: a pack becomes
// visible with its index, whole.
func (b *Batch) Flush() (string, error) {
	b.mu.Lock()
	objs := b.objs
	b.objs, b.size = nil, 0
	b.mu.Unlock()
	if len(objs) == 0 {
		return "", nil
	}
	return b.db.writePack(objs)
}

// writePack writes objs, whose ids are distinct, as a pack and its index,
// and returns the pack's path.
func (d *DB) writePack(objs []packEntry) (string, error) {
	f := d.Format
	dir := filepath.Join(d.Dir, "pack")
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("write pack: %w", err)
	}
	tmp, err := createTemp(dir, "tmp_pack_")
	if err != nil {
		return "", fmt.Errorf("write pack: %w", err)
	}
	h := f.new()
	bw := bufio.NewWriterSize(io.MultiWriter(tmp, h), 64<<10)
	var hdr [12]byte
	copy(hdr[:], "PACK")
	binary.BigEndian.PutUint32(hdr[4:], 2)
	binary.BigEndian.PutUint32(hdr[8:], uint32(len(objs)))
	bw.Write(hdr[:])
	offsets := make([]uint64, len(objs))
	off := uint64(len(hdr))
	for i, o := range objs {
		offsets[i] = off
		var err error
		if o.src != nil {
			// A copied entry must be whole and match its CRC-32: a damaged
			// pack is not rewritten into one that looks sound.
			c := crc32.NewIEEE()
			var n int64
			n, err = io.CopyN(io.MultiWriter(bw, c), io.NewSectionReader(o.src, o.off, o.n), o.n)
			if err == nil && (n != o.n || c.Sum32() != o.crc) {
				err = &damagedPack{path: o.srcPath, id: o.id}
			}
		} else {
			_, err = bw.Write(o.data)
		}
		if err != nil {
			discard(tmp)
			return "", fmt.Errorf("write pack: %w", err)
		}
		off += uint64(o.n)
	}
	if err := bw.Flush(); err != nil {
		discard(tmp)
		return "", fmt.Errorf("write pack: %w", err)
	}
	sum := h.Sum(nil)
	if _, err := tmp.Write(sum); err != nil {
		discard(tmp)
		return "", fmt.Errorf("write pack: %w", err)
	}

	idx := f.packIndex(objs, offsets, sum)

	base := filepath.Join(dir, "pack-"+hex.EncodeToString(sum))
	created := false
	if d.freshen(base + ".pack") { // the same objects in the same order: this pack
		discard(tmp)
	} else if err := d.finalize(tmp, base+".pack", filepath.Base(base)+".pack"); err != nil {
		return "", err
	} else {
		created = true
	}
	if fault := idxFaultHook(); fault != nil {
		err = fault()
	} else {
		err = d.writeFileOnce(dir, base+".idx", idx)
	}
	if err != nil {
		// A pack without its index is invisible to git and would stay for
		// good (a full disk, then retried seals, would leave one each). Only
		// the one just written goes: a pack found already there (one left
		// without its index, which the next open indexes) is not this
		// write's to remove.
		if _, serr := os.Lstat(base + ".idx"); created && errors.Is(serr, fs.ErrNotExist) {
			os.Remove(base + ".pack")
		}
		return "", err
	}
	return base + ".pack", nil
}

// packIndex encodes the version 2 index of a pack holding objs (their ids
// and CRC-32s) at offsets, whose checksum is sum: fan-out, ids, CRC-32s,
// offsets, large offsets, the pack's checksum, its own; objects in id order.
func (f Format) packIndex(objs []packEntry, offsets []uint64, sum []byte) []byte {
	return f.packIndexOf(len(objs), func(i int) []byte { return objs[i].id },
		func(i int) uint32 { return objs[i].crc }, func(i int) uint64 { return offsets[i] }, sum)
}

// packIndexOf is packIndex over n objects given by their id, CRC-32 and
// offset, so a writer keeps them as compactly as it likes.
func (f Format) packIndexOf(n int, id func(int) []byte, crc func(int) uint32, offset func(int) uint64, sum []byte) []byte {
	order := make([]int32, n)
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int { return bytes.Compare(id(int(a)), id(int(b))) })
	var idx bytes.Buffer
	idx.Grow(8 + 256*4 + n*(f.Size+8) + 2*f.Size)
	idx.Write([]byte{0xff, 't', 'O', 'c'})
	var w4 [4]byte
	put := func(v uint32) { binary.BigEndian.PutUint32(w4[:], v); idx.Write(w4[:]) }
	put(2)
	var fan [256]uint32
	for i := range n {
		fan[id(i)[0]]++
	}
	total := uint32(0)
	for i := range fan {
		total += fan[i]
		put(total)
	}
	for _, i := range order {
		idx.Write(id(int(i)))
	}
	for _, i := range order {
		put(crc(int(i)))
	}
	var large []uint64
	for _, i := range order {
		off := offset(int(i))
		if off < 1<<31 {
			put(uint32(off))
			continue
		}
		put(uint32(1<<31 | len(large)))
		large = append(large, off)
	}
	for _, off := range large {
		binary.Write(&idx, binary.BigEndian, off)
	}
	idx.Write(sum)
	ih := f.new()
	ih.Write(idx.Bytes())
	idx.Write(ih.Sum(nil))
	return idx.Bytes()
}

// writeFileOnce writes data to a new read-only file named final, through a
// temporary file in dir; a file already named final is kept (a pack's name
// is its checksum: the same name is the same bytes).
func (d *DB) writeFileOnce(dir, final string, data []byte) error {
	if d.freshen(final) {
		return nil
	}
	tmp, err := createTemp(dir, "tmp_idx_")
	if err != nil {
		return fmt.Errorf("write %s: %w", filepath.Base(final), err)
	}
	if _, err := tmp.Write(data); err != nil {
		discard(tmp)
		return fmt.Errorf("write %s: %w", filepath.Base(final), err)
	}
	return d.finalize(tmp, final, filepath.Base(final))
}

// readExactly reads exactly size bytes from r: ErrChanged when r holds
// fewer or more.
func readExactly(r io.Reader, size int64) ([]byte, error) {
	return readFill(r, make([]byte, size))
}

// readFill fills data from r: ErrChanged when r holds fewer bytes or more.
func readFill(r io.Reader, data []byte) ([]byte, error) {
	if _, err := io.ReadFull(r, data); err == io.EOF || err == io.ErrUnexpectedEOF {
		return nil, ErrChanged
	} else if err != nil {
		return nil, fmt.Errorf("write blob: %w", err)
	}
	if moreThan(r) {
		return nil, ErrChanged
	}
	return data, nil
}

// rollUpMax is the size up to which a pack may be rolled up: larger ones are
// left to git's repack (maintenance), as are packs with deltas.
const rollUpMax = 8 << 20

// RollUp merges small packs of whole objects (the packs batches write) once
// there are at least minPacks of them, as git's geometric repack does: the
// smallest are merged until the rest grow by a factor of two at least, so a
// store holds a few dozen packs however many seals wrote one, and each
// object is copied a logarithmic number of times. Entries are copied as
// they are, never decompressed. A pack with a .keep, .promisor, .bitmap or
// .mtimes file, a delta, or an index other than version 2 is left alone.
//
// It returns the new pack and the packs it replaces, which the caller
// removes with RemovePacks once the new one is flushed to disk. A pack that
// cannot be read is left out (another process may be repacking).
func (d *DB) RollUp(minPacks int) (string, []string, error) {
	dir := filepath.Join(d.Dir, "pack")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", nil, err
	}
	for _, e := range ents {
		if e.Name() == "multi-pack-index" {
			// It names the packs it covers; removing one would leave it
			// stale (git falls back, fsck complains). Left to git.
			return "", nil, nil
		}
	}
	names := map[string]bool{}
	for _, e := range ents {
		names[e.Name()] = true
	}
	type cand struct {
		base string // path without .pack
		size int64
	}
	var cands []cand
	for _, e := range ents {
		n := e.Name()
		stem, ok := strings.CutSuffix(n, ".pack")
		if !ok || !strings.HasPrefix(n, "pack-") || !names[stem+".idx"] ||
			names[stem+".keep"] || names[stem+".promisor"] || names[stem+".bitmap"] || names[stem+".mtimes"] {
			continue
		}
		fi, err := e.Info()
		if err != nil || !fi.Mode().IsRegular() || fi.Size() > rollUpMax || d.isDamaged(filepath.Join(dir, n)) {
			continue
		}
		cands = append(cands, cand{filepath.Join(dir, stem), fi.Size()})
	}
	if len(cands) < minPacks {
		return "", nil, nil
	}
	// The factor-2 split: packs from split on grow by two at least; those
	// before it, and any the merged total reaches, are rolled up.
	slices.SortFunc(cands, func(a, b cand) int { return cmp.Compare(a.size, b.size) })
	split := 0
	for i := len(cands) - 1; i > 0; i-- {
		if cands[i].size < 2*cands[i-1].size {
			split = i
			break
		}
	}
	var total int64
	for _, c := range cands[:split+1] {
		total += c.size
	}
	for split+1 < len(cands) && cands[split+1].size < 2*total {
		split++
		total += cands[split].size
	}
	roll := cands[:split+1]
	if len(roll) < 2 {
		return "", nil, nil
	}

	var (
		objs     []packEntry
		seen     = map[string]bool{}
		replaced []string
		files    []*os.File
	)
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	for _, c := range roll {
		f, entries, err := d.readPack(c.base, c.size)
		if err != nil {
			continue // being repacked by git meanwhile, or not one of ours
		}
		files = append(files, f)
		replaced = append(replaced, c.base+".pack")
		for _, e := range entries {
			if k := string(e.id); !seen[k] {
				seen[k] = true
				objs = append(objs, e)
			}
		}
	}
	if len(replaced) < 2 {
		return "", nil, nil
	}
	pack, err := d.writePack(objs)
	var dp *damagedPack
	if errors.As(err, &dp) {
		d.noteDamaged(dp.path) // said once; the next roll-ups go on without it
	}
	if err != nil {
		return "", nil, err
	}
	// The new pack's name is its checksum: the same content as a pack rolled
	// up (one pack's objects, deduplicated into the same order) is that pack.
	replaced = slices.DeleteFunc(replaced, func(p string) bool { return p == pack })
	return pack, replaced, nil
}

// readPack opens a pack of whole objects and lists its entries by offset,
// from its version 2 index; an error for anything else.
func (d *DB) readPack(base string, size int64) (*os.File, []packEntry, error) {
	idx, err := readRegular(base+".idx", rollUpMax)
	if err != nil {
		return nil, nil, err
	}
	hs := d.Format.Size
	if len(idx) < 8+256*4 || string(idx[:8]) != "\xfftOc\x00\x00\x00\x02" {
		return nil, nil, errors.New("not a version 2 pack index")
	}
	n := int(binary.BigEndian.Uint32(idx[8+255*4:]))
	ids, crcs, offs := 8+256*4, 8+256*4+n*hs, 8+256*4+n*(hs+4)
	larges := offs + n*4
	if n == 0 || larges+2*hs > len(idx) {
		return nil, nil, errors.New("pack index too short")
	}
	entries := make([]packEntry, n)
	for i := range n {
		e := &entries[i]
		e.id = idx[ids+i*hs : ids+(i+1)*hs]
		e.crc = binary.BigEndian.Uint32(idx[crcs+i*4:])
		o := binary.BigEndian.Uint32(idx[offs+i*4:])
		e.off = int64(o)
		if o&(1<<31) != 0 {
			k := larges + int(o&^(1<<31))*8
			if k+8 > len(idx)-2*hs {
				return nil, nil, errors.New("pack index: bad large offset")
			}
			e.off = int64(binary.BigEndian.Uint64(idx[k:]))
		}
	}
	slices.SortFunc(entries, func(a, b packEntry) int { return cmp.Compare(a.off, b.off) })
	if entries[0].off != 12 {
		return nil, nil, errors.New("pack index does not start at the first entry")
	}
	f, err := platform.OpenRegular(base + ".pack")
	if err != nil {
		return nil, nil, err
	}
	var hdr [12]byte
	if _, err := f.ReadAt(hdr[:], 0); err != nil || string(hdr[:8]) != "PACK\x00\x00\x00\x02" ||
		int(binary.BigEndian.Uint32(hdr[8:])) != n {
		f.Close()
		return nil, nil, errors.New("pack header does not match its index")
	}
	end := size - int64(hs)
	for i := range entries {
		e := &entries[i]
		next := end
		if i+1 < n {
			next = entries[i+1].off
		}
		e.src, e.srcPath, e.n = f, base+".pack", next-e.off
		var b [1]byte
		if e.off < 12 || e.n <= 0 || next > end {
			f.Close()
			return nil, nil, errors.New("pack index offsets do not fit the pack")
		}
		if _, err := f.ReadAt(b[:], e.off); err != nil || (b[0]>>4)&7 < 1 || (b[0]>>4)&7 > 4 {
			f.Close()
			return nil, nil, errors.New("pack holds deltas")
		}
	}
	return f, entries, nil
}

// RemovePacks removes packs RollUp replaced, each index first (a reader
// that still finds the index of a pack being removed looks again, as it
// does when git's repack removes one).
func RemovePacks(packs []string) error {
	var errs []error
	for _, p := range packs {
		stem := strings.TrimSuffix(p, ".pack")
		for _, ext := range []string{".idx", ".pack", ".rev"} {
			if err := os.Remove(stem + ext); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// readRegular reads a regular file (never through a link, never a FIFO) of
// at most max bytes.
func readRegular(path string, max int64) ([]byte, error) {
	f, err := platform.OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// Sized by the file (an index of a large pack is megabytes): read into
	// one buffer, not grown by doubling.
	var b bytes.Buffer
	if fi, err := f.Stat(); err == nil && fi.Size() <= max {
		b.Grow(int(fi.Size()) + bytes.MinRead)
	}
	_, err = b.ReadFrom(io.LimitReader(f, max+1))
	data := b.Bytes()
	if err == nil && int64(len(data)) > max {
		err = fmt.Errorf("%s: larger than %d bytes", path, max)
	}
	return data, err
}

// damagedPack is an entry whose bytes do not match its pack's index.
type damagedPack struct {
	path string
	id   []byte
}

func (e *damagedPack) Error() string {
	return fmt.Sprintf("pack %s: object %x does not match the pack's index (left as it is; git fsck says more)", filepath.Base(e.path), e.id)
}

func (d *DB) isDamaged(pack string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.damaged[pack]
}

func (d *DB) noteDamaged(pack string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.damaged == nil {
		d.damaged = map[string]bool{}
	}
	d.damaged[pack] = true
}
