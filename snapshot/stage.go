package snapshot

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/cairn-dev/cairn/platform"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// Stage brings cairn's index up to date for patterns without sealing, so the
// next seal under them (a lifecycle marker) has only the last changes to stage.
func (s *Store) Stage(ctx context.Context, patterns []string, changed []string) error {
	sel, err := NewSelector(patterns)
	if err != nil {
		return err
	}
	return s.withLock(ctx, func() error {
		if changed != nil && s.inproc.indexDoubt() != "" {
			changed = nil // the index may stand for an older checkpoint (inprocState.indexDoubt)
		}
		if _, ok := s.inproc.ready(ctx, sel); ok && changed != nil {
			return nil // the in-process engine seals the changes from its base at the marker
		}
		_, err := s.stage(ctx, s.git, sel, changed)
		return err
	})
}

// staged is what staging found beside the index it wrote.
type staged struct {
	issues  []ckpt.PathIssue // could not be read as on disk: the checkpoint is partial
	skipped []ckpt.PathIssue // left out by policy (size)
}

// stage brings cairn's index to the disk for the selected paths: all of them
// (changed == nil) or just the ones named.
func (s *Store) stage(ctx context.Context, g *Git, sel *Selector, changed []string) (staged, error) {
	meta := indexMeta{Selection: sel.Key(), MaxSize: s.opts.MaxFileSize}
	// The in-process engine's entries go into the index before git reads it.
	if err := s.inproc.syncIndex(ctx); err != nil {
		return staged{}, err
	}
	var prev indexMeta
	metaPath := g.Index + ".json" // cairn/index.json beside cairn/index
	if b, err := readNoFollow(metaPath, maxSmallFile); err == nil {
		_ = json.Unmarshal(b, &prev)
	}
	s.dropDeadIndexLock(ctx)
	if _, err := os.Stat(g.Index); err != nil || prev != meta {
		changed = nil // the index was built under another selection, or is gone
	}
	for _, c := range changed {
		if path.Base(c) == ".gitignore" {
			changed = nil // ignore rules moved: any path may have come in or gone out
			break
		}
	}
	var plan *stagePlan
	var err error
	// Entries under folders left out leave the index before any git call
	// that stats the work tree could reach them.
	if err := s.dropLeftOut(ctx, g, s.left()); err != nil {
		return staged{}, err
	}
	if changed == nil {
		plan, err = s.planFull(ctx, g, sel, prev != meta)
	} else {
		plan, err = s.planPaths(ctx, gitPlan{s, g}, sel, changed)
	}
	if err != nil {
		return staged{}, err
	}
	if err := s.applyPlan(ctx, g, plan); err != nil {
		return staged{}, err
	}
	if prev != meta {
		b, _ := json.Marshal(meta)
		if err := platform.WriteFileAtomic(metaPath, b, 0o644); err != nil {
			return staged{}, err
		}
	}
	sortIssues(plan.issues)
	sortIssues(plan.skipped)
	return staged{issues: dedupeIssues(plan.issues), skipped: dedupeIssues(plan.skipped)}, nil
}

func sortIssues(v []ckpt.PathIssue) {
	sort.Slice(v, func(i, j int) bool { return v[i].Path < v[j].Path })
}

// dedupeIssues names each path once, in first-seen order: several steps
// (staging, a retry, the racy list) may each report the same path. Distinct
// reasons are kept, joined.
func dedupeIssues(v []ckpt.PathIssue) []ckpt.PathIssue {
	at := make(map[string]int, len(v))
	out := v[:0]
	for _, is := range v {
		i, seen := at[is.Path]
		if !seen {
			at[is.Path] = len(out)
			out = append(out, is)
			continue
		}
		if !slices.Contains(strings.Split(out[i].Reason, "; "), is.Reason) {
			out[i].Reason += "; " + is.Reason
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// stagePlan is the work for one staging: paths to add or refresh, and paths
// to drop from the index.
type stagePlan struct {
	add     []string
	stat    map[string]fileID // what each added path looked like before git read it
	remove  []string          // present on disk but not to be held (symlink, ignored, unselected…)
	gone    []string          // missing on disk
	dirs    []string          // tracked files that are folders now
	issues  []ckpt.PathIssue
	skipped []ckpt.PathIssue
	// ignored, when set, answers (once) which planned paths git's ignore
	// rules cover; they are dropped after the first staging pass.
	ignored func() (map[string]bool, error)
}

type fileID struct {
	size  int64
	mtime int64
	ino   uint64
	mode  fs.FileMode
}

func idOf(fi fs.FileInfo) fileID {
	return fileID{size: fi.Size(), mtime: fi.ModTime().UnixNano(), mode: fi.Mode(), ino: inode(fi)}
}

// consider classifies one present-or-missing path that passed ignore rules.
func (s *Store) consider(p *stagePlan, sel *Selector, rel string, links *linkCache) {
	if Excluded(rel) || !sel.Match(rel) {
		p.remove = append(p.remove, rel)
		return
	}
	if links.underLink(s, rel) {
		p.remove = append(p.remove, rel)
		return
	}
	fi, err := s.lstatWork(rel)
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
		p.gone = append(p.gone, rel)
	case errors.Is(err, platform.ErrThroughLink):
		// A folder on its way was swapped for a link: its entry stays as
		// it was, and the path is named.
		p.issues = append(p.issues, ckpt.PathIssue{Path: rel, Reason: throughLinkReason})
	case err != nil:
		p.issues = append(p.issues, ckpt.PathIssue{Path: rel, Reason: err.Error()})
	case fi.Mode().IsRegular():
		if fi.Size() > s.opts.MaxFileSize {
			p.remove = append(p.remove, rel)
			p.skipped = append(p.skipped, ckpt.PathIssue{Path: rel, Reason: ckpt.TooLarge(s.opts.MaxFileSize, fi.Size())})
			return
		}
		p.add = append(p.add, rel)
		p.stat[rel] = idOf(fi)
	case fi.Mode()&fs.ModeSymlink != 0:
		p.remove = append(p.remove, rel) // symlinks are not checkpointed (README.md)
	case fi.IsDir():
		// A folder where a file was: the entry leaves; its files are walked
		// by planFull (git lists none of a repository made in it) or were
		// named beside it.
		p.remove = append(p.remove, rel)
		p.dirs = append(p.dirs, rel)
	default:
		p.remove = append(p.remove, rel)
		p.issues = append(p.issues, ckpt.PathIssue{Path: rel, Reason: "not a regular file (" + fi.Mode().Type().String() + ")"})
	}
}

// linkCache remembers which folders of the work tree are symlinks, so paths
// under a symlinked parent are left out (and never followed: every path is
// resolved beneath the work tree).
type linkCache struct{ m map[string]bool }

func (c *linkCache) underLink(s *Store, rel string) bool {
	dir := path.Dir(rel)
	if dir == "." {
		return false
	}
	if v, ok := c.m[dir]; ok {
		return v
	}
	v := c.underLink(s, dir)
	if !v {
		fi, err := s.lstatWork(dir)
		v = err == nil && fi.Mode()&fs.ModeSymlink != 0
	}
	if c.m == nil {
		c.m = map[string]bool{}
	}
	c.m[dir] = v
	return v
}

// planFull finds, in one pass of git's stat cache and untracked scan, every
// selected path that differs from the index. With all set (selection changed
// or first seal) every tracked path is re-checked against the selection too.
func (s *Store) planFull(ctx context.Context, g *Git, sel *Selector, all bool) (*stagePlan, error) {
	args := []string{"ls-files", "-z", "-t", "-o", "-m", "-d", "--exclude-standard"}
	args = append(args, s.left().excludeArgs()...)
	if all {
		args = append(args, "-c")
	}
	var ignoredOut, trackedOut []byte
	var ignoredErr, trackedErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // tracked files that an ignore rule now covers leave the checkpoint
		defer wg.Done()
		ignoredOut, ignoredErr = g.Run(ctx, nil, "ls-files", "-z", "-c", "-i", "--exclude-standard")
	}()
	if !all {
		// Every tracked path, for those under a folder that is a link now:
		// ls-files reads them through the link (-d, -m), where git's own
		// `add -A` finds them gone. With all, -c lists them already.
		wg.Add(1)
		go func() {
			defer wg.Done()
			trackedOut, trackedErr = g.Run(ctx, nil, "ls-files", "-z", "-c")
		}()
	}
	// -m hashes racily clean files: a bus error is a file changed meanwhile.
	out, warn, err := g.runMapped(ctx, nil, args...)
	wg.Wait()
	if err != nil {
		return nil, err
	}
	if ignoredErr != nil {
		return nil, ignoredErr
	}
	if trackedErr != nil {
		return nil, trackedErr
	}
	p := &stagePlan{stat: map[string]fileID{}, issues: unreadableDirs(warn)}
	links := &linkCache{}
	seen := map[string]bool{}
	var nested []string
	for _, e := range splitNul(out) {
		if len(e) < 3 || e[1] != ' ' {
			continue
		}
		tag, rel := e[0], e[2:]
		if seen[rel] { // -t prints a tracked path once per matching category
			continue
		}
		seen[rel] = true
		switch tag {
		case '?':
			if strings.HasSuffix(rel, "/") { // a repository cloned inside the work tree
				nested = append(nested, strings.TrimSuffix(rel, "/"))
				continue
			}
			s.consider(p, sel, rel, links)
		case 'H', 'C', 'R', 'S':
			s.consider(p, sel, rel, links)
		}
	}
	p.remove = append(p.remove, splitNul(ignoredOut)...)
	for _, rel := range splitNul(trackedOut) {
		if !seen[rel] && links.underLink(s, rel) {
			seen[rel] = true
			p.remove = append(p.remove, rel) // never read through the link
		}
	}
	// A tracked file that is a folder now is listed as changed, and what is
	// in it as untracked, except when the folder is a repository: git then
	// lists nothing under it, so it is walked like one cloned in.
	nested = append(nested, p.dirs...)
	if len(nested) > 0 {
		var files []string
		for _, n := range nested {
			for _, f := range s.walkFiles(n, p) {
				if !seen[f] {
					seen[f] = true
					files = append(files, f)
				}
			}
		}
		if err := s.considerUnignored(ctx, g, p, sel, files, links); err != nil {
			return nil, err
		}
	}
	// A path both ignored and otherwise classified is dropped.
	p.add = minus(p.add, p.remove)
	return p, nil
}

// planSource answers what planPaths asks beside the disk: which paths the
// last staging holds at or under some paths, and which files ignore rules
// cover. The git engine asks git about its index; the in-process engine
// reads its base tree and a long-running check-ignore.
type planSource interface {
	trackedUnder(ctx context.Context, paths []string) ([]string, error)
	considerUnignored(ctx context.Context, p *stagePlan, sel *Selector, files []string, links *linkCache) error
}

// gitPlan is the git engine's planSource: cairn's index, through git.
type gitPlan struct {
	s *Store
	g *Git
}

func (gp gitPlan) trackedUnder(ctx context.Context, paths []string) ([]string, error) {
	return gp.s.trackedUnder(ctx, gp.g, paths)
}

func (gp gitPlan) considerUnignored(ctx context.Context, p *stagePlan, sel *Selector, files []string, links *linkCache) error {
	return gp.s.considerUnignored(ctx, gp.g, p, sel, files, links)
}

// planPaths classifies exactly the named paths (and what lies under any of them).
func (s *Store) planPaths(ctx context.Context, src planSource, sel *Selector, changed []string) (*stagePlan, error) {
	p := &stagePlan{stat: map[string]fileID{}}
	links := &linkCache{}
	uniq := map[string]bool{}
	var files, missing []string
	for _, raw := range changed {
		rel, err := cleanRel(raw)
		if err != nil {
			p.issues = append(p.issues, ckpt.PathIssue{Path: raw, Reason: err.Error()})
			continue
		}
		if uniq[rel] || Excluded(rel) || s.left().covers(rel) {
			continue
		}
		uniq[rel] = true
		if links.underLink(s, rel) {
			missing = append(missing, rel) // whatever was tracked under it leaves
			continue
		}
		fi, err := s.lstatWork(rel)
		switch {
		case err != nil && (errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)):
			missing = append(missing, rel)
		case err == nil && fi.IsDir():
			missing = append(missing, rel) // tracked paths under it that are gone
			files = append(files, s.walkFiles(rel, p)...)
		case err == nil && !fi.Mode().IsRegular():
			// A folder that became a symlink (or a FIFO…): its entries leave. A
			// folder that became a file needs nothing: --replace drops them.
			missing = append(missing, rel)
			files = append(files, rel)
		default:
			files = append(files, rel)
		}
	}
	// What the last checkpoint holds under a left-out folder leaves this one.
	if lo := s.left(); lo.any() {
		gone, err := src.trackedUnder(ctx, lo.Dirs)
		if err != nil {
			return nil, err
		}
		p.remove = append(p.remove, gone...)
	}
	// Tracked entries at or under a missing path (a removed file or folder).
	if len(missing) > 0 {
		tracked, err := src.trackedUnder(ctx, missing)
		if err != nil {
			return nil, err
		}
		inFiles := make(map[string]bool, len(files))
		for _, f := range files {
			inFiles[f] = true
		}
		for _, t := range tracked {
			if !inFiles[t] {
				inFiles[t] = true
				files = append(files, t)
			}
		}
	}
	if err := src.considerUnignored(ctx, p, sel, files, links); err != nil {
		return nil, err
	}
	return p, nil
}

// parallelIgnoreMax is the most paths whose ignore check runs beside their
// staging (and is undone for the few ignored ones); past it, files are
// checked first so ignored trees are never hashed.
const parallelIgnoreMax = 256

// considerUnignored asks git which of files its ignore rules cover (those
// leave the index), and classifies the rest. For a handful of paths (an
// incremental seal) the question runs while they are staged: check-ignore
// does not read the index, and an ignored path staged meanwhile is dropped.
func (s *Store) considerUnignored(ctx context.Context, g *Git, p *stagePlan, sel *Selector, files []string, links *linkCache) error {
	// check-ignore reads stdin as pathspecs (and refuses literal magic), so
	// each path goes as "./path": nothing in a name can read as magic. Paths
	// under a symlinked folder leave the index whatever the rules say, and
	// git would refuse them.
	var ask []string
	for _, f := range files {
		if !links.underLink(s, f) {
			ask = append(ask, "./"+f)
		}
	}
	query := func() (map[string]bool, error) {
		ignored := map[string]bool{}
		if len(ask) == 0 {
			return ignored, nil
		}
		out, err := g.Run(ctx, nulJoin(ask), "check-ignore", "--no-index", "-z", "--stdin")
		var ge *GitError
		if err != nil && !(errors.As(err, &ge) && ge.ExitCode == 1) { // 1: nothing ignored
			return nil, err
		}
		for _, f := range splitNul(out) {
			ignored[strings.TrimPrefix(f, "./")] = true
		}
		return ignored, nil
	}
	return s.considerAsked(p, sel, files, links, query)
}

// considerAsked classifies files while query (git's ignore rules) answers:
// for up to parallelIgnoreMax paths the answer is left in p.ignored, taken
// once the files are staged; past it, the answer comes first and ignored
// paths leave the index unread.
func (s *Store) considerAsked(p *stagePlan, sel *Selector, files []string, links *linkCache, query func() (map[string]bool, error)) error {
	if len(files) <= parallelIgnoreMax {
		type answer struct {
			ignored map[string]bool
			err     error
		}
		c := make(chan answer, 1)
		go func() {
			ig, err := query()
			c <- answer{ig, err}
		}()
		p.ignored = func() (map[string]bool, error) {
			a := <-c
			return a.ignored, a.err
		}
		for _, f := range files {
			s.consider(p, sel, f, links)
		}
		return nil
	}
	ignored, err := query()
	if err != nil {
		return err
	}
	for _, f := range files {
		if ignored[f] {
			p.remove = append(p.remove, f)
			continue
		}
		s.consider(p, sel, f, links)
	}
	return nil
}

// trackedUnder lists index entries at or under the given paths, in batches
// bounded by count and argv bytes.
func (s *Store) trackedUnder(ctx context.Context, g *Git, paths []string) ([]string, error) {
	var all []string
	for _, batch := range batches(paths, s.opts.BatchSize, 64<<10) {
		args := []string{"ls-files", "-z", "--"}
		for _, b := range batch {
			args = append(args, ":(literal)"+b)
		}
		out, err := g.Run(ctx, nil, args...)
		if err != nil {
			return nil, err
		}
		all = append(all, splitNul(out)...)
	}
	return all, nil
}

// batches splits paths into groups of at most n paths and about max argv bytes.
func batches(paths []string, n, maxBytes int) [][]string {
	var out [][]string
	var cur []string
	size := 0
	for _, p := range paths {
		if len(cur) > 0 && (len(cur) >= n || size+len(p)+12 > maxBytes) {
			out = append(out, cur)
			cur, size = nil, 0
		}
		cur = append(cur, p)
		size += len(p) + 12
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// walkFiles lists the files under a work-tree folder, leaving out any `.git`
// and never following symlinks. Unreadable folders become issues.
func (s *Store) walkFiles(rel string, p *stagePlan) []string {
	files, issues := s.walkWorkTree(rel)
	p.issues = append(p.issues, issues...)
	return files
}

func minus(a, b []string) []string {
	if len(b) == 0 {
		return a
	}
	drop := make(map[string]bool, len(b))
	for _, x := range b {
		drop[x] = true
	}
	out := a[:0]
	for _, x := range a {
		if !drop[x] {
			out = append(out, x)
		}
	}
	return out
}

// applyPlan writes the plan into cairn's index. Paths go through stdin, never as
// pathspecs: no magic, no argv limit. A file that cannot be read (or changes
// while git reads it) is retried, then named, and never aborts the checkpoint.
func (s *Store) applyPlan(ctx context.Context, g *Git, p *stagePlan) error {
	if len(p.remove) > 0 {
		sort.Strings(p.remove)
		if _, _, err := g.runMapped(ctx, nulBytes(p.remove), "update-index", "-z", "--force-remove", "--stdin"); err != nil {
			return err
		}
	}
	// Sorted in index order, git appends instead of inserting.
	todo := append(append([]string(nil), p.add...), p.gone...)
	sort.Strings(todo)
	for attempt := 0; len(todo) > 0; attempt++ {
		if attempt > 0 {
			// git trusts an entry whose size and whole-second times match: a
			// file rewritten at the same size in the same second as git read
			// it would keep its stale blob. Dropping the entries forces a re-read.
			if _, _, err := g.runMapped(ctx, nulBytes(todo), "update-index", "-z", "--force-remove", "--stdin"); err != nil {
				return err
			}
		}
		var told func(Progress)
		if attempt == 0 { // a retry re-reads few files
			told = progressOf(ctx)
		}
		bad, err := s.updateIndexTold(ctx, g, todo, told)
		if p.ignored != nil {
			ig, ierr := p.ignored()
			p.ignored = nil
			if err == nil {
				err = ierr
			}
			if err == nil && len(ig) > 0 {
				err = s.dropIgnored(ctx, g, p, ig)
			}
		}
		if err != nil {
			return err
		}
		for _, b := range bad {
			p.issues = append(p.issues, ckpt.PathIssue{Path: b.path, Reason: b.reason})
		}
		// Anything that changed while git read it is read again.
		todo = s.changedSinceRead(p, p.add, attempt == 2)
		p.add = todo
	}
	return nil
}

// dropIgnored takes paths an ignore rule covers back out of the index and the plan.
func (s *Store) dropIgnored(ctx context.Context, g *Git, p *stagePlan, ig map[string]bool) error {
	var drop []string
	for f := range ig {
		drop = append(drop, f)
	}
	sort.Strings(drop)
	if _, _, err := g.runMapped(ctx, nulBytes(drop), "update-index", "-z", "--force-remove", "--stdin"); err != nil {
		return err
	}
	keep := p.add[:0]
	for _, f := range p.add {
		if !ig[f] {
			keep = append(keep, f)
		}
	}
	p.add = keep
	var issues []ckpt.PathIssue
	for _, is := range p.issues {
		if !ig[is.Path] { // an ignored FIFO is not the checkpoint's business
			issues = append(issues, is)
		}
	}
	p.issues = issues
	var skipped []ckpt.PathIssue
	for _, is := range p.skipped {
		if !ig[is.Path] {
			skipped = append(skipped, is)
		}
	}
	p.skipped = skipped
	return nil
}

type badPath struct{ path, reason string }

// progressBatch is how many paths one update-index reads when a seal tells
// its progress: a report after each batch.
const progressBatch = 5000

// updateIndexTold is updateIndex telling progress (when not nil) after
// every progressBatch paths.
func (s *Store) updateIndexTold(ctx context.Context, g *Git, paths []string, progress func(Progress)) ([]badPath, error) {
	if progress == nil || len(paths) <= progressBatch {
		return s.updateIndex(ctx, g, paths)
	}
	var bad []badPath
	for i := 0; i < len(paths); i += progressBatch {
		b, err := s.updateIndex(ctx, g, paths[i:min(i+progressBatch, len(paths))])
		bad = append(bad, b...)
		if err != nil {
			return bad, err
		}
		progress(Progress{Done: min(i+progressBatch, len(paths)), Total: len(paths)})
	}
	return bad, nil
}

// updateIndex adds or refreshes paths (removing the missing ones). When git
// refuses the batch because of one file, the batch is split until the
// unreadable files are isolated; the others are staged.
func (s *Store) updateIndex(ctx context.Context, g *Git, paths []string) ([]badPath, error) {
	issues, err := isolateUnreadable(ctx, g, paths, "changed while the checkpoint was sealed (git: bus error)",
		"update-index", "-z", "--add", "--remove", "--replace", "--stdin")
	out := make([]badPath, 0, len(issues))
	for _, is := range issues {
		out = append(out, badPath{is.Path, is.Reason})
	}
	return out, err
}

// isolateUnreadable runs an update-index that reads paths from stdin; when
// git refuses the batch because of one file, the batch is halved until each
// file it cannot read is named (busErr is the reason for a file that changed
// under git's map), and the rest goes in.
func isolateUnreadable(ctx context.Context, g *Git, paths []string, busErr string, args ...string) ([]ckpt.PathIssue, error) {
	if len(paths) == 0 {
		return nil, nil
	}
	_, _, err := g.runMapped(ctx, nulBytes(paths), args...)
	if err == nil {
		return nil, nil
	}
	var ge *GitError
	if !errors.As(err, &ge) || ctx.Err() != nil || errors.As(err, new(*fifoBlockedError)) {
		return nil, err // not one file's: a named pipe stops every batch
	}
	if len(paths) == 1 {
		why := firstLine(ge.Stderr)
		if sig, ok := signalOf(err); ok && sig == syscall.SIGBUS {
			why = busErr
		}
		return []ckpt.PathIssue{{Path: paths[0], Reason: why}}, nil
	}
	half := len(paths) / 2
	a, err := isolateUnreadable(ctx, g, paths[:half], busErr, args...)
	if err != nil {
		return nil, err
	}
	b, err := isolateUnreadable(ctx, g, paths[half:], busErr, args...)
	if err != nil {
		return nil, err
	}
	return append(a, b...), nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimPrefix(s, "error: ")
}

// unreadableDirs turns git's "could not open directory" warnings into issues:
// git skips such a folder and still succeeds, so the checkpoint is partial.
func unreadableDirs(stderr string) []ckpt.PathIssue {
	var out []ckpt.PathIssue
	for _, l := range strings.Split(stderr, "\n") {
		const pre = "warning: could not open directory '"
		if !strings.HasPrefix(l, pre) {
			continue
		}
		rest := l[len(pre):]
		i := strings.LastIndex(rest, "': ")
		if i < 0 {
			continue
		}
		out = append(out, ckpt.PathIssue{Path: strings.TrimSuffix(rest[:i], "/"), Reason: "folder not readable: " + rest[i+3:]})
	}
	return out
}

// changedSinceRead returns the paths whose file changed (lstat differs from
// p.stat) since it was read, to be read again, noting what they look like
// now; at the last attempt they are named as issues instead.
func (s *Store) changedSinceRead(p *stagePlan, paths []string, last bool) []string {
	var again []string
	for _, rel := range paths {
		was, ok := p.stat[rel]
		if !ok {
			continue
		}
		fi, err := s.lstatWork(rel)
		if err == nil && idOf(fi) == was {
			continue
		}
		if last {
			p.issues = append(p.issues, ckpt.PathIssue{Path: rel, Reason: "changed while the checkpoint was sealed"})
			continue
		}
		if err == nil && fi.Mode().IsRegular() {
			p.stat[rel] = idOf(fi)
		} else {
			delete(p.stat, rel)
		}
		again = append(again, rel)
	}
	return again
}

// dropDeadIndexLock removes cairn/index.lock, which under the store lock
// can only be a dead writer's: no cairn runs beside the holder of the
// store lock, nor any git one started (each git holds the store lock as
// long as it lives: proc.go). Left, it would make every git write of the
// index fail.
func (s *Store) dropDeadIndexLock(ctx context.Context) {
	if err := os.Remove(s.git.Index + ".lock"); err == nil {
		zerologCtx(ctx).Warn().Str("store", s.gitDir).Msg("removed a stale index lock left by an interrupted seal")
	}
}
