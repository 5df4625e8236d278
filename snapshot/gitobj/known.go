package gitobj

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-dev/cairn/platform"
)

// maxIndexRead bounds one pack index read for presence checks (a million
// objects take ~28 MiB in a version 2 index).
const maxIndexRead = 1 << 30

// Known answers whether objects are stored, without git: an object is there
// if a pack index names it or its loose file exists. Each index's name table
// is read once and kept while the index keeps its name, size and time (a
// pack's name is its checksum: a new name is new content; one changed in
// place shows another size or time). Refresh says when something seen
// before is gone or changed (a repack, a prune, damage): what was checked
// against it is checked again. Safe for concurrent use.
type Known struct {
	mu    sync.Mutex
	d     *DB
	packs map[string]*knownIndex // by index path
	// order holds packs' indexes, the most objects first (the store's
	// big pack answers most look-ups); rebuilt when packs changes.
	order []*knownIndex
	// Objects found only as loose files, by their folder (objects/xx),
	// and each folder's stamp when they were last looked at: a folder
	// whose stamp moved (an object removed or added) or was too young to
	// tell is looked at again.
	loose     map[string]map[string]bool
	looseSeen map[string]dirStamp
	// fine is set once a folder time with a part finer than 100 ms was
	// seen: the store's file system keeps fine times, and a folder settles
	// sooner.
	fine atomic.Bool
	// packDir is the pack folder's stamp when its indexes were last read
	// (Refresh, or Has after a miss).
	packDir dirStamp
	// Delta bases ReadPacked read lately, by pack and offset (readEntry),
	// and the packs it has open (packFile), until Release.
	baseMu    sync.Mutex
	bases     map[packRef]cachedBase
	baseBytes int
	files     map[string]*os.File
}

// dirStamp is a folder's modification and change time, and whether it was
// older than looseSettle when taken (a younger one may change again within
// its file system's timestamp tick unseen).
type dirStamp struct {
	mtime, ctime int64
	settled      bool
}

// How old a folder's times must be for them to vouch that nothing in it
// changed since: beyond the file system's timestamp granularity (up to 2 s,
// FAT; under 100 ms once a finer time was seen) and the kernel's clock lag.
const (
	looseSettleCoarse = 2*time.Second + 100*time.Millisecond
	looseSettleFine   = 150 * time.Millisecond
)

func (k *Known) stampDir(path string) (dirStamp, bool) {
	fi, err := os.Lstat(path)
	if err != nil || !fi.IsDir() {
		return dirStamp{}, false
	}
	m, c := fi.ModTime().UnixNano(), platform.ChangeTime(fi)
	if m%int64(100*time.Millisecond) != 0 || c%int64(100*time.Millisecond) != 0 {
		k.fine.Store(true)
	}
	settle := looseSettleCoarse
	if k.fine.Load() {
		settle = looseSettleFine
	}
	now := time.Now().UnixNano()
	return dirStamp{mtime: m, ctime: c, settled: max(m, c)+settle.Nanoseconds() <= now}, true
}

type knownIndex struct {
	path        string // the index file
	size, mtime int64
	names       []byte // sorted object names, hash-size records
	v2          []byte // the whole index when it is version 2 (ReadPacked), else nil
	// fan[b] is the number of names whose first byte is below b: the names
	// starting with b are fan[b]:fan[b+1].
	fan [257]uint32
}

// find returns the position of the name raw in ki's name table.
func (ki *knownIndex) find(raw []byte, hs int) (int, bool) {
	lo, hi := int(ki.fan[raw[0]]), int(ki.fan[int(raw[0])+1])
	t := ki.names
	for lo < hi { // the first name not below raw
		m := int(uint(lo+hi) >> 1)
		if bytes.Compare(t[m*hs:(m+1)*hs], raw) < 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < int(ki.fan[int(raw[0])+1]) && bytes.Equal(t[lo*hs:(lo+1)*hs], raw)
}

// Known returns a presence checker for the store.
func (d *DB) Known() *Known {
	return &Known{d: d, packs: map[string]*knownIndex{}, loose: map[string]map[string]bool{}, looseSeen: map[string]dirStamp{}}
}

// Refresh reads the pack indexes that are new or changed, and reports
// whether an index or a loose object it had seen is gone or changed
// (objects it vouched for may be missing now).
func (k *Known) Refresh() (lost bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	dir := filepath.Join(k.d.Dir, "pack")
	k.packDir, _ = k.stampDir(dir) // before the folder is read
	ents, _ := os.ReadDir(dir)
	now := map[string]bool{}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".idx") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		fi, err := os.Lstat(p)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		now[p] = true
		old, ok := k.packs[p]
		if ok && old.size == fi.Size() && old.mtime == fi.ModTime().UnixNano() {
			continue
		}
		lost = lost || ok
		if ok {
			k.closePack(strings.TrimSuffix(p, ".idx") + ".pack")
		}
		k.packs[p] = k.readIndex(p, fi)
	}
	for p := range k.packs {
		if !now[p] {
			delete(k.packs, p)
			k.closePack(strings.TrimSuffix(p, ".idx") + ".pack")
			lost = true
		}
	}
	for dir, ids := range k.loose {
		was := k.looseSeen[dir]
		now, ok := k.stampDir(filepath.Join(k.d.Dir, dir))
		if ok && was.settled && now == was {
			continue
		}
		k.looseSeen[dir] = now // taken before the objects are looked at
		// One listing of the folder rather than a look-up per object (a git
		// seal adds objects to a few dozen folders of hundreds each).
		names := map[string]bool{}
		if f, err := os.Open(filepath.Join(k.d.Dir, dir)); err == nil {
			list, _ := f.Readdirnames(-1)
			f.Close()
			for _, n := range list {
				names[n] = true
			}
		}
		for id := range ids {
			switch {
			case k.inPacks(id):
				delete(ids, id)
			case !names[id[2:]]:
				delete(ids, id)
				lost = true
			}
		}
		if len(ids) == 0 {
			delete(k.loose, dir)
			delete(k.looseSeen, dir)
		}
	}
	k.sortPacks()
	return lost
}

// sortPacks rebuilds k.order from k.packs.
func (k *Known) sortPacks() {
	k.order = k.order[:0]
	for _, ki := range k.packs {
		k.order = append(k.order, ki)
	}
	slices.SortFunc(k.order, func(a, b *knownIndex) int {
		if c := cmp.Compare(len(b.names), len(a.names)); c != 0 {
			return c
		}
		return strings.Compare(a.path, b.path)
	})
}

// AddPack has k know the pack at packPath (its .pack; the index beside it)
// now, as a Refresh would: objects a caller wrote there count as stored,
// and the pack's removal before the next Refresh is reported by it as a
// loss. A writer that trusts what it just wrote calls it after each pack.
func (k *Known) AddPack(packPath string) {
	if packPath == "" {
		return
	}
	idx := strings.TrimSuffix(packPath, ".pack") + ".idx"
	fi, err := os.Lstat(idx)
	if err != nil || !fi.Mode().IsRegular() {
		return
	}
	ki := k.readIndex(idx, fi)
	k.mu.Lock()
	defer k.mu.Unlock()
	k.packs[idx] = ki
	k.sortPacks()
}

// readIndex reads the pack index at p (fi: its lstat) as k keeps it; an
// unreadable index names nothing.
func (k *Known) readIndex(p string, fi os.FileInfo) *knownIndex {
	ki := &knownIndex{path: p, size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	if data, err := readRegular(p, maxIndexRead); err == nil {
		ki.names = indexNames(data, k.d.Format.Size)
		if hs := k.d.Format.Size; ki.names != nil && len(data) >= 8+256*4 && string(data[:8]) == "\xfftOc\x00\x00\x00\x02" {
			n := len(ki.names) / hs
			if len(data) >= 8+256*4+n*(hs+8)+2*hs {
				ki.v2 = data // the name table is a part of it: nothing more is held
			}
		}
		// The fan-out, from the names themselves (sorted, as an index's
		// must be: a name out of order is found or not, never misread).
		hs := k.d.Format.Size
		for i := 0; i+hs <= len(ki.names); i += hs {
			ki.fan[int(ki.names[i])+1]++
		}
		for b := 1; b <= 256; b++ {
			ki.fan[b] += ki.fan[b-1]
		}
	}
	return ki
}

// indexNames returns the sorted name table of a pack index (version 1 or
// 2), nil if the index is not one.
func indexNames(idx []byte, hs int) []byte {
	if len(idx) >= 8+256*4 && string(idx[:8]) == "\xfftOc\x00\x00\x00\x02" {
		n := int(binary.BigEndian.Uint32(idx[8+255*4:]))
		start := 8 + 256*4
		if start+n*hs > len(idx) {
			return nil
		}
		return idx[start : start+n*hs]
	}
	if len(idx) >= 256*4 && string(idx[:4]) != "\xfftOc" { // version 1: offset and name per entry
		n := int(binary.BigEndian.Uint32(idx[255*4:]))
		start, rec := 256*4, 4+hs
		if start+n*rec > len(idx) {
			return nil
		}
		out := make([]byte, 0, n*hs)
		for i := range n {
			out = append(out, idx[start+i*rec+4:start+(i+1)*rec]...)
		}
		return out
	}
	return nil
}

// addNewPacks reads the indexes of packs added since the pack folder was
// last read, if its stamp moved or was too young to vouch, and reports
// whether it read any. Packs gone are left to Refresh, which says so.
func (k *Known) addNewPacks() bool {
	dir := filepath.Join(k.d.Dir, "pack")
	st, _ := k.stampDir(dir)
	if k.packDir.settled && st == k.packDir {
		return false
	}
	k.packDir = st
	ents, _ := os.ReadDir(dir)
	added := false
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".idx") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if _, ok := k.packs[p]; ok {
			continue
		}
		fi, err := os.Lstat(p)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		k.packs[p] = k.readIndex(p, fi)
		added = true
	}
	if added {
		k.sortPacks()
	}
	return added
}

func (k *Known) inPacks(id string) bool {
	var buf [64]byte
	hs := k.d.Format.Size
	if len(id) != 2*hs || hs > len(buf) {
		return false
	}
	raw := buf[:hs]
	if !decodeHex(raw, id) {
		return false
	}
	for _, ki := range k.order {
		if _, ok := ki.find(raw, hs); ok {
			return true
		}
	}
	return false
}

// decodeHex decodes the hex digits s (2 per byte of dst) into dst.
func decodeHex(dst []byte, s string) bool {
	if len(s) != 2*len(dst) {
		return false
	}
	for i := range dst {
		hi, ok1 := fromHex(s[2*i])
		lo, ok2 := fromHex(s[2*i+1])
		if !ok1 || !ok2 {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

func fromHex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// Has reports whether object id (hex) is stored, as of the last Refresh for
// packs and now for loose files.
func (k *Known) Has(id string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.inPacks(id) {
		return true
	}
	if len(id) != k.d.Format.HexLen() || !IsHex(id) {
		return false
	}
	dir := id[:2]
	if _, seen := k.looseSeen[dir]; !seen {
		st, _ := k.stampDir(filepath.Join(k.d.Dir, dir)) // before the object is looked at
		k.looseSeen[dir] = st
	}
	fi, err := os.Lstat(k.d.Path(id))
	if err != nil || !fi.Mode().IsRegular() || fi.Size() == 0 {
		// A repack beside the seal may have moved it from a loose file into
		// a pack written since the last Refresh: as git does, look at the
		// pack folder again (when it changed) before saying it is not stored.
		return k.addNewPacks() && k.inPacks(id)
	}
	if k.loose[dir] == nil {
		k.loose[dir] = map[string]bool{}
	}
	k.loose[dir][id] = true
	return true
}

// PackIndexNames returns the sorted object names (raw, hashSize bytes each)
// of a pack index, version 1 or 2; nil when it cannot be read as one.
func PackIndexNames(idxPath string, hashSize int) ([]byte, error) {
	data, err := readRegular(idxPath, maxIndexRead)
	if err != nil {
		return nil, err
	}
	names := indexNames(data, hashSize)
	if names == nil {
		return nil, fmt.Errorf("%s: not a pack index", idxPath)
	}
	return names, nil
}

// Witness is what a Known vouched for objects by, written down so that
// another process can tell whether that still holds: the packs it had read
// (by name, size and time) and the objects it found only as loose files.
type Witness struct {
	Packs []WitnessPack `json:"packs"`
	Loose []string      `json:"loose,omitempty"`
}

// WitnessPack is one pack index a Witness names.
type WitnessPack struct {
	Name  string `json:"name"` // the index file's name in objects/pack
	Size  int64  `json:"size"`
	Mtime int64  `json:"mtime"`
}

// Witness returns what k vouches by now; false when it found more than
// maxLoose objects only loose (too many to write down).
func (k *Known) Witness(maxLoose int) (Witness, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	var w Witness
	for _, ki := range k.order {
		w.Packs = append(w.Packs, WitnessPack{Name: filepath.Base(ki.path), Size: ki.size, Mtime: ki.mtime})
	}
	for _, ids := range k.loose {
		if len(w.Loose)+len(ids) > maxLoose {
			return Witness{}, false
		}
		for id := range ids {
			w.Loose = append(w.Loose, id)
		}
	}
	slices.Sort(w.Loose)
	return w, true
}

// Holds reports whether everything w vouched for is still stored: each of
// its packs is one k holds now with the same index (size and time; a pack
// is never written again under its name), and each of its loose objects is
// stored (loose still, or packed since). Objects w vouched for are then
// stored, as they would be for the Known that wrote w had it looked again
// (Refresh would report no loss). A caller refreshes k first.
func (k *Known) Holds(w Witness) bool {
	k.mu.Lock()
	dir := filepath.Join(k.d.Dir, "pack")
	for _, p := range w.Packs {
		ki, ok := k.packs[filepath.Join(dir, p.Name)]
		if !ok || filepath.Base(p.Name) != p.Name || ki.size != p.Size || ki.mtime != p.Mtime {
			k.mu.Unlock()
			return false
		}
	}
	k.mu.Unlock()
	for _, id := range w.Loose {
		if !k.Has(id) {
			return false
		}
	}
	return true
}
