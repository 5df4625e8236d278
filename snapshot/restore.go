package snapshot

import (
	"context"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cairn-dev/cairn/platform"
	"github.com/cairn-dev/cairn/restore/ckpt"
	"github.com/cairn-dev/cairn/snapshot/gitobj"
)

// restoreWork is what the plan hands checkoutTarget and verify beside the result.
type restoreWork struct {
	kept  []string          // the untracked paths the target lacks: checkout must leave them
	wrote map[string]blobID // path → the blob the target holds, for verification
	// forced are the files on disk the pre-restore checkpoint left out
	// (ignored) where the target adds a path: staged into a second
	// pre-restore checkpoint, they stay in cairn's index as the target's
	// though ignore rules may cover them, so the next seal judges them.
	forced []string
	// blocked are folders standing where the target writes a file that
	// hold what no checkpoint can (a link, a nested repository): git's
	// checkout would remove them, so the git way refuses the restore.
	blocked []string
}

// ErrCannotHoldInTheWay refuses a restore that goes the git way when a
// folder stands where the target writes a file and holds what no checkpoint
// can hold (a link, a FIFO, a nested repository): git's checkout would
// remove it all. Nothing in the work tree has changed then.
var ErrCannotHoldInTheWay = errors.New("a folder where the target has a file holds what no checkpoint can hold (a link, a special file or a nested repository); move it away and restore again")

type blobID struct{ sha, mode string }

// Restore brings the work tree to a checkpoint: it seals a pre-restore
// checkpoint of the whole visible work tree (so the restore can be undone),
// plans, checks the target out with a detached `git checkout --force` (no
// branch moves), and verifies the work tree against the target. It deletes
// only files cairn tracked (those in the current position's checkpoint) that
// the target lacks; it never cleans.
func (s *Store) Restore(ctx context.Context, opts ckpt.Request) (ckpt.Outcome, error) {
	var res ckpt.Outcome
	err := s.withLock(ctx, func() error {
		if err := s.refreshIfChanged(ctx); err != nil {
			return err
		}
		var err error
		res, err = s.restoreLocked(ctx, opts)
		return err
	})
	return res, err
}

func (s *Store) restoreLocked(ctx context.Context, opts ckpt.Request) (ckpt.Outcome, error) {
	defer s.useWorkTree()()
	s.lastRestore = ""
	const steps = 4
	if s.left().whole() {
		return ckpt.Outcome{}, ErrWorkTreeForeign
	}
	progress := func(step int, msg string) {
		if opts.Progress != nil {
			opts.Progress(step, steps, msg)
		}
	}
	target, ok := s.resolve(ctx, opts.Target+"^{commit}")
	if !ok {
		if err := s.lostCommit(ctx, opts.Target); err != nil {
			return ckpt.Outcome{}, err
		}
		return ckpt.Outcome{}, fmt.Errorf("unknown checkpoint: %s", opts.Target)
	}
	var prefixes []string
	for _, p := range opts.Paths {
		c, err := cleanRel(p)
		if err != nil {
			return ckpt.Outcome{}, err
		}
		prefixes = append(prefixes, c)
	}
	pos := s.position()
	res := ckpt.Outcome{Target: target, From: pos, DryRun: opts.DryRun}
	work := &restoreWork{wrote: map[string]blobID{}}

	// 0. The target's trees and the blobs it will write, read before
	// anything is sealed or changed: a damaged target is refused here.
	// In-process when the engine can (inprocrestore.go), else by git.
	var ip *ipRestore
	if e := s.inprocRestorer(ctx, opts); e != nil {
		// A pre-restore checkpoint that reconciles the whole tree starts
		// from cairn's index: parsed meanwhile (one core; the check reads
		// only objects, and nothing else uses the parse until it is done).
		// A new engine parses it here; a daemon's finds it parsed already.
		var parsed chan struct{}
		if opts.Changed == nil {
			parsed = make(chan struct{})
			go func() {
				defer close(parsed)
				_, _, _ = e.loadIndex(s.git.Index)
			}()
		}
		r, err := s.checkInproc(ctx, e, target, pos, prefixes, opts.Changed)
		if parsed != nil {
			<-parsed
		}
		if err != nil && !errors.Is(err, errFallback) {
			return res, err
		}
		ip = r
	}
	var tc *targetCheck
	if ip == nil {
		var err error
		if tc, err = s.checkTarget(ctx, target, pos, prefixes, opts.Changed); err != nil {
			return res, err
		}
	}

	// 1. The work tree as it is now, whole and visible, plus any file the
	// restore would overwrite that ignore rules hide.
	progress(1, "sealing a pre-restore checkpoint of the work tree")
	var before string
	if opts.DryRun {
		tree, err := s.dryTree(ctx, target, prefixes)
		if err != nil {
			return res, err
		}
		before = tree
	} else {
		req := SealRequest{
			Kind: ckpt.KindPreRestore, Label: "before restore to " + orDefault(opts.Label, short7(target)),
			Patterns: []string{"**"}, Ref: recoveryRef(opts.Label), StartSHA: pos, Changed: opts.Changed,
			subject: "Recovery snapshot before rollback to " + target,
			afterStage: func() error {
				var err error
				work.forced, work.blocked, err = s.addOverwritten(ctx, s.git, target, prefixes)
				return err
			},
		}
		if ip == nil {
			// The git way checks no file it overwrites against the
			// pre-restore checkpoint (unvouched): told the watch's dirty
			// set or not, it reconciles the whole work tree.
			req.Changed = nil
		} else {
			// The in-process engine may seal it (only what the watch saw
			// change, or the whole tree); the files the restore would
			// overwrite that it leaves out are found from the plan below.
			req.afterStage = nil
		}
		rec, err := s.sealLocked(ctx, req)
		if err != nil {
			return res, fmt.Errorf("pre-restore checkpoint: %w", err)
		}
		res.PreRestore = &rec
		t, ok := "", false
		if ip != nil {
			t, err = ip.e.commitTree(ctx, s, rec.SHA)
			ok = err == nil
		} else {
			t, ok = s.resolve(ctx, rec.SHA+"^{tree}")
		}
		if !ok {
			return res, errors.New("pre-restore checkpoint has no tree")
		}
		before = t
	}

	// 2. The plan.
	progress(2, "planning")
	var ipChanges []ipChange
	if ip != nil {
		// The writes the check could not foresee (files changed since the
		// last seal) are read here, before the first file is written.
		ch, err := ip.planInproc(ctx, &res, work, before)
		var blocked []string // folders in the way the in-process way leaves, git's would remove
		if err == nil || errors.Is(err, errFallback) {
			// Files on disk where the target adds a path that the
			// pre-restore checkpoint left out (ignored, over the size
			// limit, written since): a second pre-restore checkpoint on
			// the first stages them (the git way), and the plan starts over
			// from it.
			// Told the watch's dirty set, the first staged only those
			// paths: the files the restore overwrites or deletes that it
			// cannot vouch for go into the second too.
			var unseen []string
			if opts.Changed != nil {
				unseen = ip.unvouched(ch, opts.Changed)
			}
			var over []string
			over, blocked = ip.overwritten(ch)
			if len(over) > 0 || len(unseen) > 0 {
				req := SealRequest{
					Kind: ckpt.KindPreRestore, Label: "before restore to " + orDefault(opts.Label, short7(target)) + ", with the files it overwrites",
					Patterns: []string{"**"}, Ref: res.PreRestore.Ref, StartSHA: res.PreRestore.SHA, Changed: append([]string{}, unseen...),
					subject: "Recovery snapshot before rollback to " + target,
				}
				if len(over) > 0 {
					// The plan found them: staged as they are, no second diff.
					req.afterStage = func() error { return stageFiles(ctx, s.git, over) }
				}
				rec, serr := s.sealLocked(ctx, req)
				if serr != nil {
					return res, fmt.Errorf("pre-restore checkpoint: %w", serr)
				}
				res.PreRestore = &rec
				if before, err = ip.e.commitTree(ctx, s, rec.SHA); err != nil {
					return res, fmt.Errorf("pre-restore checkpoint: %w", err)
				}
				res.Write, res.Delete, res.Kept = nil, nil, 0
				work = &restoreWork{wrote: map[string]blobID{}, forced: over}
				ch, err = ip.planInproc(ctx, &res, work, before)
			}
		}
		if errors.Is(err, errFallback) {
			// A blob too large to hold: git checks it out.
			res.Write, res.Delete, res.Kept = nil, nil, 0
			work = &restoreWork{wrote: map[string]blobID{}, forced: work.forced, blocked: blocked}
			ip, tc = nil, &targetCheck{target: target, files: map[string]treeFile{}, read: map[string]bool{}}
		} else if err != nil {
			var dmg *ckpt.TargetDamagedError
			if errors.As(err, &dmg) && res.PreRestore != nil {
				dmg.PreRestore = res.PreRestore.ID
			}
			return res, err
		}
		ipChanges = ch
	}
	if ip == nil {
		if err := s.plan(ctx, &res, work, before, pos, target, prefixes); err != nil {
			return res, err
		}
		// The writes checkTarget could not foresee (files changed since the last
		// seal), read before the first file is written.
		if err := s.checkWrites(ctx, tc, work); err != nil {
			var dmg *ckpt.TargetDamagedError
			if errors.As(err, &dmg) && res.PreRestore != nil {
				dmg.PreRestore = res.PreRestore.ID
			}
			return res, err
		}
	}
	if opts.DryRun {
		return res, nil
	}
	if ip == nil && len(work.blocked) > 0 {
		// Before anything is written or recorded: git's checkout would
		// remove what no checkpoint holds.
		return res, fmt.Errorf("%w: %s", ErrCannotHoldInTheWay, strings.Join(work.blocked, ", "))
	}

	// 3. Apply. Until it ends well, cairn's index may not describe the
	// work tree: the next seal reconciles it whole, in this process or,
	// by the restore's record, another (restorejournal.go). A store that
	// cannot take the record refuses the restore, the work tree untouched.
	tag := newRestoreTag()
	var writes []string
	for _, w := range res.Write {
		writes = append(writes, w.Path)
	}
	if err := s.beginRestore(tag, writes); err != nil {
		return res, err
	}
	s.reexamine, s.rejudge, s.restoreUnsure = nil, nil, true
	progress(3, fmt.Sprintf("writing %d files, deleting %d", len(res.Write), len(res.Delete)))
	s.lastRestore = EngineGit
	var stored chan error // the store's index and HEAD brought to the target
	if ip != nil {
		s.lastRestore = EngineInproc
		if err := ip.applyInproc(ctx, ipChanges, tag); err != nil {
			return res, err
		}
		if err := restoreApplied(); err != nil {
			return res, err
		}
		// Beside the verification: they read and write only the store
		// (cairn's index, the stat cache, HEAD), it only the work tree.
		stored = make(chan error, 1)
		go func() {
			err := ip.indexAfter(ctx, before, ipChanges)
			if err == nil && len(prefixes) == 0 {
				err = ip.detachHead(ctx)
			}
			stored <- err
		}()
	} else if err := s.checkoutTarget(ctx, &res, work, target, prefixes); err != nil {
		return res, err
	} else if err := restoreApplied(); err != nil {
		return res, err
	}

	// 4. Verify.
	progress(4, "verifying the work tree against the target")
	diff, err := s.verify(ctx, &res, work)
	if stored != nil {
		if serr := <-stored; serr != nil {
			return res, serr
		}
	}
	if err != nil {
		return res, err
	}
	res.Diff = diff
	if len(prefixes) == 0 {
		s.setPosition(target)
	}
	s.reexamine, s.restoreUnsure = afterRestore(&res, work), false
	// Files the index now holds as the target's that ignore rules may
	// cover: those a second pre-restore checkpoint staged though ignored,
	// and, for a restore of paths, what it wrote (rules outside the paths
	// were not brought to the target's).
	s.rejudge = slices.Clone(work.forced)
	if len(prefixes) > 0 {
		for _, w := range res.Write {
			s.rejudge = append(s.rejudge, w.Path)
		}
	}
	if err := s.endRestore(s.reexamine, s.rejudge); err != nil {
		// The record still says the restore is under way: the next seal
		// reconciles the whole tree, which is exact too.
		s.note(ctx, err.Error())
	}
	// The index now holds the target's files, a subset of the pre-restore's
	// "**" selection it stays recorded under: a seal under "**" stages only
	// what differs, one under other patterns reconciles in full.
	return res, nil
}

// afterRestore lists what a restore leaves that cairn's index, now the
// target's, may not describe, for the next seal to look at (told what
// changed, it adds them; a full one asks check-ignore about them): the
// paths it kept (on disk, held by the pre-restore checkpoint, not by the
// target: out of the index), the ignored files a second pre-restore
// checkpoint staged (forced), those it could not bring to the target
// (Diff), and those it wrote and deleted (a watch reports these, unless its
// events were dropped).
func afterRestore(res *ckpt.Outcome, work *restoreWork) []string {
	out := append(slices.Clone(work.kept), work.forced...)
	for _, l := range [][]ckpt.PlanFile{res.Write, res.Delete} {
		for _, f := range l {
			out = append(out, f.Path)
		}
	}
	for _, d := range res.Diff {
		out = append(out, d.Path)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func short7(sha string) string {
	if len(sha) > 7 {
		return sha[:7]
	}
	return sha
}

// recoveryRef is the pre-restore safety branch: recovery/<ISO time, ':' and '.' as '-'>-<id>
// (docs/cairn-formats.md, "Refs").
func recoveryRef(label string) string {
	stamp := strings.NewReplacer(":", "-", ".", "-").Replace(isoTime(time.Now()))
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	id := hex.EncodeToString(rnd[:])
	if label != "" && validRefPart(label) {
		id = label + "-" + id
	}
	return "refs/heads/recovery/" + stamp + "-" + id
}

// addOverwritten stages files that exist on disk at paths the target holds
// but that the pre-restore staging left out (ignored): the restore will
// overwrite them, so the pre-restore checkpoint must hold them. Only paths
// under prefixes (all, when there are none) count: a restore of paths
// touches nothing else. It returns what it staged: files staged though
// ignored, which the next seal must judge again (restoreWork.forced).
func (s *Store) addOverwritten(ctx context.Context, g *Git, target string, prefixes []string) (forced, blocked []string, err error) {
	// The paths the target holds that the staged tree lacks: a tree diff,
	// which skips every unchanged folder, instead of listing both in full.
	out, _, err := g.runMapped(ctx, nil, "write-tree")
	if err != nil {
		return nil, nil, err
	}
	missing, err := s.rawDiff(ctx, strings.TrimSpace(string(out)), target)
	if err != nil {
		return nil, nil, err
	}
	var add []string
	lo := s.left()
	held := map[string]bool{} // paths the staged tree holds that the target lacks
	for _, c := range missing {
		if c.status == "D" {
			held[c.path] = true
		}
	}
	folders, added := map[string]bool{}, map[string]bool{}
	for _, c := range missing {
		if c.status != "A" || !under(c.path, prefixes) {
			continue
		}
		// git's checkout removes what stands there, ignored files and all:
		// a folder holding what no checkpoint can hold blocks the restore
		// (ErrCannotHoldInTheWay).
		in, block := s.standingAt(c.path, folders)
		if block {
			blocked = append(blocked, c.path)
		}
		for _, p := range in {
			if held[p] || added[p] || Excluded(p) || lo.covers(p) {
				continue
			}
			added[p] = true
			add = append(add, p)
		}
	}
	sort.Strings(add)
	return add, blocked, stageFiles(ctx, g, add)
}

// stageFiles adds the work-tree files paths to g's index as they are on
// disk, ignore rules or not.
func stageFiles(ctx context.Context, g *Git, paths []string) error {
	if len(paths) == 0 {
		return nil
	}
	_, _, err := g.runMapped(ctx, nulBytes(paths), "update-index", "-z", "--add", "--stdin")
	return err
}

// standingAt lists the regular files on disk a restore replaces when it
// writes the target's file at rel: a file at a folder above it (git's
// checkout removes a file standing where the target needs a folder), the
// file at rel, or every file of a folder at rel. Nothing is listed when a
// link or anything else stands in the way (never followed); blocked: a
// folder at rel holds what no checkpoint can hold (filesInFolder). folders
// remembers the folders seen on disk, so that each is looked at once, and
// rel itself is looked at once.
func (s *Store) standingAt(rel string, folders map[string]bool) (files []string, blocked bool) {
	for i := 0; i < len(rel); i++ {
		if rel[i] != '/' {
			continue
		}
		d := rel[:i]
		if folders[d] {
			continue
		}
		fi, err := s.lstatWork(d)
		switch {
		case err != nil:
			return nil, false
		case fi.IsDir():
			folders[d] = true
		case fi.Mode().IsRegular():
			return []string{d}, false
		default:
			return nil, false
		}
	}
	fi, err := s.lstatWork(rel)
	switch {
	case err != nil:
		return nil, false
	case fi.Mode().IsRegular():
		return []string{rel}, false
	case fi.IsDir():
		files, whole := s.filesInFolder(rel)
		if !whole {
			return nil, true
		}
		return files, false
	}
	return nil, false
}

// filesInFolder lists the regular files under the work-tree folder rel, at
// every depth, beneath the work tree and following nothing: what a restore
// must hold before it replaces the folder with the target's file. whole is
// false when the folder holds anything else (a link, a FIFO, a socket, a
// name cairn never enters, such as a nested repository's .git) or could not
// be read all through: what stands there cannot all be held in a checkpoint.
func (s *Store) filesInFolder(rel string) (files []string, whole bool) {
	whole = true
	err := s.withWorkTree(func(t *platform.Tree) error {
		var walk func(dir string) error
		walk = func(dir string) error {
			var subs []string
			err := t.EachEntry(filepath.FromSlash(dir), func(d fs.DirEntry) {
				p := dir + "/" + d.Name()
				switch {
				case Excluded(p):
					whole = false
				case d.IsDir():
					subs = append(subs, p)
				case d.Type().IsRegular():
					files = append(files, p)
				default:
					whole = false
				}
			})
			if err != nil {
				return err
			}
			for _, sub := range subs {
				if err := walk(sub); err != nil {
					return err
				}
			}
			return nil
		}
		return walk(rel)
	})
	return files, whole && err == nil
}

// dryTree writes the tree of the whole visible work tree through a copy of
// the index, touching no ref and not the index itself. The copy has its own
// runner: the store's is never swapped, so readers beside a dry run (Diff,
// the resolver's questions) always see the store's own index.
func (s *Store) dryTree(ctx context.Context, target string, prefixes []string) (string, error) {
	if err := s.inproc.syncIndex(ctx); err != nil {
		return "", err
	}
	tmp := s.git.Index + ".dry-" + strconv.Itoa(os.Getpid())
	defer os.Remove(tmp)
	defer os.Remove(tmp + ".json")
	if idx, err := platform.OpenRegular(s.git.Index); err == nil {
		err := copyNoFollow(idx, tmp)
		idx.Close()
		if err != nil {
			return "", err
		}
		if m, err := readNoFollow(s.git.Index+".json", maxSmallFile); err == nil {
			_ = createNoFollow(tmp+".json", m)
		}
	}
	dry := *s.git
	dry.Index = tmp
	sel, _ := NewSelector([]string{"**"})
	if _, err := s.stage(ctx, &dry, sel, nil); err != nil {
		return "", err
	}
	if _, _, err := s.addOverwritten(ctx, &dry, target, prefixes); err != nil {
		return "", err
	}
	out, _, err := dry.runMapped(ctx, nil, "write-tree")
	return strings.TrimSpace(string(out)), err
}

type rawChange struct {
	mode   string // new mode (writes)
	status string
	sha    string // new blob (writes)
	oldSHA string
	path   string
}

// rawDiff lists the changes from tree a to tree b.
func (s *Store) rawDiff(ctx context.Context, a, b string) ([]rawChange, error) {
	out, err := s.git.Run(ctx, nil, "diff-tree", "-r", "-z", "--raw", "--no-renames", a, b)
	if err != nil {
		return nil, err
	}
	f := splitNul(out)
	var ch []rawChange
	for i := 0; i+1 < len(f); i += 2 {
		meta := strings.Fields(strings.TrimPrefix(f[i], ":"))
		if len(meta) < 5 {
			continue
		}
		ch = append(ch, rawChange{status: meta[4], mode: meta[1], oldSHA: meta[2], sha: meta[3], path: f[i+1]})
	}
	return ch, nil
}

func under(p string, prefixes []string) bool {
	if len(prefixes) == 0 {
		return true
	}
	for _, pre := range prefixes {
		if p == pre || strings.HasPrefix(p, pre+"/") {
			return true
		}
	}
	return false
}

// plan fills the files to write (what differs between the work tree and the
// target) and to delete (what cairn tracked at the position that the target
// lacks and that is on disk).
func (s *Store) plan(ctx context.Context, res *ckpt.Outcome, work *restoreWork, before, pos, target string, prefixes []string) error {
	toTarget, err := s.rawDiff(ctx, before, target)
	if err != nil {
		return err
	}
	tracked := map[string]bool{}
	if pos != "" {
		gone, err := s.rawDiff(ctx, pos, target)
		if err != nil {
			return err
		}
		for _, c := range gone {
			if c.status == "D" {
				tracked[c.path] = true
			}
		}
	}
	sizes := map[string]int64{}
	var shas []string
	for _, c := range toTarget {
		if !under(c.path, prefixes) {
			continue
		}
		switch c.status {
		case "A", "M", "T":
			shas = append(shas, c.sha)
		case "D":
			shas = append(shas, c.oldSHA)
		}
	}
	if len(shas) > 0 {
		out, err := s.git.Run(ctx, strings.NewReader(strings.Join(shas, "\n")+"\n"), "cat-file", "--batch-check=%(objectname) %(objectsize)")
		if err != nil {
			return err
		}
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if sha, n, ok := strings.Cut(l, " "); ok {
				sizes[sha], _ = strconv.ParseInt(n, 10, 64)
			}
		}
	}
	lo := s.left()
	for _, c := range toTarget {
		if !under(c.path, prefixes) {
			continue
		}
		if lo.covers(c.path) {
			res.LeftOut = append(res.LeftOut, leftOutIssues([]string{c.path})...)
			continue
		}
		switch c.status {
		case "A":
			res.Write = append(res.Write, ckpt.PlanFile{Path: c.path, Size: sizes[c.sha], Action: ckpt.ActionAdd})
			work.wrote[c.path] = blobID{c.sha, c.mode}
		case "M", "T":
			res.Write = append(res.Write, ckpt.PlanFile{Path: c.path, Size: sizes[c.sha], Action: ckpt.ActionModify})
			work.wrote[c.path] = blobID{c.sha, c.mode}
		case "D":
			if tracked[c.path] {
				res.Delete = append(res.Delete, ckpt.PlanFile{Path: c.path, Size: sizes[c.oldSHA], Action: ckpt.ActionDelete})
			} else {
				res.Kept++
				work.kept = append(work.kept, c.path)
			}
		}
	}
	return nil
}

// checkoutTarget checks the target out. For a whole restore the index first loses
// the untracked files the target lacks (so checkout leaves them), then
// `checkout --force --detach` writes and deletes; for paths, the named files
// are checked out and the planned deletions made one by one.
func (s *Store) checkoutTarget(ctx context.Context, res *ckpt.Outcome, work *restoreWork, target string, prefixes []string) error {
	del := map[string]bool{}
	for _, d := range res.Delete {
		del[d.Path] = true
	}
	if len(prefixes) == 0 {
		// Untracked files the target lacks leave the index first, so checkout leaves them on disk.
		if len(work.kept) > 0 {
			if _, _, err := s.git.runMapped(ctx, nulBytes(work.kept), "update-index", "-z", "--force-remove", "--stdin"); err != nil {
				return err
			}
		}
		// Left-out folders: out of the index and out of what is checked
		// out, so checkout neither writes nor deletes anything in them.
		if lo := s.left(); lo.any() {
			if err := s.dropLeftOut(ctx, s.git, lo); err != nil {
				return err
			}
			t, err := s.withoutLeftOut(ctx, target, lo)
			if err != nil {
				return err
			}
			target = t
		}
		var err error
		_, _, err = s.git.runMapped(ctx, nil, "checkout", "-q", "--force", "--detach", target)
		return err
	}
	// Deletions come first: a file where the target holds a folder must be
	// gone before checkout writes into it (checkout clears emptied folders).
	var gone []string
	for _, d := range res.Delete {
		// Removed from its folder resolved beneath the work tree: a folder
		// on its way swapped for a link leaves the file where it is (verify
		// names it), never removes what the link leads to.
		err := s.removeWork(d.Path)
		if errors.Is(err, platform.ErrThroughLink) {
			continue
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			return fmt.Errorf("delete %s: %w", d.Path, err)
		}
		gone = append(gone, d.Path)
	}
	if len(gone) > 0 {
		if _, _, err := s.git.runMapped(ctx, nulBytes(gone), "update-index", "-z", "--force-remove", "--stdin"); err != nil {
			return err
		}
	}
	args := []string{"checkout", "-q", "--force", target, "--"}
	for _, w := range res.Write {
		args = append(args, ":(literal)"+w.Path)
	}
	for _, batch := range batches(args[5:], s.opts.BatchSize, 64<<10) {
		if _, _, err := s.git.runMapped(ctx, nil, append(args[:5:5], batch...)...); err != nil {
			return err
		}
	}
	return nil
}

// verify checks every planned path on disk against the target: each
// written file has the target's bytes (its blob hash) and mode, each deleted
// file is gone. Paths outside the plan were already equal to the target in
// the pre-restore checkpoint, and checkout does not touch them.
func (s *Store) verify(ctx context.Context, res *ckpt.Outcome, work *restoreWork) ([]ckpt.PathIssue, error) {
	var issues []ckpt.PathIssue
	// Several files at once (most of a small file's time is opening it),
	// the issues in the plan's order.
	found := make([]string, len(res.Write))
	gitobj.ForEach(len(res.Write), func(i int) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		w := res.Write[i]
		want := work.wrote[w.Path]
		got, exec, err := s.blobHash(w.Path, len(want.sha))
		switch {
		case err != nil:
			found[i] = "not written: " + err.Error()
		case got != want.sha:
			found[i] = "content differs from the target"
		case exec != (want.mode == "100755"):
			found[i] = "mode differs from the target"
		}
		return nil
	})
	if err := ctx.Err(); err != nil {
		return issues, err
	}
	for i, why := range found {
		if why != "" {
			issues = append(issues, ckpt.PathIssue{Path: res.Write[i].Path, Reason: why})
		}
	}
	for _, d := range res.Delete {
		// A folder in its place (the target holds files under that path) means the file is gone.
		fi, err := s.lstatWork(d.Path)
		switch {
		case errors.Is(err, platform.ErrThroughLink):
			issues = append(issues, ckpt.PathIssue{Path: d.Path, Reason: "not deleted: a folder on its way resolves through a symbolic link (not followed)"})
		case err == nil && !fi.IsDir():
			issues = append(issues, ckpt.PathIssue{Path: d.Path, Reason: "still on disk; the target lacks it"})
		}
	}
	return issues, nil
}

// blobHash is git's object id of the work-tree file rel's content ("blob
// <size>\0" + bytes), SHA-1 or SHA-256 by the length of the id it is
// compared with. The file is opened beneath the work tree (never through a
// link) and must be a regular file.
func (s *Store) blobHash(rel string, idLen int) (string, bool, error) {
	f, err := s.openWork(rel)
	if err != nil {
		return "", false, err
	}
	defer f.Close()
	return blobHashOf(f, idLen)
}

// blobHashOf is blobHash of an open regular file.
func blobHashOf(f *os.File, idLen int) (string, bool, error) {
	fi, err := f.Stat()
	if err != nil {
		return "", false, err
	}
	var h hash.Hash = sha1.New()
	if idLen == 64 {
		h = sha256.New()
	}
	fmt.Fprintf(h, "blob %d\x00", fi.Size())
	if _, err := io.Copy(h, f); err != nil {
		return "", false, err
	}
	return hex.EncodeToString(h.Sum(nil)), fi.Mode()&0o100 != 0, nil
}

// The questions readers ask of the store, in place of a runner of their own:
// each runs git against objects and refs only (never the index), so it is
// safe beside a seal or a restore.

// Resolve is the full SHA git resolves rev to (a ref, a commit, `sha^{tree}`),
// or false.
func (s *Store) Resolve(ctx context.Context, rev string) (string, bool) { return s.resolve(ctx, rev) }

// HasCommit reports whether the store holds sha as a commit.
func (s *Store) HasCommit(ctx context.Context, sha string) bool {
	_, err := s.git.Run(ctx, nil, "cat-file", "-e", "--end-of-options", sha+"^{commit}")
	return err == nil
}

// runtimeSubject is the first line of a lifecycle commit the runtime made:
// {status}:{codonId} [run:{runId}] {codonName}.
var runtimeSubject = regexp.MustCompile(`^([a-z-]+):(\S+) \[run:([^\]\s]+)\] ?(.*)$`)

// Commits lists the commits of the store whose SHA begins with prefix and
// that a branch or one of cairn's refs reaches (a commit nothing references,
// a seal abandoned half-way, is no checkpoint), as records without an id: a
// lifecycle subject gives kind, codon and run, any other subject the label.
func (s *Store) Commits(ctx context.Context, prefix string) []ckpt.Record {
	g := s.git
	out, err := g.Run(ctx, nil, "rev-parse", "--disambiguate="+prefix)
	objs := strings.Fields(string(out))
	if err != nil || len(objs) == 0 {
		return nil
	}
	out, err = g.Run(ctx, strings.NewReader(strings.Join(objs, "\n")+"\n"), "cat-file", "--batch-check=%(objectname) %(objecttype)")
	if err != nil {
		return nil
	}
	var commits []string
	for _, l := range strings.Split(string(out), "\n") {
		if sha, typ, _ := strings.Cut(l, " "); typ == "commit" {
			ref, err := g.Run(ctx, nil, "for-each-ref", "--count=1", "--format=%(refname)", "--contains", sha, "refs/heads", "refs/cairn")
			if err == nil && len(strings.TrimSpace(string(ref))) > 0 {
				commits = append(commits, sha)
			}
		}
	}
	if len(commits) == 0 {
		return nil
	}
	out, err = g.Run(ctx, nil, append([]string{"log", "--no-walk=unsorted", "--format=%H%x1f%cI%x1f%s%x1e"}, commits...)...)
	if err != nil {
		return nil
	}
	var recs []ckpt.Record
	for _, c := range strings.Split(string(out), "\x1e") {
		f := strings.SplitN(strings.TrimLeft(c, "\n"), "\x1f", 3)
		if len(f) != 3 {
			continue
		}
		r := ckpt.Record{SHA: f[0], Label: f[2], State: ckpt.StateOK}
		r.Time, _ = time.Parse(time.RFC3339, f[1])
		if m := runtimeSubject.FindStringSubmatch(f[2]); m != nil && ckpt.Kind(m[1]).IsLifecycle() {
			r.Kind, r.CodonID, r.RunID, r.CodonName, r.Label = ckpt.Kind(m[1]), m[2], m[3], m[4], ""
		}
		recs = append(recs, r)
	}
	return recs
}

// Describe completes a record of a commit the ledger lacks with what git
// knows: its parent (git's, or the Cairn-Parent trailer of a root commit)
// and what it changed, for results and `cairn show`.
func (s *Store) Describe(ctx context.Context, rec ckpt.Record) (ckpt.Record, error) {
	out, err := s.git.Run(ctx, nil, "show", "-s", "--format=%P%x00%B", "--end-of-options", rec.SHA)
	if err != nil {
		return rec, fmt.Errorf("read commit %s: %w", short7(rec.SHA), err)
	}
	parents, body, _ := strings.Cut(string(out), "\x00")
	if ps := strings.Fields(parents); len(ps) > 0 {
		rec.Parent = ps[0]
	} else if r, _ := recordFromMessage(body); r.Parent != "" {
		rec.Parent = r.Parent
	}
	if rec.Parent != "" && s.HasCommit(ctx, rec.Parent) {
		rec.Added, rec.Changed, rec.Removed, err = s.diffCounts(ctx, rec.Parent, rec.SHA)
		if err != nil {
			return rec, fmt.Errorf("diff commit %s: %w", short7(rec.SHA), err)
		}
		return rec, nil
	}
	out, err = s.git.Run(ctx, nil, "diff-tree", "-r", "--root", "--no-commit-id", "--no-renames", "--name-status", "-z", "--end-of-options", rec.SHA)
	if err != nil {
		return rec, fmt.Errorf("diff commit %s: %w", short7(rec.SHA), err)
	}
	f := strings.Split(string(out), "\x00")
	for i := 0; i+1 < len(f); i += 2 {
		switch f[i] {
		case "A":
			rec.Added++
		case "D":
			rec.Removed++
		default:
			rec.Changed++
		}
	}
	return rec, nil
}

// Abandoned lists the commits a restore from position to target leaves
// behind, lowercase: those position descends from and target does not,
// following git's parents and, for checkpoints sealed as root commits, the
// ledger's. None when they are the same or there is no position.
func (s *Store) Abandoned(ctx context.Context, target, position string) ([]string, error) {
	if position == "" || position == target {
		return nil, nil
	}
	s.mu.Lock()
	recs := append([]ckpt.Record(nil), s.records...)
	s.mu.Unlock()
	out, err := s.git.Run(ctx, nil, "rev-list", "--parents", "--branches", "--glob=refs/cairn/*", "--end-of-options", target, position)
	if err != nil {
		return nil, err
	}
	parents := map[string][]string{}
	for _, l := range strings.Split(strings.ToLower(string(out)), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			parents[f[0]] = f[1:]
		}
	}
	for _, r := range recs {
		sha, p := strings.ToLower(r.SHA), strings.ToLower(r.Parent)
		if sha == "" || p == "" || slices.Contains(parents[sha], p) {
			continue
		}
		parents[sha] = append(parents[sha], p)
	}
	ancestors := func(from string) map[string]bool {
		seen := map[string]bool{}
		for todo := []string{from}; len(todo) > 0; {
			c := todo[len(todo)-1]
			todo = todo[:len(todo)-1]
			if seen[c] {
				continue
			}
			seen[c] = true
			todo = append(todo, parents[c]...)
		}
		return seen
	}
	kept := ancestors(strings.ToLower(target))
	var left []string
	for c := range ancestors(strings.ToLower(position)) {
		if !kept[c] {
			left = append(left, c)
		}
	}
	sort.Strings(left)
	return left, nil
}
