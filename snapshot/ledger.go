package snapshot

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cairn-dev/cairn/platform"
	"github.com/cairn-dev/cairn/snapshot/gitobj"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// Trailers cairn adds after the runtime's message, enough to rebuild the
// ledger from git alone (docs/cairn-formats.md, "Commit messages").
const (
	trailerID      = "Cairn-Ledger-Id"
	trailerKind    = "Cairn-Kind"
	trailerLabel   = "Cairn-Label"
	trailerRun     = "Cairn-Run"
	trailerCodon   = "Cairn-Codon"
	trailerAttempt = "Cairn-Attempt"
	trailerParent  = "Cairn-Parent"
)

// Records returns the ledger, oldest first.
func (s *Store) Records() []ckpt.Record {
	if v := s.ledgerView.Load(); v != nil {
		return append([]ckpt.Record(nil), (*v)...)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]ckpt.Record(nil), s.records...)
}

// publishLedger makes the records as they are now what Records answers
// without the lock. Callers hold mu.
func (s *Store) publishLedger() {
	v := append([]ckpt.Record(nil), s.records...)
	s.ledgerView.Store(&v)
}

// Reload re-reads the ledger (another process may have sealed) and
// re-records any checkpoint git holds that the ledger lacks.
func (s *Store) Reload(ctx context.Context) error {
	return s.withLock(ctx, func() error {
		if err := s.loadLedger(ctx); err != nil {
			return err
		}
		return s.flushUnwritten()
	})
}

// loadLedger reads the ledger file, drops a torn last line, and re-records
// every cairn commit a ref reaches that the ledger lacks: a crash between a
// ref update and the ledger append loses nothing, nor does a lost ledger.
// Callers hold the lock.
func (s *Store) loadLedger(ctx context.Context) error {
	data, err := readNoFollow(s.ledger, maxLedgerFile)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("read ledger: %w", err)
	}
	recs, marks, good := parseLedger(data)
	if good < len(data) {
		if err := truncateNoFollow(s.ledger, int64(good)); err != nil {
			return fmt.Errorf("drop torn ledger line: %w", err)
		}
	}
	// Records a full disk kept out of the file are still this store's.
	onDisk := make(map[string]bool, len(recs))
	for _, r := range recs {
		onDisk[r.ID] = true
	}
	keep := s.unwritten[:0]
	for _, r := range s.unwritten {
		if !onDisk[r.ID] {
			keep = append(keep, r)
			recs = append(recs, r)
		}
	}
	s.unwritten = keep
	s.records = recs
	s.ledgerSize = int64(good)
	if err := s.recoverFromGit(ctx); err != nil {
		return err
	}
	// Oldest first is id order: a record written late (after a full disk)
	// or recovered from git goes back to its place.
	sort.SliceStable(s.records, func(i, j int) bool { return idNum(s.records[i].ID) < idNum(s.records[j].ID) })
	// A prune line folds into the record it names, wherever it stands.
	s.applyMarks(append(marks, s.unwrittenMarks...))
	return nil
}

// parseLedger reads the ledger's complete lines (a torn tail after the last
// newline is left out: good is where it starts): records, and prune lines.
// A bad line in the middle is kept on disk and skipped. Decoding JSON is
// most of an open's time at thousands of records, so the lines are decoded
// in chunks on every core, then joined in file order.
func parseLedger(data []byte) (recs []ckpt.Record, marks []pruneLine, good int) {
	good = bytes.LastIndexByte(data, '\n') + 1
	data = data[:good]
	type chunk struct {
		recs  []ckpt.Record
		marks []pruneLine
	}
	parts := max(1, min(runtime.GOMAXPROCS(0), len(data)/(256<<10)))
	chunks := make([]chunk, parts)
	var wg sync.WaitGroup
	start := 0
	for i := range parts {
		end := len(data)
		if i < parts-1 {
			end = max(start, len(data)*(i+1)/parts)
			if nl := bytes.IndexByte(data[end:], '\n'); nl >= 0 {
				end += nl + 1
			} else {
				end = len(data)
			}
		}
		part := data[start:end]
		wg.Go(func() {
			c := &chunks[i]
			for _, line := range bytes.Split(part, []byte{'\n'}) {
				if len(bytes.TrimSpace(line)) == 0 {
					continue
				}
				if m, ok := parsePruneLine(line); ok {
					c.marks = append(c.marks, m)
					continue
				}
				var r ckpt.Record
				if (decodeRecordFast(line, &r) || json.Unmarshal(line, &r) == nil) && r.ID != "" {
					c.recs = append(c.recs, r)
				}
			}
		})
		start = end
	}
	wg.Wait()
	n := 0
	for _, c := range chunks {
		n += len(c.recs)
	}
	recs = make([]ckpt.Record, 0, n)
	for _, c := range chunks {
		recs, marks = append(recs, c.recs...), append(marks, c.marks...)
	}
	return recs, marks, good
}

// recoveryFailed is what a git read of recoverFromGit failing with err
// means for the open: objects another program deleted leave the store
// opening (its listing stays readable, a seal refuses to build on it), the
// records it lacks unrecovered until the damage is repaired (cairn doctor
// --fsck), said in the log and cairn status (a note); anything else fails it.
func (s *Store) recoveryFailed(ctx context.Context, err error) error {
	if derr := s.damageHint(err); errors.Is(derr, ErrDamaged) {
		s.note(ctx, "store damaged; the ledger records of its newest checkpoints were not recovered: "+derr.Error())
		return nil
	}
	return err
}

// recoverFromGit appends records for cairn commits on refs the ledger does not know.
func (s *Store) recoverFromGit(ctx context.Context) error {
	known := make(map[string]bool, len(s.records))
	for _, r := range s.records {
		if r.SHA != "" {
			known[r.SHA] = true
		}
	}
	// Only tips that are cairn's own commits (they carry a ledger id) can be
	// missing from the ledger; main and the runtime's own commits never are.
	// The tips' names are cheap (packed-refs, once maintenance packed them);
	// only tips the ledger lacks are read, so an open does not grow with the
	// number of checkpoints (one ref each outside runs).
	tips, err := s.refTips(ctx)
	if err != nil {
		return err
	}
	var unknown []string
	refAt := map[string]string{} // tip → the first ref (by name) on it, for a recovered record
	for ref, sha := range tips {
		if !strings.HasPrefix(ref, "refs/heads/") && !strings.HasPrefix(ref, "refs/cairn/") {
			continue
		}
		if prev, ok := refAt[sha]; ok {
			refAt[sha] = min(prev, ref)
			continue
		}
		refAt[sha] = ref
		if !known[sha] {
			unknown = append(unknown, sha)
		}
	}
	sort.Strings(unknown)
	missing := false
	if len(unknown) > 0 {
		// %x1e separates commits; the sha is on the first line of each.
		msgs, err := s.git.Run(ctx, strings.NewReader(strings.Join(unknown, "\n")+"\n"),
			"log", "--no-walk=unsorted", "--stdin", "--format=%H%x00%B%x1e")
		if err != nil {
			return s.recoveryFailed(ctx, err)
		}
		for _, tip := range strings.Split(string(msgs), "\x1e") {
			_, msg, ok := strings.Cut(strings.TrimLeft(tip, "\n"), "\x00")
			if !ok {
				continue
			}
			if _, cairn := recordFromMessage(msg); cairn {
				missing = true
				break
			}
		}
	}
	if !missing {
		return nil
	}
	// %x1e separates commits; %x1f fields. Bodies never hold those bytes since
	// cairn strips control characters from what it writes.
	out, err := s.git.Run(ctx, nil, "log", "--branches", "--glob=refs/cairn/*",
		"--format=%H%x1f%P%x1f%cI%x1f%B%x1e")
	if err != nil {
		return s.recoveryFailed(ctx, err)
	}
	var found []ckpt.Record
	for _, c := range strings.Split(string(out), "\x1e") {
		c = strings.TrimLeft(c, "\n")
		f := strings.SplitN(c, "\x1f", 4)
		if len(f) != 4 || known[f[0]] {
			continue
		}
		r, ok := recordFromMessage(f[3])
		if !ok {
			continue
		}
		r.SHA = f[0]
		if ps := strings.Fields(f[1]); len(ps) > 0 {
			r.Parent = ps[0] // a root commit keeps the trailer's parent
		}
		if t, err := time.Parse(time.RFC3339, f[2]); err == nil {
			r.Time = t.UTC()
		}
		r.State, r.Recovered = ckpt.StateOK, true
		r.Ref = refAt[r.SHA]
		found = append(found, r)
		known[r.SHA] = true
	}
	sort.Slice(found, func(i, j int) bool { return idNum(found[i].ID) < idNum(found[j].ID) })
	for _, r := range found {
		if err := s.appendRecord(r); err != nil {
			// Kept in memory and written by a later append: a full disk
			// must not keep the store from opening.
			zerologCtx(ctx).Warn().Err(err).Str("ledger", s.ledger).Msg("recovered record not yet written")
		}
	}
	return nil
}

// recordFromMessage reads cairn's trailers (and the runtime's lines) from a commit message.
func recordFromMessage(msg string) (ckpt.Record, bool) {
	var r ckpt.Record
	lines := strings.Split(msg, "\n")
	for _, l := range lines {
		k, v, ok := strings.Cut(l, ": ")
		if !ok {
			continue
		}
		switch k {
		case trailerID:
			r.ID = v
		case trailerKind:
			r.Kind = ckpt.Kind(v)
		case trailerLabel:
			r.Label = v
		case trailerRun:
			r.RunID = v
		case trailerCodon:
			r.CodonID = v
		case trailerAttempt:
			r.Attempt, _ = strconv.Atoi(v)
		case trailerParent:
			if gitobj.IsHex(v) {
				r.Parent = v
			}
		case "Codon":
			r.CodonName = v
		case "Duration":
			r.DurationMS, _ = strconv.ParseInt(strings.TrimSuffix(v, "ms"), 10, 64)
		}
	}
	if r.ID == "" || r.Kind == "" {
		return r, false
	}
	return r, true
}

// idNum is the number of a ledger id ("c12" → 12).
func idNum(id string) int {
	n, _ := ckpt.LedgerNum(id)
	return n
}

// nextID is the id the next checkpoint takes: past every id in the ledger,
// every id this process handed out and the id counter, so an id whose record
// never reached the ledger (a full disk) is never handed out again. Callers
// hold the lock.
func (s *Store) nextID() string {
	n := max(s.issued, s.readIDCounter())
	for _, r := range s.records {
		n = max(n, idNum(r.ID))
	}
	return "c" + strconv.Itoa(n+1)
}

// idCounterWidth is the counter file's fixed size: rewritten in place, it
// needs no new block, so it can still be written on a full disk.
const idCounterWidth = 20

func (s *Store) idCounterPath() string { return filepath.Join(s.gitDir, cairnSubdir, "last-id") }

// readIDCounter is the highest id recorded in the counter file; 0 without one.
func (s *Store) readIDCounter() int {
	b, err := readNoFollow(s.idCounterPath(), maxSmallFile)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// createIDCounter makes the counter file while there is room, so that a
// full disk later only has to overwrite it. O_EXCL: never reset another's.
func (s *Store) createIDCounter() {
	f, err := os.OpenFile(s.idCounterPath(), os.O_WRONLY|os.O_CREATE|os.O_EXCL|platform.NoFollow, 0o644)
	if err != nil {
		return
	}
	_, _ = f.Write(idCounterBytes(0))
	f.Close()
}

func idCounterBytes(n int) []byte {
	return []byte(fmt.Sprintf("%0*d\n", idCounterWidth-1, n))
}

// noteIssued records that id was handed out, in memory and (best effort, in
// place) in the counter file; sync when the ledger could not carry the id.
func (s *Store) noteIssued(id string, sync bool) {
	n := idNum(id)
	s.issued = max(s.issued, n)
	if n <= s.readIDCounter() {
		return
	}
	f, err := os.OpenFile(s.idCounterPath(), os.O_WRONLY|os.O_CREATE|platform.NoFollow, 0o644)
	if err != nil {
		return
	}
	if _, err := f.WriteAt(idCounterBytes(n), 0); err == nil && sync {
		_ = f.Sync()
	}
	f.Close()
}

// appendRecord appends one record to the ledger, after any records a full
// disk kept out of it. A record that cannot be written is kept in memory
// (Records has it) and written by the next append, Reload or Close. Callers
// hold the lock.
func (s *Store) appendRecord(r ckpt.Record) error {
	err := s.flushUnwritten()
	if err == nil {
		err = s.writeRecord(r)
	}
	if err != nil {
		s.unwritten = append(s.unwritten, r)
		s.records = append(s.records, r)
		s.noteIssued(r.ID, true)
		return fmt.Errorf("record %s kept in memory until the ledger can be written: %w", r.ID, err)
	}
	s.records = append(s.records, r)
	s.noteIssued(r.ID, false)
	return nil
}

// flushUnwritten writes the records a failed append kept back, oldest first,
// then the prune lines kept back. Callers hold the lock.
func (s *Store) flushUnwritten() error {
	for len(s.unwritten) > 0 {
		if err := s.writeRecord(s.unwritten[0]); err != nil {
			return err
		}
		s.unwritten = s.unwritten[1:]
	}
	s.unwritten = nil
	if len(s.unwrittenMarks) > 0 {
		if err := s.writeMarks(s.unwrittenMarks); err != nil {
			return err
		}
		s.unwrittenMarks = nil
	}
	return nil
}

// writeRecord appends one record to the ledger file and fsyncs it.
func (s *Store) writeRecord(r ckpt.Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return s.writeLines(append(b, '\n'))
}

// writeLines appends whole lines to the ledger file and fsyncs it. A torn
// tail (an earlier append cut short) is cut off first, and a failed append
// is truncated back, so the ledger never holds half a line. Callers hold the lock.
func (s *Store) writeLines(b []byte) error {
	f, err := os.OpenFile(s.ledger, os.O_RDWR|os.O_APPEND|os.O_CREATE|platform.NoFollow, 0o600)
	if err != nil {
		return fmt.Errorf("open ledger: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("append ledger %s: %w", s.ledger, err)
	}
	size, err := untorn(f, fi.Size())
	if err == nil && size != fi.Size() {
		err = f.Truncate(size)
	}
	if err != nil {
		return fmt.Errorf("repair torn ledger line in %s: %w", s.ledger, err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		_ = f.Truncate(size) // a short write must not glue the next line onto half of this one
		return fmt.Errorf("append ledger %s: %w", s.ledger, err)
	}
	if size == s.ledgerSize {
		s.ledgerSize += int64(len(b))
	} // else another writer appended unseen: the size stays stale so refreshIfChanged reloads
	return nil
}

// untorn is the length of the ledger up to and including its last newline:
// past it lies only a torn line.
func untorn(f *os.File, size int64) (int64, error) {
	var last [1]byte
	if size == 0 {
		return 0, nil
	}
	if _, err := f.ReadAt(last[:], size-1); err != nil {
		return 0, err
	}
	if last[0] == '\n' {
		return size, nil // the usual case: nothing torn
	}
	buf := make([]byte, 64<<10)
	for end := size; end > 0; {
		start := max(end-int64(len(buf)), 0)
		n, err := f.ReadAt(buf[:end-start], start)
		if err != nil && n < int(end-start) {
			return 0, err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			return start + int64(i) + 1, nil
		}
		end = start
	}
	return 0, nil
}

// refreshIfChanged re-reads the ledger when another process appended to it.
// Callers hold the lock.
func (s *Store) refreshIfChanged(ctx context.Context) error {
	fi, err := os.Stat(s.ledger)
	size := int64(0)
	if err == nil {
		size = fi.Size()
	}
	if size == s.ledgerSize {
		return nil
	}
	return s.loadLedger(ctx)
}

// truncateNoFollow cuts the ledger to size, refusing a symbolic link.
func truncateNoFollow(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY|platform.NoFollow, 0)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
