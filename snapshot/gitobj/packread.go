package gitobj

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/cairn-dev/cairn/platform"
)

// Reading objects from packs in-process (docs/engine.md, "Objects read from
// packs"): each pack a Known holds a version 2 index of is searched by its
// fan-out and name table, the entry at the offset it gives inflated, and a
// delta applied to its base (in the same pack by offset, or by id wherever
// it is). Whatever comes out is hashed and must be the id asked for: a
// damaged or unexpected pack is an error, never other bytes. ErrNotFound
// means no pack Known read holds the id; a caller then asks git.

// maxDeltaDepth bounds a chain of deltas (git writes at most 50 by default;
// 4095 is its own limit).
const maxDeltaDepth = 4095

// Pack object types, as an entry's header gives them.
const (
	packCommit   = 1
	packTree     = 2
	packBlob     = 3
	packTag      = 4
	packOfsDelta = 6
	packRefDelta = 7
)

var packTypeNames = [...]string{packCommit: "commit", packTree: "tree", packBlob: "blob", packTag: "tag"}

// packRef is where an object is: a pack and the offset of its entry.
type packRef struct {
	pack string // the .pack file
	off  int64
}

// ReadPacked reads the object id whole from the packs k knows.
func (k *Known) ReadPacked(id string) (string, []byte, error) {
	raw, err := hex.DecodeString(id)
	if err != nil || len(raw) != k.d.Format.Size {
		return "", nil, fmt.Errorf("object id %q: want %d hex digits", id, k.d.Format.HexLen())
	}
	typ, data, err := k.readPackedRaw(raw, 0)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return "", nil, err
		}
		return "", nil, fmt.Errorf("object %s: %w", id, err)
	}
	if got := k.d.Format.Hash(typ, data); got != id {
		return "", nil, fmt.Errorf("object %s: its pack entry hashes to %s", id, got)
	}
	return typ, data, nil
}

// locate finds raw in the version 2 indexes k holds.
func (k *Known) locate(raw []byte) (packRef, bool) {
	hs := k.d.Format.Size
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, ki := range k.order {
		idx := ki.v2
		if idx == nil {
			continue
		}
		i, ok := ki.find(raw, hs)
		if !ok {
			continue
		}
		n := len(ki.names) / hs
		offs := 8 + 256*4 + n*(hs+4)
		o := binary.BigEndian.Uint32(idx[offs+i*4:])
		off := int64(o)
		if o&(1<<31) != 0 {
			j := offs + n*4 + int(o&^(1<<31))*8
			if j+8 > len(idx)-2*hs {
				continue
			}
			off = int64(binary.BigEndian.Uint64(idx[j:]))
		}
		return packRef{pack: strings.TrimSuffix(ki.path, ".idx") + ".pack", off: off}, true
	}
	return packRef{}, false
}

// readPackedRaw reads the object named raw: from a pack, or loose when it
// is the base of a delta.
func (k *Known) readPackedRaw(raw []byte, depth int) (string, []byte, error) {
	ref, ok := k.locate(raw)
	if !ok {
		if depth == 0 {
			return "", nil, ErrNotFound
		}
		return k.d.Read(hex.EncodeToString(raw)) // a base stored loose
	}
	f, err := k.packFile(ref.pack)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil, ErrNotFound // removed since: git finds it where it went
	} else if err != nil {
		return "", nil, err
	}
	return k.readEntry(f, ref, depth)
}

// packFile returns the pack at path open for reading, opened once per run
// of reads (Release closes them; Refresh closes those of packs gone or
// changed). A read through a file closed meanwhile fails, and the caller
// asks git: never other bytes.
func (k *Known) packFile(path string) (*os.File, error) {
	k.baseMu.Lock()
	defer k.baseMu.Unlock()
	if f, ok := k.files[path]; ok {
		return f, nil
	}
	f, err := platform.OpenRegular(path)
	if err != nil {
		return nil, err
	}
	if k.files == nil {
		k.files = map[string]*os.File{}
	}
	k.files[path] = f
	return f, nil
}

// closePack closes the pack at path if it is open (its index is gone or
// changed).
func (k *Known) closePack(path string) {
	k.baseMu.Lock()
	defer k.baseMu.Unlock()
	if f, ok := k.files[path]; ok {
		f.Close()
		delete(k.files, path)
	}
}

// Delta bases read lately are kept, as git keeps them: consecutive versions
// of a tree or file share their chain, and without them each read inflates
// the whole chain again. A kept base is only ever read (applyDelta copies
// from it), never handed to a caller. The cache is bounded, emptied when
// full, and let go by Release.
const (
	baseCacheMax   = 4 << 20 // bytes kept in all
	baseCacheEntry = 64 << 10
)

type cachedBase struct {
	typ  string
	data []byte
}

// Release lets go of the delta bases kept and closes the packs open: a
// caller done with a run of reads (a seal, a restore) holds no memory and
// no file for the next one (a pack removed in between takes no space).
func (k *Known) Release() {
	k.baseMu.Lock()
	k.bases, k.baseBytes = nil, 0
	for _, f := range k.files {
		f.Close()
	}
	k.files = nil
	k.baseMu.Unlock()
}

// readEntry is readEntryAt, a delta base (depth > 0) from the cache when it
// was read lately.
func (k *Known) readEntry(f *os.File, ref packRef, depth int) (string, []byte, error) {
	if depth == 0 {
		return k.readEntryAt(f, ref, depth)
	}
	k.baseMu.Lock()
	b, ok := k.bases[ref]
	k.baseMu.Unlock()
	if ok {
		return b.typ, b.data, nil
	}
	typ, data, err := k.readEntryAt(f, ref, depth)
	if err == nil && len(data) <= baseCacheEntry {
		k.baseMu.Lock()
		if k.baseBytes+len(data) > baseCacheMax || k.bases == nil {
			k.bases, k.baseBytes = map[packRef]cachedBase{}, 0
		}
		k.bases[ref] = cachedBase{typ, data}
		k.baseBytes += len(data)
		k.baseMu.Unlock()
	}
	return typ, data, err
}

// readEntryAt reads the entry at ref of the open pack f, resolving deltas.
func (k *Known) readEntryAt(f *os.File, ref packRef, depth int) (string, []byte, error) {
	off := ref.off
	if depth > maxDeltaDepth {
		return "", nil, errors.New("delta chain too deep")
	}
	// One read brings the header and, for most entries (a tree, a delta),
	// the whole compressed stream.
	bp := headBufs.Get().(*[]byte)
	release := func() { // before a delta's base is read: a chain holds none
		if bp != nil {
			headBufs.Put(bp)
			bp = nil
		}
	}
	defer release()
	n, err := f.ReadAt(*bp, off)
	if n == 0 {
		return "", nil, fmt.Errorf("pack entry at %d: %w", off, err)
	}
	h := (*bp)[:n]
	// inflate inflates the stream at off+at (within what was read, or
	// after it), which must hold exactly size bytes.
	inflate := func(at int, size int64) ([]byte, error) {
		return inflateFrom(io.MultiReader(bytes.NewReader(h[at:]), io.NewSectionReader(f, off+int64(n), 1<<62)), off+int64(at), size)
	}
	c := h[0]
	typ := int(c>>4) & 7
	size := int64(c & 15)
	i, shift := 1, 4
	for c&0x80 != 0 {
		if i >= len(h) || shift > 56 {
			return "", nil, fmt.Errorf("pack entry at %d: bad header", off)
		}
		c = h[i]
		i++
		size |= int64(c&0x7f) << shift
		shift += 7
	}
	if size > maxRead {
		return "", nil, fmt.Errorf("%d bytes, more than %d read whole", size, maxRead)
	}
	switch typ {
	case packCommit, packTree, packBlob, packTag:
		data, err := inflate(i, size)
		return packTypeNames[typ], data, err
	case packOfsDelta:
		if i >= len(h) {
			return "", nil, fmt.Errorf("pack entry at %d: bad delta offset", off)
		}
		c = h[i]
		i++
		back := int64(c & 0x7f)
		for c&0x80 != 0 {
			if i >= len(h) || back > 1<<50 {
				return "", nil, fmt.Errorf("pack entry at %d: bad delta offset", off)
			}
			c = h[i]
			i++
			back = (back+1)<<7 | int64(c&0x7f)
		}
		if back <= 0 || back >= off {
			return "", nil, fmt.Errorf("pack entry at %d: delta base outside the pack", off)
		}
		delta, err := inflate(i, size)
		release()
		if err != nil {
			return "", nil, err
		}
		btyp, base, err := k.readEntry(f, packRef{ref.pack, off - back}, depth+1)
		if err != nil {
			return "", nil, err
		}
		data, err := applyDelta(base, delta)
		return btyp, data, err
	case packRefDelta:
		hs := k.d.Format.Size
		if i+hs > len(h) {
			return "", nil, fmt.Errorf("pack entry at %d: bad delta base", off)
		}
		baseID := append([]byte(nil), h[i:i+hs]...)
		delta, err := inflate(i+hs, size)
		release()
		if err != nil {
			return "", nil, err
		}
		btyp, base, err := k.readPackedRaw(baseID, depth+1)
		if err != nil {
			return "", nil, err
		}
		data, err := applyDelta(base, delta)
		return btyp, data, err
	}
	return "", nil, fmt.Errorf("pack entry at %d: type %d", off, typ)
}

// headBufs hold the first bytes of a pack entry read at once.
var headBufs = sync.Pool{New: func() any { b := make([]byte, 4<<10); return &b }}

// inflateFrom inflates the zlib stream r gives (the one at off, for errors),
// which must hold exactly size bytes.
func inflateFrom(r io.Reader, off, size int64) ([]byte, error) {
	in, err := newInflater(r)
	if err != nil {
		return nil, fmt.Errorf("pack entry at %d: %w", off, err)
	}
	defer inflaters.Put(in)
	data := make([]byte, size+1)
	n, err := io.ReadFull(in.zr, data)
	if err == nil || n != int(size) || (err != io.ErrUnexpectedEOF && err != io.EOF) {
		if err == nil || err == io.ErrUnexpectedEOF || err == io.EOF {
			err = fmt.Errorf("%d bytes or more, its header says %d", n, size)
		}
		return nil, fmt.Errorf("pack entry at %d: %w", off, err)
	}
	return data[:size], nil
}

// applyDelta rebuilds an object from its base and a git delta: the two
// sizes, then copies from the base and literal inserts.
func applyDelta(base, delta []byte) ([]byte, error) {
	bad := errors.New("damaged delta")
	varint := func() (int64, bool) {
		var v int64
		for shift := 0; shift < 63; shift += 7 {
			if len(delta) == 0 {
				return 0, false
			}
			c := delta[0]
			delta = delta[1:]
			v |= int64(c&0x7f) << shift
			if c&0x80 == 0 {
				return v, true
			}
		}
		return 0, false
	}
	src, ok1 := varint()
	dst, ok2 := varint()
	if !ok1 || !ok2 || src != int64(len(base)) {
		return nil, bad
	}
	if dst > maxRead {
		return nil, fmt.Errorf("%d bytes, more than %d read whole", dst, maxRead)
	}
	out := make([]byte, 0, dst)
	for len(delta) > 0 {
		op := delta[0]
		delta = delta[1:]
		switch {
		case op&0x80 != 0:
			var off, n uint64
			for b := range 7 {
				if op&(1<<b) == 0 {
					continue
				}
				if len(delta) == 0 {
					return nil, bad
				}
				if b < 4 {
					off |= uint64(delta[0]) << (8 * b)
				} else {
					n |= uint64(delta[0]) << (8 * (b - 4))
				}
				delta = delta[1:]
			}
			if n == 0 {
				n = 0x10000
			}
			if off+n > uint64(len(base)) || int64(len(out))+int64(n) > dst {
				return nil, bad
			}
			out = append(out, base[off:off+n]...)
		case op != 0:
			if int(op) > len(delta) || int64(len(out))+int64(op) > dst {
				return nil, bad
			}
			out = append(out, delta[:op]...)
			delta = delta[op:]
		default:
			return nil, bad
		}
	}
	if int64(len(out)) != dst {
		return nil, bad
	}
	return out, nil
}
