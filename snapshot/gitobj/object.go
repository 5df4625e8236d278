// Package gitobj reads and writes git's object database and refs the way git
// itself does, for the in-process seal (docs/cairn-formats.md, "The
// in-process engine"): loose objects (zlib, "<type> <len>\0" header, named by
// their SHA-1 or SHA-256), a seal's objects as one pack and its index (Batch)
// and small packs merged (RollUp), trees and commits in git's exact
// encoding, and a ref moved with git's lock-file protocol. It reads loose
// objects only; the caller asks git for packed ones. It knows nothing of cairn.
package gitobj

import (
	"bufio"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/klauspost/compress/zlib"

	"github.com/cairn-dev/cairn/platform"
)

// Format is a repository's object format: which hash names its objects.
type Format struct {
	Name string // "sha1" or "sha256", as extensions.objectFormat says
	Size int    // bytes of a raw object id
	new  func() hash.Hash
}

var (
	SHA1   = Format{Name: "sha1", Size: sha1.Size, new: sha1.New}
	SHA256 = Format{Name: "sha256", Size: sha256.Size, new: sha256.New}
)

// FormatByName returns the format extensions.objectFormat names ("" is sha1).
func FormatByName(name string) (Format, bool) {
	switch name {
	case "", "sha1":
		return SHA1, true
	case "sha256":
		return SHA256, true
	}
	return Format{}, false
}

// HexLen is the length of an object id in hex.
func (f Format) HexLen() int { return 2 * f.Size }

// Hash returns the id of an object of type typ holding data.
func (f Format) Hash(typ string, data []byte) string {
	h := f.new()
	writeHeader(h, typ, int64(len(data)))
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}

func writeHeader(w io.Writer, typ string, n int64) {
	io.WriteString(w, typ)
	io.WriteString(w, " ")
	io.WriteString(w, strconv.FormatInt(n, 10))
	w.Write([]byte{0})
}

// ErrNotFound means the object is not stored loose.
var ErrNotFound = errors.New("object not found")

// ErrChanged means a file being stored did not hold the size it was said to:
// it changed while it was read.
var ErrChanged = errors.New("file changed while it was read")

// DB is a repository's objects folder.
type DB struct {
	Dir    string // <git-dir>/objects
	Format Format
	// Compression is the zlib level of loose objects; git's default
	// (core.looseCompression unset) is best speed.
	Compression int

	mu      sync.Mutex
	damaged map[string]bool // packs a roll-up found damaged: left out of the next ones
	written []string        // object and pack files written or freshened since the last Sync
	overrun bool            // Sync flushes the file system (too many to track, or another writer's)
	watch   bool            // another program stores loose objects here too (WatchForeign)
	fan     []fanStamp      // objects/ and its fan-out folders as the last Sync found them
	fanAt   int64           // when it read them (ns)
}

// fanSettle is how old a fan-out folder's times must be for them to vouch
// that nothing was added in the same timestamp tick unseen (a variable for
// tests).
var fanSettle = looseSettleCoarse

// fanStamp is what a folder's stat says changed: a new entry changes its
// modification time.
type fanStamp struct {
	mtime, ctime int64
	ok           bool
}

// maxTracked is how many written files Sync fsyncs one by one; past it (a
// first seal of many large files, each loose) one syncfs is cheaper.
const maxTracked = 4096

// NewDB returns the object database of gitDir. Its first Sync is one
// syncfs: files an earlier process stored and never flushed may be named.
func NewDB(gitDir string, f Format) *DB {
	return &DB{Dir: filepath.Join(gitDir, "objects"), Format: f, Compression: zlib.BestSpeed, overrun: true}
}

// Path is where the loose object id lives.
func (d *DB) Path(id string) string { return filepath.Join(d.Dir, id[:2], id[2:]) }

// freshen makes an object file (a loose object, a pack) that exists young
// again, as git does when it would have written it: a prune that expires old
// unreachable objects must not take one a new checkpoint is about to name. It
// reports whether the file exists; a caller writes it only when it does not.
func (d *DB) freshen(path string) bool {
	now := time.Now()
	if os.Chtimes(path, now, now) != nil {
		return false
	}
	d.track(path) // stored, but perhaps by a write no flush followed
	return true
}

// track notes a file Sync must make durable.
func (d *DB) track(path string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.written) >= maxTracked {
		d.overrun, d.written = true, nil
	}
	if !d.overrun {
		d.written = append(d.written, path)
	}
}

// ResetWritten forgets the files written so far (a seal starts: what an
// earlier one left unflushed is nothing its ref names).
func (d *DB) ResetWritten() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.written, d.overrun = nil, false
}

// Sync makes the object and pack files written since the last Sync (or
// ResetWritten) durable, with the folders that name them and extra files
// (a ref's lock), before a ref names them, as git's core.fsync=reference
// does: each file and folder fsynced, all at once (the file system's
// journal commits them together). Unlike a syncfs it waits for nothing
// another program wrote. Past maxTracked files it is one syncfs.
func (d *DB) Sync(extra ...string) (err error) {
	foreign := d.foreignWrote()
	d.mu.Lock()
	files, overrun := append(d.written, extra...), d.overrun || foreign
	d.written, d.overrun = nil, false
	d.mu.Unlock()
	defer func() {
		if err != nil { // what the folders showed may not be flushed
			d.mu.Lock()
			d.fan, d.overrun = nil, true
			d.mu.Unlock()
		}
	}()
	if overrun {
		return platform.SyncFS(d.Dir)
	}
	var paths []string
	dirs := map[string]bool{}
	for _, f := range files {
		paths = append(paths, f)
		dir := filepath.Dir(f)
		if !dirs[dir] {
			dirs[dir] = true
			paths = append(paths, dir)
		}
		if filepath.Dir(dir) == d.Dir && !dirs[d.Dir] { // a loose object's folder may be new
			dirs[d.Dir] = true
			paths = append(paths, d.Dir)
		}
	}
	return ForEachN(len(paths), 16, func(i int) error {
		err := fsyncPath(paths[i])
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed since (a pack merged into another): nothing a ref names
		}
		return err
	})
}

// WatchForeign makes every Sync look for loose objects another program (a
// runtime sharing the store, whose git leaves them unflushed) stored since
// the last one: when objects/ or one of its 256 fan-out folders changed,
// or changed too recently for a change in the same timestamp tick to show
// (fanSettle), that Sync is one syncfs, since what the new ref names may
// be among them. It costs a stat of each folder per Sync; packs git writes
// it fsyncs itself (core.fsync includes pack).
func (d *DB) WatchForeign() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.watch = true
}

// foreignWrote reads the fan-out folders' stamps and reports whether they
// changed since the last Sync (or may have): see WatchForeign. A change of
// the engine's own (a large blob written loose) counts too.
func (d *DB) foreignWrote() bool {
	d.mu.Lock()
	watch, prev, prevAt := d.watch, d.fan, d.fanAt
	d.mu.Unlock()
	if !watch {
		return false
	}
	at := time.Now().UnixNano()
	cur := make([]fanStamp, 257)
	for i := range cur {
		p := d.Dir
		if i < 256 {
			p = filepath.Join(d.Dir, fmt.Sprintf("%02x", i))
		}
		if fi, err := os.Lstat(p); err == nil {
			cur[i] = fanStamp{mtime: fi.ModTime().UnixNano(), ctime: platform.ChangeTime(fi), ok: true}
		}
	}
	d.mu.Lock()
	d.fan, d.fanAt = cur, at
	d.mu.Unlock()
	if prev == nil {
		return true
	}
	for i := range cur {
		young := prevAt - fanSettle.Nanoseconds()
		if cur[i] != prev[i] || prev[i].ok && (prev[i].mtime > young || prev[i].ctime > young) {
			return true
		}
	}
	return false
}

// SyncAll makes the next Sync one syncfs: files another writer (git)
// stored may be named too.
func (d *DB) SyncAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.written, d.overrun = nil, true
}

// fsyncPath fsyncs a file or folder, opened without following a link and
// without waiting (a FIFO put where a written file was does not block).
func fsyncPath(path string) error {
	f, err := os.OpenFile(path, os.O_RDONLY|platform.NoFollow|syscall.O_NONBLOCK, 0)
	if err != nil {
		return fmt.Errorf("flush %s: %w", path, err)
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("flush %s: %w", path, err)
	}
	return nil
}

// Write stores an object (unless it is already stored loose) and returns its
// id. Nothing is fsynced: the caller flushes the file system once before a
// ref names the object, as git does with core.fsync=reference.
func (d *DB) Write(typ string, data []byte) (string, error) {
	id := d.Format.Hash(typ, data)
	return id, d.writeKnown(Object{ID: id, Type: typ, Data: data})
}

// Object is an object to store, its id already computed (Format.Hash).
type Object struct {
	ID   string
	Type string
	Data []byte
}

// WriteAll stores objects as Write does, several at once: most of the time
// of a small object goes to creating and renaming its file, which overlaps
// across goroutines (and compression across cores). It returns when every
// write has ended, with the first error.
func (d *DB) WriteAll(objs []Object) error {
	return ForEach(len(objs), func(i int) error { return d.writeKnown(objs[i]) })
}

// ForEach calls fn(0) … fn(n-1) from a few goroutines (twice the usable
// cores, at most 8: work that spends much of its time in system calls) and
// returns the first error, once every call has ended; none starts after an
// error.
func ForEach(n int, fn func(int) error) error {
	return ForEachN(n, writers(), fn)
}

// ForEachN is ForEach with at most workers goroutines.
func ForEachN(n, workers int, fn func(int) error) error {
	workers = min(n, workers)
	if workers <= 1 {
		for i := range n {
			if err := fn(i); err != nil {
				return err
			}
		}
		return nil
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		next  int
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				stop := first != nil || i >= n
				mu.Unlock()
				if stop {
					return
				}
				if err := fn(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// writers is how many object writes run at once: twice the usable cores,
// since each spends much of its time in system calls.
func writers() int { return min(2*runtime.GOMAXPROCS(0), 8) }

func (d *DB) writeKnown(o Object) error {
	if d.freshen(d.Path(o.ID)) {
		return nil
	}
	return d.writeLoose(o.ID, func(w io.Writer) error {
		writeHeader(w, o.Type, int64(len(o.Data)))
		_, err := w.Write(o.Data)
		return err
	})
}

// writeLoose writes the object id through a temporary file in its folder.
func (d *DB) writeLoose(id string, body func(io.Writer) error) error {
	dir := filepath.Join(d.Dir, id[:2])
	tmp, err := createTemp(dir, "tmp_obj_")
	if errors.Is(err, fs.ErrNotExist) {
		if err = os.Mkdir(dir, 0o755); err == nil || errors.Is(err, fs.ErrExist) {
			tmp, err = createTemp(dir, "tmp_obj_")
		}
	}
	if err != nil {
		return fmt.Errorf("write object %s: %w", id, err)
	}
	if err := d.deflateTo(tmp, body); err != nil {
		discard(tmp)
		return fmt.Errorf("write object %s: %w", id, err)
	}
	return d.finalize(tmp, d.Path(id), id)
}

// discard drops a temporary file whose write failed.
func discard(tmp *os.File) {
	tmp.Close()
	os.Remove(tmp.Name())
}

// createTemp makes a file named prefix and a random part (tmp_obj_,
// tmp_pack_, tmp_idx_: git's names, which cairn sweeps after a failed write). The name only has to be new (O_EXCL checks it), so
// it comes from the runtime's generator rather than the kernel's.
func createTemp(dir, prefix string) (*os.File, error) {
	for range 10 {
		name := prefix + strconv.FormatUint(rand.Uint64()>>16, 36)
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o444)
		if !errors.Is(err, fs.ErrExist) {
			return f, err
		}
	}
	return nil, fmt.Errorf("create a temporary object in %s: too many collisions", dir)
}

// deflater is a zlib writer and its buffer, reused: a new compressor costs
// about half a megabyte of allocation, more than compressing a small object.
// The compressor is github.com/klauspost/compress's: at level 1 it deflated
// this project's benchmark files about twice as fast as compress/zlib, into
// streams 2% larger (docs/engine.md, "First seals and full reconciles").
type deflater struct {
	bw    *bufio.Writer
	zw    *zlib.Writer
	level int
}

// deflaters keeps up to eight idle compressors (one per concurrent writer,
// writers()) for the life of the process. A sync.Pool is emptied by every
// garbage collection, and a seal allocates enough to start several: each
// then paid for new compressors again.
var deflaters = make(chan *deflater, 8)

// ReleaseDeflaters lets go of the idle compressors (about 0.5 MB each), for a
// caller done with a burst of writes that holds much else: the next writes
// make new ones.
func ReleaseDeflaters() {
	for {
		select {
		case <-deflaters:
		default:
			return
		}
	}
}

// inflater is a zlib reader and its buffers, reused as deflater is.
type inflater struct {
	src *bufio.Reader
	zr  io.ReadCloser
	out *bufio.Reader
}

var inflaters sync.Pool

// newInflater takes a pooled inflater reading the zlib stream r (given
// back with inflaters.Put once read; dropped on an error).
func newInflater(r io.Reader) (*inflater, error) {
	in, _ := inflaters.Get().(*inflater)
	if in == nil {
		in = &inflater{src: bufio.NewReaderSize(r, 8<<10)}
	} else {
		in.src.Reset(r)
	}
	var err error
	if in.zr == nil {
		in.zr, err = zlib.NewReader(in.src)
	} else {
		err = in.zr.(zlib.Resetter).Reset(in.src, nil)
	}
	return in, err
}

// deflateTo writes what body writes to w, compressed at the database's
// level: a loose object's file, or a pack entry's buffer.
func (d *DB) deflateTo(w io.Writer, body func(io.Writer) error) error {
	return deflateAt(w, d.Compression, body)
}

// deflateAt writes what body writes to w, compressed at zlib level level,
// with a compressor from the idle ones when one of that level is there.
func deflateAt(w io.Writer, level int, body func(io.Writer) error) error {
	var df *deflater
	select {
	case df = <-deflaters:
	default:
	}
	if df == nil || df.level != level {
		df = &deflater{bw: bufio.NewWriterSize(w, 32<<10), level: level}
		zw, err := zlib.NewWriterLevel(df.bw, level)
		if err != nil {
			return err
		}
		df.zw = zw
	} else {
		df.bw.Reset(w)
		df.zw.Reset(df.bw)
	}
	err := body(df.zw)
	if err == nil {
		err = df.zw.Close()
	}
	if err == nil {
		err = df.bw.Flush()
	}
	df.bw.Reset(nil)
	select {
	case deflaters <- df:
	default:
	}
	return err
}

// finalize closes tmp and renames it to final. The caller looked first
// (freshen): an object already stored is kept, as git keeps it.
func (d *DB) finalize(tmp *os.File, final, id string) error {
	name := tmp.Name()
	if err := tmp.Close(); err != nil {
		os.Remove(name)
		return fmt.Errorf("write object %s: %w", id, err)
	}
	if err := os.Rename(name, final); err != nil {
		os.Remove(name)
		return fmt.Errorf("write object %s: %w", id, err)
	}
	d.track(final)
	return nil
}

// smallBlob is the size up to which WriteBlobFrom reads a blob whole before
// storing it, as git does: its id is then known first, so a blob already
// stored costs no new file, and the temporary file goes into the object's
// own folder instead of the one all larger blobs share.
const smallBlob = 1 << 20

// WriteBlobFrom stores a blob of exactly size bytes read from r. A file is
// read once (whole when small; else hashed and compressed in one pass), so
// the id always names the bytes stored. ErrChanged means r held another
// number of bytes.
func (d *DB) WriteBlobFrom(r io.Reader, size int64) (string, error) {
	if size <= smallBlob {
		data, err := readExactly(r, size)
		if err != nil {
			return "", err
		}
		id := d.Format.Hash("blob", data)
		return id, d.writeKnown(Object{ID: id, Type: "blob", Data: data})
	}
	tmp, err := createTemp(d.Dir, "tmp_obj_")
	if err != nil {
		return "", fmt.Errorf("write blob: %w", err)
	}
	h := d.Format.new()
	err = d.deflateTo(tmp, func(zw io.Writer) error {
		w := io.MultiWriter(h, zw)
		writeHeader(w, "blob", size)
		n, err := io.CopyN(w, r, size)
		if err == io.EOF || err == nil && n == size && moreThan(r) {
			return ErrChanged
		}
		return err
	})
	if err != nil {
		discard(tmp)
		if errors.Is(err, ErrChanged) {
			return "", err
		}
		return "", fmt.Errorf("write blob: %w", err)
	}
	id := hex.EncodeToString(h.Sum(nil))
	if d.freshen(d.Path(id)) {
		discard(tmp)
		return id, nil
	}
	if err := os.Mkdir(filepath.Join(d.Dir, id[:2]), 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		discard(tmp)
		return "", fmt.Errorf("write object %s: %w", id, err)
	}
	return id, d.finalize(tmp, d.Path(id), id)
}

// moreThan reports whether r has bytes left.
func moreThan(r io.Reader) bool {
	var b [1]byte
	n, _ := r.Read(b[:])
	return n > 0
}

// maxRead bounds an object Read returns whole: it reads trees and commits
// (a tree of a million entries is about 40 MB).
const maxRead = 256 << 20

// maxHeader is the longest "<type> <size>" header git reads.
const maxHeader = 32

// Read returns a loose object's type and content; ErrNotFound when it is
// not stored loose.
func (d *DB) Read(id string) (typ string, data []byte, err error) {
	if len(id) != d.Format.HexLen() {
		return "", nil, fmt.Errorf("object id %q: want %d hex digits", id, d.Format.HexLen())
	}
	f, err := platform.OpenRegular(d.Path(id))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil, ErrNotFound
	} else if err != nil {
		return "", nil, err
	}
	defer f.Close()
	in, err := newInflater(f)
	if err != nil {
		return "", nil, fmt.Errorf("object %s: %w", id, err)
	}
	if in.out == nil {
		in.out = bufio.NewReaderSize(in.zr, 8<<10)
	} else {
		in.out.Reset(in.zr)
	}
	defer inflaters.Put(in)
	br := in.out
	// The header is at most 32 bytes, as git reads it; the body is read as
	// it comes, so a header claiming a huge size allocates nothing.
	var hb []byte
	for len(hb) <= maxHeader {
		c, err := br.ReadByte()
		if err != nil {
			return "", nil, fmt.Errorf("object %s: bad header: %w", id, err)
		}
		if c == 0 {
			break
		}
		hb = append(hb, c)
	}
	var size int64
	typ, sz, ok := strings.Cut(string(hb), " ")
	if ok && len(hb) <= maxHeader {
		size, err = strconv.ParseInt(sz, 10, 64)
	}
	if !ok || len(hb) > maxHeader || err != nil || size < 0 {
		return "", nil, fmt.Errorf("object %s: bad header %q", id, hb)
	}
	if size > maxRead { // a header may lie, and zlib inflates a little into a lot
		return "", nil, fmt.Errorf("object %s: %d bytes, more than %d read whole", id, size, maxRead)
	}
	data, err = io.ReadAll(io.LimitReader(br, size+1))
	if err != nil {
		return "", nil, fmt.Errorf("object %s: %w", id, err)
	}
	if int64(len(data)) != size {
		return "", nil, fmt.Errorf("object %s: %d bytes, its header says %d", id, len(data), size)
	}
	if got := d.Format.Hash(typ, data); got != id {
		return "", nil, fmt.Errorf("object %s: content hashes to %s", id, got)
	}
	return typ, data, nil
}
