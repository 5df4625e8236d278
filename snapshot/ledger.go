package snapshot

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/platform"
)

// Trailers cairn adds after the seed's message, enough to rebuild the ledger
// from git alone.
const (
	trailerID      = "Cairn-Ledger-Id"
	trailerKind    = "Cairn-Kind"
	trailerLabel   = "Cairn-Label"
	trailerRun     = "Cairn-Run"
	trailerCodon   = "Cairn-Codon"
	trailerAttempt = "Cairn-Attempt"
)

// Records returns the ledger, oldest first.
func (s *Store) Records() []Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Record(nil), s.records...)
}

// Reload re-reads the ledger (another process may have sealed) and
// re-records any checkpoint git holds that the ledger lacks.
func (s *Store) Reload(ctx context.Context) error {
	return s.withLock(ctx, func() error { return s.loadLedger(ctx) })
}

// loadLedger reads the ledger file, drops a torn last line, and re-records
// every cairn commit a ref reaches that the ledger lacks: a crash between a
// ref update and the ledger append loses nothing, nor does a lost ledger.
// Callers hold the lock.
func (s *Store) loadLedger(ctx context.Context) error {
	data, err := readNoFollow(s.ledger)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("read ledger: %w", err)
	}
	var recs []Record
	good := 0
	for off := 0; off < len(data); {
		nl := bytes.IndexByte(data[off:], '\n')
		if nl < 0 {
			break // torn tail: truncated below, rebuilt from git if it was a checkpoint
		}
		line := data[off : off+nl]
		off += nl + 1
		var r Record
		if len(bytes.TrimSpace(line)) == 0 {
			good = off
			continue
		}
		if err := json.Unmarshal(line, &r); err != nil || r.ID == "" {
			// A bad line in the middle is kept on disk and skipped.
			good = off
			continue
		}
		recs = append(recs, r)
		good = off
	}
	if good < len(data) {
		if err := truncateNoFollow(s.ledger, int64(good)); err != nil {
			return fmt.Errorf("drop torn ledger line: %w", err)
		}
	}
	s.records = recs
	s.ledgerSize = int64(good)
	return s.recoverFromGit(ctx)
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
	out, err := s.git.Run(ctx, nil, "for-each-ref", "--format=%(objectname)%00%(contents)%1e", "refs/heads", "refs/cairn")
	if err != nil {
		return err
	}
	missing := false
	for _, tip := range strings.Split(string(out), "\x1e") {
		sha, msg, ok := strings.Cut(strings.TrimLeft(tip, "\n"), "\x00")
		if !ok || known[sha] {
			continue
		}
		if _, cairn := recordFromMessage(msg); cairn {
			missing = true
			break
		}
	}
	if !missing {
		return nil
	}
	// %x1e separates commits; %x1f fields. Bodies never hold those bytes since
	// cairn strips control characters from what it writes.
	out, err = s.git.Run(ctx, nil, "log", "--branches", "--glob=refs/cairn/*",
		"--format=%H%x1f%P%x1f%cI%x1f%B%x1e")
	if err != nil {
		return err
	}
	var found []Record
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
		r.SHA, r.Parent = f[0], strings.Fields(f[1] + " ")[0]
		if t, err := time.Parse(time.RFC3339, f[2]); err == nil {
			r.Time = t.UTC()
		}
		r.State, r.Recovered = StateOK, true
		r.Ref = s.refOf(ctx, r.SHA)
		found = append(found, r)
		known[r.SHA] = true
	}
	sort.Slice(found, func(i, j int) bool { return idNum(found[i].ID) < idNum(found[j].ID) })
	for _, r := range found {
		if err := s.appendRecord(r); err != nil {
			return err
		}
	}
	return nil
}

// refOf names a ref whose tip is sha, for a recovered record.
func (s *Store) refOf(ctx context.Context, sha string) string {
	out, err := s.git.Run(ctx, nil, "for-each-ref", "--points-at", sha, "--format=%(refname)", "refs/heads", "refs/cairn")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
}

// recordFromMessage reads cairn's trailers (and the seed's lines) from a commit message.
func recordFromMessage(msg string) (Record, bool) {
	var r Record
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
			r.Kind = Kind(v)
		case trailerLabel:
			r.Label = v
		case trailerRun:
			r.RunID = v
		case trailerCodon:
			r.CodonID = v
		case trailerAttempt:
			r.Attempt, _ = strconv.Atoi(v)
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
	n, _ := strconv.Atoi(strings.TrimPrefix(id, "c"))
	return n
}

// nextID is the id the next checkpoint takes. Callers hold the lock.
func (s *Store) nextID() string {
	max := 0
	for _, r := range s.records {
		max = maxInt(max, idNum(r.ID))
	}
	return "c" + strconv.Itoa(max+1)
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// appendRecord appends one line to the ledger and fsyncs it. Callers hold the lock.
func (s *Store) appendRecord(r Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(s.ledger, os.O_WRONLY|os.O_APPEND|os.O_CREATE|platform.NoFollow, 0o644)
	if err != nil {
		return fmt.Errorf("open ledger: %w", err)
	}
	w := bufio.NewWriter(f)
	w.Write(b)
	w.WriteByte('\n')
	err = w.Flush()
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("append ledger %s: %w", s.ledger, err)
	}
	s.records = append(s.records, r)
	s.ledgerSize += int64(len(b) + 1)
	return nil
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
