package snapshot

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	binenc "encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"

	"github.com/cairn-dev/cairn/platform"
	"github.com/cairn-dev/cairn/snapshot/gitobj"
)

// git's index file, read and written by the in-process engine's full seal
// (docs/cairn-formats.md, "The in-process engine"): version 2, one entry
// per file with the stat data git compares (times, device, inode, mode,
// owner, size), its blob and its path, no extensions, the file's checksum
// at its end. It is cairn's private index (<store>/cairn/index), never a
// user's.

// idxEntry is one index entry: stat data as git keeps it (32-bit fields),
// mode, blob and path.
type idxEntry struct {
	ctimeS, ctimeN, mtimeS, mtimeN uint32
	dev, ino, mode, uid, gid, size uint32
	id                             string
	path                           string
}

func indexHash(f gitobj.Format) hash.Hash {
	if f.Name == "sha256" {
		return sha256.New()
	}
	return sha1.New()
}

var errIndexFormat = errors.New("index: not a version 2 or 3 index of stage-0 entries")

// readGitIndex reads an index file's entries (sorted by path, as git keeps
// them). errIndexFormat for anything the engine does not read exactly
// (version 4, extended flags, merge stages, a bad checksum): its entries
// then vouch for nothing.
func readGitIndex(path string, f gitobj.Format) ([]idxEntry, error) {
	data, err := readNoFollow(path, maxIndexFile)
	if err != nil {
		return nil, err
	}
	return parseGitIndex(data, f)
}

// parseGitIndex is readGitIndex of an index file's bytes. The entries keep
// nothing of data.
func parseGitIndex(data []byte, f gitobj.Format) ([]idxEntry, error) {
	hs := f.Size
	if len(data) < 12+hs || string(data[:4]) != "DIRC" {
		return nil, errIndexFormat
	}
	h := indexHash(f)
	h.Write(data[:len(data)-hs])
	if sum := data[len(data)-hs:]; !bytes.Equal(h.Sum(nil), sum) && !bytes.Equal(sum, make([]byte, hs)) {
		return nil, errIndexFormat
	}
	ver := binenc.BigEndian.Uint32(data[4:])
	n := int(binenc.BigEndian.Uint32(data[8:]))
	if ver != 2 && ver != 3 {
		return nil, errIndexFormat
	}
	body := data[:len(data)-hs]
	// Every path is a piece of one string, every id of another (two
	// allocations instead of two per entry): the paths side by side, the
	// ids hex-encoded side by side.
	paths := make([]byte, 0, max(0, len(body)-n*(40+hs+3)))
	ends := make([]int, 0, n)
	ids := make([]byte, 0, n*2*hs)
	out := make([]idxEntry, 0, n)
	off := 12
	var prev []byte
	for range n {
		fixed := 40 + hs + 2
		if off+fixed > len(body) {
			return nil, errIndexFormat
		}
		b := body[off:]
		u := func(i int) uint32 { return binenc.BigEndian.Uint32(b[4*i:]) }
		e := idxEntry{ctimeS: u(0), ctimeN: u(1), mtimeS: u(2), mtimeN: u(3), dev: u(4), ino: u(5),
			mode: u(6), uid: u(7), gid: u(8), size: u(9)}
		ids = hex.AppendEncode(ids, b[40:40+hs])
		flags := binenc.BigEndian.Uint16(b[40+hs:])
		if flags&0x3000 != 0 || flags&0x4000 != 0 { // a merge stage, or extended flags
			return nil, errIndexFormat
		}
		nameLen := int(flags & 0xfff)
		name := b[fixed:]
		if nameLen == 0xfff {
			nameLen = bytes.IndexByte(name, 0)
		}
		if nameLen < 0 || nameLen >= len(name) || name[nameLen] != 0 {
			return nil, errIndexFormat
		}
		name = name[:nameLen]
		// git keeps the entries sorted and unique; the walk's lookups
		// (knownEntries.folder, find) count on it.
		if len(out) > 0 && bytes.Compare(name, prev) <= 0 {
			return nil, errIndexFormat
		}
		prev = name
		paths = append(paths, name...)
		ends = append(ends, len(paths))
		out = append(out, e)
		off += (fixed + nameLen + 8) &^ 7
	}
	pathText, idText := string(paths), string(ids)
	start := 0
	for i := range out {
		out[i].path = pathText[start:ends[i]]
		out[i].id = idText[2*hs*i : 2*hs*(i+1)]
		start = ends[i]
	}
	return out, nil
}

// parsedIndex is cairn's index as the engine last parsed it, bound to the
// file it read: the file's stamp and device, and its checksum (which git
// writes over everything before it). Its entries are shared by the seals
// that find the same file: nothing writes to them.
type parsedIndex struct {
	st      fileStamp
	dev     uint64
	sum     string
	entries []idxEntry
}

// loadIndex reads cairn's index at path (readGitIndex), or returns the
// entries parsed before when the file is the one they were parsed from:
// the same stamp and device, and the same checksum read from its end now.
// mtime is the file's. An index with no checksum (git's index.skipHash) is
// read every time.
func (e *inproc) loadIndex(path string) (entries []idxEntry, mtime int64, err error) {
	fh, err := platform.OpenRegular(path)
	if err != nil {
		return nil, 0, err
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return nil, 0, err
	}
	st, dev, hs := stampOf(fi), device(fi), e.format.Size
	if p := e.index; p != nil && p.st == st && p.dev == dev && fi.Size() >= int64(hs) {
		sum := make([]byte, hs)
		if _, err := fh.ReadAt(sum, fi.Size()-int64(hs)); err == nil && string(sum) == p.sum {
			return p.entries, st.Mtime, nil
		}
	}
	e.index = nil
	data, err := platform.ReadCapped(fh, maxIndexFile)
	if err != nil {
		return nil, 0, err
	}
	if entries, err = parseGitIndex(data, e.format); err != nil {
		return nil, 0, err
	}
	if sum := data[len(data)-hs:]; int64(len(data)) == fi.Size() && !bytes.Equal(sum, make([]byte, hs)) {
		e.index = &parsedIndex{st: st, dev: dev, sum: string(sum), entries: entries}
	}
	return entries, st.Mtime, nil
}

// writeGitIndex writes entries (sorted by path) as a version 2 index at
// path, through path.lock (git's lock file: a writer that finds it is
// refused) renamed into place. Nothing is fsynced: the seal's file-system
// flush before the ref moves covers it, as it covers the stat cache.
func writeGitIndex(path string, f gitobj.Format, entries []idxEntry) error {
	hs := f.Size
	var raw [32]byte
	for i, e := range entries {
		if i > 0 && entries[i-1].path >= e.path {
			return fmt.Errorf("index: entries out of order at %q", e.path)
		}
		if len(e.id) != 2*hs {
			return fmt.Errorf("index: entry %q: bad id %q", e.path, e.id)
		}
		if _, err := hex.Decode(raw[:hs], []byte(e.id)); err != nil {
			return fmt.Errorf("index: entry %q: bad id %q", e.path, e.id)
		}
	}
	lock := path + ".lock"
	fh, err := os.OpenFile(lock, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("write cairn's index: %s exists (another writer?)", lock)
	}
	if err != nil {
		return fmt.Errorf("write cairn's index: %w", err)
	}
	// Written as it is encoded, through the checksum: a hundred thousand
	// entries are 10 MB, never held whole.
	h := indexHash(f)
	b := bufio.NewWriterSize(io.MultiWriter(fh, h), 64<<10)
	var w4 [4]byte
	put := func(v uint32) { binenc.BigEndian.PutUint32(w4[:], v); b.Write(w4[:]) }
	b.WriteString("DIRC")
	put(2)
	put(uint32(len(entries)))
	var zero [8]byte
	for _, e := range entries {
		hex.Decode(raw[:hs], []byte(e.id)) // checked above
		for _, v := range [...]uint32{e.ctimeS, e.ctimeN, e.mtimeS, e.mtimeN, e.dev, e.ino, e.mode, e.uid, e.gid, e.size} {
			put(v)
		}
		b.Write(raw[:hs])
		flags := uint16(min(len(e.path), 0xfff))
		b.Write([]byte{byte(flags >> 8), byte(flags)})
		b.WriteString(e.path)
		fixed := 40 + hs + 2
		pad := ((fixed + len(e.path) + 8) &^ 7) - fixed - len(e.path)
		b.Write(zero[:pad])
	}
	if err == nil {
		err = b.Flush()
	}
	if err == nil {
		_, err = fh.Write(h.Sum(nil))
	}
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(lock, path)
	}
	if err != nil {
		os.Remove(lock)
		return fmt.Errorf("write cairn's index: %w", err)
	}
	return nil
}
