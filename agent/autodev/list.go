package autodev

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/platform"
	"github.com/cairn-dev/cairn/restore/ckpt"
	"github.com/cairn-dev/cairn/snapshot/gitobj"
)

// Entry is one checkpoint in checkpoints.json (docs/cairn-formats.md, "The
// autodev layout").
type Entry struct {
	ID     string    `json:"id"`     // c1, c2, …
	Commit string    `json:"commit"` // full object name
	Label  string    `json:"label"`
	Kind   string    `json:"kind"` // baseline, task, pre-restore
	Time   time.Time `json:"time"`
	// Task is the codon a lifecycle checkpoint belongs to; empty for the rest.
	Task string `json:"task,omitempty"`
	// Marker is the runtime's lifecycle marker it was made for, so a restart
	// never makes it twice.
	Marker string `json:"marker,omitempty"`
	// Branch is where a pre-restore checkpoint parked the work (a dirty tree).
	Branch string `json:"branch,omitempty"`
}

func idNum(id string) int {
	n, err := strconv.Atoi(strings.TrimPrefix(id, "c"))
	if err != nil || !strings.HasPrefix(id, "c") {
		return 0
	}
	return n
}

// Record is the entry as a checkpoint record, the shape cairn's listings,
// restores and events share.
func (e Entry) Record() ckpt.Record {
	return ckpt.Record{ID: e.ID, SHA: e.Commit, Kind: ckpt.Kind(e.Kind), Label: e.Label, CodonID: e.Task,
		Time: e.Time, State: ckpt.StateOK, Ref: e.Branch}
}

// nextID is one more than the highest id in entries.
func nextID(entries []Entry) string {
	n := 0
	for _, e := range entries {
		n = max(n, idNum(e.ID))
	}
	return "c" + strconv.Itoa(n+1)
}

// lock takes the workspace's list lock (other cairn processes on the same
// repository) besides the in-process mutex.
func (r *Repo) lock() (unlock func(), err error) {
	r.mu.Lock()
	dir := filepath.Join(r.dir, StateDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		r.mu.Unlock()
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	l, err := platform.Lock(filepath.Join(dir, "checkpoints.lock"))
	if err != nil {
		r.mu.Unlock()
		return nil, err
	}
	return func() { _ = l.Unlock(); r.mu.Unlock() }, nil
}

// load reads checkpoints.json, oldest first. A missing file is rebuilt from
// the autodev: commits git holds; one that does not parse is kept aside and
// rebuilt the same way.
func (r *Repo) load(ctx context.Context) ([]Entry, error) {
	path := r.ListPath()
	// The file is in the user's workspace: never followed, never waited on
	// (a FIFO), never read past a bound. One that is not a plain file of a
	// sane size is treated like one that does not parse.
	data, err := platform.ReadFileCapped(path, platform.MaxRuntimeFile)
	unusable := errors.Is(err, platform.ErrNotRegular) || errors.Is(err, platform.ErrTooLarge) || errors.Is(err, platform.ErrSymlink)
	if err == nil || unusable {
		var entries []Entry
		if err == nil {
			if err = json.Unmarshal(data, &entries); err == nil {
				err = checkEntries(entries)
			}
			if err == nil {
				sortEntries(entries)
				return entries, nil
			}
		}
		aside := fmt.Sprintf("%s.bad-%d", path, r.Now().Unix())
		if rerr := os.Rename(path, aside); rerr != nil {
			return nil, fmt.Errorf("%s does not parse (%v) and cannot be moved aside: %w", path, err, rerr)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	entries, err := r.rebuild(ctx)
	if errors.Is(err, ErrNotRepo) {
		return nil, nil // nothing to list, and nothing written into a folder that is no repository
	} else if err != nil {
		return nil, err
	}
	// Saved even when empty: else every list (the daemon's, every poll)
	// would walk the whole history again.
	return entries, r.save(entries)
}

// checkEntries refuses a list whose commits are not full object names: they
// go to git as arguments (one starting with "-" would read as an option).
func checkEntries(entries []Entry) error {
	for _, e := range entries {
		if !gitobj.IsHex(e.Commit) {
			return fmt.Errorf("checkpoint %s: commit %q is not an object name", e.ID, e.Commit)
		}
	}
	return nil
}

// save writes checkpoints.json whole, atomically.
func (r *Repo) save(entries []Entry) error {
	if entries == nil {
		entries = []Entry{}
	}
	data, err := json.MarshalIndent(entries, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(r.ListPath()), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(r.ListPath()), err)
	}
	return platform.WriteFileAtomic(r.ListPath(), append(data, '\n'), 0o644)
}

func sortEntries(entries []Entry) {
	slices.SortStableFunc(entries, func(a, b Entry) int { return idNum(a.ID) - idNum(b.ID) })
}

// rebuild lists the checkpoint commits git holds (subject autodev: …, made by
// autodev) on the current branch and the parking branches, oldest first.
// Ids, kinds and tasks come from the trailers; a commit without them is a
// task (or the baseline, by its subject) numbered after the rest.
func (r *Repo) rebuild(ctx context.Context) ([]Entry, error) {
	if err := r.ownGitDir(); err != nil {
		return nil, err
	}
	revs := []string{"--glob=refs/heads/" + strings.TrimSuffix(ParkPrefix, "-") + "*"}
	if _, err := r.run(ctx, "", nil, nil, "rev-parse", "-q", "--verify", "HEAD^{commit}"); err == nil {
		revs = append(revs, "HEAD")
	}
	const f = "%H%x1f%ae%x1f%cI%x1f%s%x1f%(trailers:key=Autodev-Checkpoint,valueonly,separator=%x20)%x1f" +
		"%(trailers:key=Autodev-Kind,valueonly,separator=%x20)%x1f%(trailers:key=Autodev-Task,valueonly,separator=%x20)%x1e"
	args := append([]string{"log", "--reverse", "--date-order", "--format=" + f}, revs...)
	out, err := r.run(ctx, "", nil, nil, args...)
	if err != nil {
		return nil, fmt.Errorf("rebuild %s from git: %w", r.ListPath(), err)
	}
	var entries, unnumbered []Entry
	seen := map[string]bool{}
	for _, rec := range strings.Split(out, "\x1e") {
		fields := strings.Split(strings.Trim(rec, "\n"), "\x1f")
		if len(fields) != 7 || fields[1] != identityEmail || !strings.HasPrefix(fields[3], SubjectPrefix) {
			continue
		}
		when, _ := time.Parse(time.RFC3339, fields[2])
		e := Entry{Commit: fields[0], Time: when.UTC(), Label: strings.TrimPrefix(fields[3], SubjectPrefix),
			ID: strings.TrimSpace(fields[4]), Kind: strings.TrimSpace(fields[5]), Task: strings.TrimSpace(fields[6])}
		switch {
		case e.Kind == KindBaseline || e.Kind == KindTask || e.Kind == KindPreRestore:
		case e.Label == BaselineLabel:
			e.Kind = KindBaseline
		default:
			e.Kind = KindTask
		}
		if e.Kind == KindPreRestore {
			e.Branch = r.branchAt(ctx, e.Commit)
		}
		if idNum(e.ID) == 0 || seen[e.ID] {
			unnumbered = append(unnumbered, e)
			continue
		}
		seen[e.ID] = true
		entries = append(entries, e)
	}
	for _, e := range unnumbered {
		e.ID = nextID(entries)
		entries = append(entries, e)
	}
	sortEntries(entries)
	return entries, nil
}

// branchAt is a parking branch whose tip is sha, or "".
func (r *Repo) branchAt(ctx context.Context, sha string) string {
	out, err := r.run(ctx, "", nil, nil, "for-each-ref", "--format=%(refname:short)", "--points-at", sha, "refs/heads/"+strings.TrimSuffix(ParkPrefix, "-")+"*")
	if err != nil || out == "" {
		return ""
	}
	first, _, _ := strings.Cut(out, "\n")
	return first
}

// Listing is the checkpoints newest first, and the id of the one the
// repository is on (← HEAD). Off is MsgNotRepo while there is no repository
// (the list then says so instead).
type Listing struct {
	Entries []Entry
	Head    string
	Off     string
}

// List reads the checkpoints.
func (r *Repo) List(ctx context.Context) (Listing, error) {
	// Refused before any git runs, as a checkpoint is (ownGitDir).
	if err := r.ownGitDir(); errors.Is(err, ErrNotRepo) {
		return Listing{Off: MsgNotRepo}, nil
	} else if err != nil {
		return Listing{}, err
	}
	unlock, err := r.lock()
	if err != nil {
		return Listing{}, err
	}
	defer unlock()
	entries, err := r.load(ctx)
	if err != nil {
		return Listing{}, err
	}
	var l Listing
	head, _ := r.run(ctx, "", nil, nil, "rev-parse", "-q", "--verify", "HEAD^{commit}")
	for i := len(entries) - 1; i >= 0; i-- {
		e := entries[i]
		if l.Head == "" && head != "" && e.Commit == head {
			l.Head = e.ID
		}
		l.Entries = append(l.Entries, e)
	}
	return l, nil
}

// Request is a checkpoint to make.
type Request struct {
	Kind   string // KindBaseline or KindTask
	Label  string
	Task   string
	Marker string
}

// Checkpoint commits the work tree on the current branch and lists it. A
// baseline is made only when the tree is dirty (made reports false
// otherwise); a task on a clean tree is the commit HEAD is on (the
// participant already committed). The branch moves by compare-and-swap, then
// the user's index follows it, as after git commit -a, so git status stays
// clean and the next commit of the user does not undo the checkpoint.
func (r *Repo) Checkpoint(ctx context.Context, req Request) (e Entry, made bool, err error) {
	unlock, err := r.lock()
	if err != nil {
		return Entry{}, false, err
	}
	defer unlock()
	if err := r.ownGitDir(); err != nil {
		return Entry{}, false, err
	}
	// A marker already checkpointed (the daemon hands every marker of the
	// run, each time state.json changes) costs no git process.
	entries, err := r.load(ctx)
	if err != nil {
		return Entry{}, false, err
	}
	if req.Marker != "" {
		for _, x := range entries {
			if x.Marker == req.Marker {
				return x, false, nil
			}
		}
	}
	st, err := r.probe(ctx)
	if err != nil {
		return Entry{}, false, err
	}
	tree, dirty, err := r.tree(ctx, st)
	if err != nil {
		return Entry{}, false, err
	}
	label := oneLine(req.Label)
	if label == "" {
		label = "checkpoint"
	}
	now := r.Now().UTC().Truncate(time.Second)
	e = Entry{ID: nextID(entries), Label: label, Kind: req.Kind, Time: now, Task: oneLine(req.Task), Marker: req.Marker}
	switch {
	case dirty:
		sha, err := r.commit(ctx, tree, st.head, e, now)
		if err != nil {
			return Entry{}, false, err
		}
		if err := r.moveBranch(ctx, st.branch, sha, st.head, SubjectPrefix+label); err != nil {
			return Entry{}, false, err
		}
		e.Commit = sha
		// The index follows the branch; stat data of unchanged entries is kept.
		if _, err := r.run(ctx, "", nil, nil, "read-tree", "-i", "-m", sha); err != nil {
			err = fmt.Errorf("checkpoint %s committed as %s, but the index could not follow (git status may show its changes as staged reversals; git reset fixes that): %w", e.ID, sha, err)
			entries = append(entries, e)
			if serr := r.save(entries); serr != nil {
				return e, true, errors.Join(err, serr)
			}
			return e, true, err
		}
	case req.Kind == KindBaseline:
		return Entry{}, false, nil // a clean tree gets no baseline
	case st.head == "":
		return Entry{}, false, fmt.Errorf("nothing to checkpoint in %s: no commit yet and no file to commit", r.dir)
	default:
		e.Commit = st.head // already committed: that commit is the checkpoint
	}
	entries = append(entries, e)
	if err := r.save(entries); err != nil {
		return e, true, fmt.Errorf("checkpoint %s is commit %s, but %w", e.ID, e.Commit, err)
	}
	return e, true, nil
}
