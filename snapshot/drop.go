package snapshot

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/platform"
	"github.com/cairn-dev/cairn/restore/ckpt"
	"github.com/cairn-dev/cairn/snapshot/gitobj"
	"github.com/cairn-dev/cairn/snapshot/retain"
)

// Retention on the store's side (docs/operating.md, "Retention"): dropping the refs
// a retention plan names, marking their records pruned, and pins.

// pruneLine is the ledger line that marks an earlier record pruned:
// {"prune":"c12","prunedAt":"…","prunedBy":"…"}. It has no "id", so a cairn
// that predates retention skips it as a bad line.
type pruneLine struct {
	Prune    string    `json:"prune"`
	PrunedAt time.Time `json:"prunedAt"`
	PrunedBy string    `json:"prunedBy"`
}

// parsePruneLine recognises a prune line (cheaply: most lines are records).
func parsePruneLine(line []byte) (pruneLine, bool) {
	if !bytes.HasPrefix(bytes.TrimSpace(line), []byte(`{"prune":`)) {
		return pruneLine{}, false
	}
	var m pruneLine
	if !decodePruneFast(line, &m) && json.Unmarshal(line, &m) != nil || m.Prune == "" {
		return pruneLine{}, false
	}
	return m, true
}

// applyMarks folds prune lines into the records they name. Callers hold the lock.
func (s *Store) applyMarks(marks []pruneLine) {
	if len(marks) == 0 {
		return
	}
	by := make(map[string]pruneLine, len(marks))
	for _, m := range marks {
		by[m.Prune] = m
	}
	for i := range s.records {
		if m, ok := by[s.records[i].ID]; ok {
			markPruned(&s.records[i], m)
		}
	}
}

func markPruned(r *ckpt.Record, m pruneLine) {
	at := m.PrunedAt.UTC()
	r.State, r.PrunedAt, r.PrunedBy = ckpt.StatePruned, &at, m.PrunedBy
}

// writeMarks appends prune lines with one fsync. Callers hold the lock.
func (s *Store) writeMarks(marks []pruneLine) error {
	var buf bytes.Buffer
	for _, m := range marks {
		b, err := json.Marshal(m)
		if err != nil {
			return err
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	return s.writeLines(buf.Bytes())
}

// SkippedDrop is a drop Drop did not carry out, and why.
type SkippedDrop struct {
	Drop   retain.Drop `json:"drop"`
	Reason string      `json:"reason"`
}

// DropResult is what Drop did.
type DropResult struct {
	Pruned  []ckpt.Record `json:"pruned"`            // records now marked pruned, as the ledger holds them
	Refs    []string      `json:"refs"`              // refs deleted
	Skipped []SkippedDrop `json:"skipped,omitempty"` // drops refused: the store changed since the plan
}

// Drop carries out a retention plan (retain.Plan) under the store's lock:
// for each drop it checks the plan still holds (the records are in the
// ledger and not pruned, no checkpoint was added to the ref since, the ref
// still points where the plan says, none of them is the position), deletes
// the refs by compare-and-swap, all in one `update-ref --stdin -z`
// transaction (one by one, `update-ref -d <ref> <old>`, when the
// transaction fails: a ref moved), then appends a prune line per record. A drop that no longer holds is skipped, with the
// reason. Objects become unreachable; collecting them is git's (gc/prune).
//
// A crash between the ref deletion and the ledger append leaves a record
// that looks ok but whose ref is gone; the next plan drops it again and
// Drop, finding the ref already gone, only marks it.
func (s *Store) Drop(ctx context.Context, drops []retain.Drop, now time.Time) (DropResult, error) {
	var res DropResult
	err := s.withLock(ctx, func() error {
		if err := s.refreshIfChanged(ctx); err != nil {
			return err
		}
		byID := make(map[string]ckpt.Record, len(s.records))
		onRef := map[string][]string{} // ref → ids of the live records sealed on it
		for _, r := range s.records {
			byID[r.ID] = r
			if r.Usable() && r.Ref != "" {
				onRef[r.Ref] = append(onRef[r.Ref], r.ID)
			}
		}
		pos := s.position()
		tips, err := s.refTips(ctx)
		if err != nil {
			return err
		}
		var marks []pruneLine
		var firstErr error
		var dels []refDelete
		for _, d := range drops {
			reason, old, err := s.checkDrop(d, byID, onRef, pos, tips)
			if err != nil {
				firstErr = errors.Join(firstErr, err)
				res.Skipped = append(res.Skipped, SkippedDrop{Drop: d, Reason: err.Error()})
				continue
			}
			if reason != "" {
				res.Skipped = append(res.Skipped, SkippedDrop{Drop: d, Reason: reason})
				continue
			}
			dels = append(dels, refDelete{drop: d, old: old})
		}
		for _, del := range s.deleteRefs(ctx, dels) {
			d := del.drop
			if del.err != nil {
				res.Skipped = append(res.Skipped, SkippedDrop{Drop: d, Reason: fmt.Sprintf("ref %s moved (another writer?); not deleted: %v", d.Ref, del.err)})
				continue
			}
			if del.old != "" {
				res.Refs = append(res.Refs, d.Ref)
			}
			for _, r := range d.Records {
				marks = append(marks, pruneLine{Prune: r.ID, PrunedAt: now.UTC(), PrunedBy: d.Rule})
			}
		}
		if len(marks) == 0 {
			return firstErr
		}
		s.applyMarks(marks)
		ids := map[string]bool{}
		for _, m := range marks {
			ids[m.Prune] = true
		}
		for _, r := range s.records {
			if ids[r.ID] {
				res.Pruned = append(res.Pruned, r)
			}
		}
		if err := s.flushUnwritten(); err == nil {
			err = s.writeMarks(marks)
			if err == nil {
				return firstErr
			}
			firstErr = errors.Join(firstErr, err)
		} else {
			firstErr = errors.Join(firstErr, err)
		}
		s.unwrittenMarks = append(s.unwrittenMarks, marks...)
		return errors.Join(firstErr, errors.New("prune marks kept in memory until the ledger can be written"))
	})
	return res, err
}

// checkDrop says whether d still holds: a reason to skip it, or the ref's
// tip to delete by compare-and-swap ("" with no reason: the ref is gone
// already, only the records are marked). Callers hold the lock.
func (s *Store) checkDrop(d retain.Drop, byID map[string]ckpt.Record, onRef map[string][]string, pos string, tips map[string]string) (reason, old string, err error) {
	unit, run := retain.UnitOf(d.Ref)
	if len(d.Records) == 0 || unit == "" || unit != d.Unit || (unit == retain.UnitRun && run != d.RunID) {
		return fmt.Sprintf("ref %s cannot be dropped as a %s", d.Ref, d.Unit), "", nil
	}
	if unit == retain.UnitSingle && len(d.Records) != 1 {
		return "a single drop names one checkpoint", "", nil
	}
	shas := map[string]bool{}
	want := map[string]bool{}
	for _, r := range d.Records {
		cur, ok := byID[r.ID]
		switch {
		case !ok:
			return "checkpoint " + r.ID + " is not in the ledger", "", nil
		case cur.Pruned():
			return "checkpoint " + r.ID + " is pruned already", "", nil
		case !cur.Usable():
			return "checkpoint " + r.ID + " holds no commit", "", nil
		case cur.Ref != d.Ref || cur.SHA != r.SHA:
			return "checkpoint " + r.ID + " is not on " + d.Ref, "", nil
		case strings.EqualFold(cur.SHA, pos):
			return "checkpoint " + r.ID + " is where the work tree is (← HEAD)", "", nil
		}
		shas[strings.ToLower(cur.SHA)] = true
		want[r.ID] = true
	}
	for _, id := range onRef[d.Ref] {
		if !want[id] {
			return "checkpoint " + id + " was added to " + d.Ref + " since the plan", "", nil
		}
	}
	tip, ok := tips[d.Ref]
	if !ok {
		return "", "", nil // gone already (a crash after deleting it): mark only
	}
	if !shas[strings.ToLower(tip)] {
		return "ref " + d.Ref + " holds " + short7(tip) + ", a commit the plan does not name (the runtime's own?)", "", nil
	}
	return "", tip, nil
}

// refDelete is one ref Drop deletes: old is its tip ("" when it is gone
// already: only the records are marked); err, after deleteRefs, why not.
type refDelete struct {
	drop retain.Drop
	old  string
	err  error
}

// refTips reads every ref's tip at once (a packed-refs file of 10,000
// refs read once per drop would cost seconds). Callers hold the lock.
func (s *Store) refTips(ctx context.Context) (map[string]string, error) {
	out, err := s.git.Run(ctx, nil, "for-each-ref", "--format=%(objectname) %(refname)")
	if err != nil {
		return nil, fmt.Errorf("list refs: %w", err)
	}
	tips := map[string]string{}
	for _, l := range strings.Split(string(out), "\n") {
		if sha, name, ok := strings.Cut(l, " "); ok {
			tips[name] = strings.ToLower(sha)
		}
	}
	return tips, nil
}

// deleteRefs deletes the refs of dels by compare-and-swap in one
// transaction; when it fails (a ref moved: the transaction is all or
// nothing), one by one, so each failure is its own. Callers hold the lock.
func (s *Store) deleteRefs(ctx context.Context, dels []refDelete) []refDelete {
	var in bytes.Buffer
	n := 0
	for _, d := range dels {
		if d.old == "" {
			continue
		}
		fmt.Fprintf(&in, "delete %s\x00%s\x00", d.drop.Ref, d.old)
		n++
	}
	if n == 0 {
		return dels
	}
	if n > 1 {
		if _, err := s.git.Run(ctx, &in, "update-ref", "-m", "cairn: prune", "--stdin", "-z"); err == nil {
			return dels
		}
	}
	for i, d := range dels {
		if d.old == "" {
			continue
		}
		if _, err := s.git.Run(ctx, nil, "update-ref", "-m", "cairn: prune "+d.drop.Rule, "-d", d.drop.Ref, d.old); err != nil {
			dels[i].err = err
		}
	}
	return dels
}

// Pins are checkpoints no retention policy drops: full SHAs, one a line, in
// <store>/cairn/pins (written atomically; a link there is replaced, never
// followed).

func (s *Store) pinsPath() string { return filepath.Join(s.gitDir, cairnSubdir, "pins") }

// readPins reads the pin file; none is no pins. Callers hold the lock or
// accept a racy read.
func (s *Store) readPins() ([]string, error) {
	b, err := readNoFollow(s.pinsPath(), maxSmallFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read pins: %w", err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.ToLower(strings.TrimSpace(l)); gitobj.IsHex(l) {
			out = append(out, l)
		}
	}
	return out, nil
}

// Pins lists the pinned SHAs, sorted.
func (s *Store) Pins() ([]string, error) {
	return s.readPins() // the file is replaced atomically: no lock to read it
}

// Pin keeps the commit sha from every retention policy. It must be a full
// SHA of a commit the store holds. Pinning twice is one pin.
func (s *Store) Pin(ctx context.Context, sha string) error {
	sha = strings.ToLower(strings.TrimSpace(sha))
	if !gitobj.IsHex(sha) {
		return fmt.Errorf("pin: %q is not a full SHA", sha)
	}
	return s.withLock(ctx, func() error {
		if _, ok := s.resolve(ctx, sha+"^{commit}"); !ok {
			return fmt.Errorf("pin: %s is not a commit of the store", short7(sha))
		}
		return s.editPins(func(set map[string]bool) { set[sha] = true })
	})
}

// Unpin removes a pin; reports whether there was one.
func (s *Store) Unpin(ctx context.Context, sha string) (bool, error) {
	sha = strings.ToLower(strings.TrimSpace(sha))
	had := false
	err := s.withLock(ctx, func() error {
		return s.editPins(func(set map[string]bool) { had = set[sha]; delete(set, sha) })
	})
	return had, err
}

// editPins rewrites the pin file through fn. Callers hold the lock.
func (s *Store) editPins(fn func(map[string]bool)) error {
	pins, err := s.readPins()
	if err != nil {
		return err
	}
	set := map[string]bool{}
	for _, p := range pins {
		set[p] = true
	}
	fn(set)
	out := make([]string, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	sort.Strings(out)
	body := strings.Join(out, "\n")
	if body != "" {
		body += "\n"
	}
	return platform.WriteFileAtomic(s.pinsPath(), []byte(body), 0o644)
}
