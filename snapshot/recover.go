package snapshot

import (
	"bufio"
	"bytes"
	"context"
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
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/zlib"

	"github.com/cairn-dev/cairn/platform"
)

// Recovery: what the open-time sweep and `cairn doctor --fsck --repair` do
// with files of a store that git cannot use as they are. Nothing that could
// hold a checkpoint's data is deleted: a pack without its index gets one, and
// what cannot be used is moved into <store>/cairn/quarantine/. Only files
// whose exact names cairn (or the git it runs) gives its temporary files are
// removed, and only old ones; derived files (cairn's index, the stat cache)
// are rebuilt.

// quarantineSubdir, under cairn/, holds what recovery moved aside.
const quarantineSubdir = "quarantine"

// Temporary files git (odb_mkstemp: six of [A-Za-z0-9]) and gitobj
// (createTemp: base 36) create in objects/ and objects/pack/.
var (
	tmpObjectName = regexp.MustCompile(`^tmp_obj_[A-Za-z0-9]{1,16}$`)
	tmpPackName   = regexp.MustCompile(`^tmp_(pack|idx|rev|mtimes|bitmap)_[A-Za-z0-9]{1,16}$`)
	// git repack's own temporary packs (.tmp-<pid>-pack-<hash>.<ext>),
	// left when a repack was killed before renaming them.
	repackTmpName = regexp.MustCompile(`^\.tmp-[0-9]+-pack(-[0-9a-f]{40}|-[0-9a-f]{64})?\.(pack|idx|rev|mtimes|bitmap|promisor)$`)
	packName      = regexp.MustCompile(`^pack-([0-9a-f]{40}|[0-9a-f]{64})\.pack$`)
	// cairnTmpName is what notePosition, the stat cache's writer and the
	// restore's record name their temporary files in cairn/: the file's
	// name, ".tmp-" and a pid.
	cairnTmpName = regexp.MustCompile(`^(position|statcache|restoring)\.tmp-[0-9]+$`)
	looseName    = regexp.MustCompile(`^([0-9a-f]{38}|[0-9a-f]{62})$`)
	hexDir       = regexp.MustCompile(`^[0-9a-f]{2}$`)
)

// quarantine moves path, inside gitDir, to the same relative path under
// cairn/quarantine/ (a number appended when that name is taken), and
// returns where it went.
func quarantine(gitDir, path string) (string, error) {
	rel, err := filepath.Rel(gitDir, path)
	if err != nil || strings.HasPrefix(rel, "..") {
		return "", fmt.Errorf("quarantine %s: not inside %s", path, gitDir)
	}
	dst := filepath.Join(gitDir, cairnSubdir, quarantineSubdir, rel)
	if err := platform.MkdirAllNoFollow(filepath.Dir(dst), 0o755); err != nil {
		return "", fmt.Errorf("quarantine %s: %w", path, err)
	}
	for i := 2; ; i++ {
		if _, err := os.Lstat(dst); errors.Is(err, fs.ErrNotExist) {
			break
		}
		dst = filepath.Join(gitDir, cairnSubdir, quarantineSubdir, rel) + "." + strconv.Itoa(i)
	}
	if err := os.Rename(path, dst); err != nil {
		return "", fmt.Errorf("quarantine %s: %w", path, err)
	}
	_ = platform.SyncDir(filepath.Dir(dst))
	_ = platform.SyncDir(filepath.Dir(path))
	return dst, nil
}

// orphanPacks lists the packs in objects/pack whose index is missing and
// that are at least minAge old (younger ones may have their index on the way).
func orphanPacks(gitDir string, minAge time.Duration) []string {
	dir := filepath.Join(gitDir, "objects", "pack")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	names := map[string]bool{}
	for _, e := range ents {
		names[e.Name()] = true
	}
	var out []string
	for _, e := range ents {
		n := e.Name()
		if !packName.MatchString(n) || names[strings.TrimSuffix(n, ".pack")+".idx"] {
			continue
		}
		p := filepath.Join(dir, n)
		if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() && time.Since(fi.ModTime()) >= minAge {
			out = append(out, p)
		}
	}
	return out
}

// indexPack gives a pack without its index one (git index-pack reads the
// pack alone); a pack git cannot index is quarantined. It says what it did.
func indexPack(ctx context.Context, g *Git, gitDir, pack string) (string, error) {
	_, err := g.Run(ctx, nil, "index-pack", pack)
	if err == nil {
		_ = platform.SyncDir(filepath.Dir(pack))
		return "indexed " + pack + " (git index-pack)", nil
	}
	if ctx.Err() != nil {
		return "", err
	}
	dst, qerr := quarantine(gitDir, pack)
	if qerr != nil {
		return "", errors.Join(err, qerr)
	}
	return fmt.Sprintf("moved %s, which git index-pack cannot index (%v), to %s", pack, errLine(err), dst), nil
}

// recoverOrphanPacks indexes, or else quarantines, every pack older than
// minAge left without its index (a writer killed between naming the two):
// git does not see such a pack, but its objects may be a checkpoint's only copy.
func (s *Store) recoverOrphanPacks(ctx context.Context, minAge time.Duration) {
	for _, p := range orphanPacks(s.gitDir, minAge) {
		did, err := indexPack(ctx, s.git, s.gitDir, p)
		if err != nil {
			zerologCtx(ctx).Warn().Err(err).Str("pack", p).Msg("a pack without its index could be neither indexed nor moved aside; it is left as it is")
			continue
		}
		zerologCtx(ctx).Warn().Str("store", s.gitDir).Msg("a pack without its index: " + did)
	}
}

func errLine(err error) string {
	msg := err.Error()
	var ge *GitError
	if errors.As(err, &ge) && strings.TrimSpace(ge.Stderr) != "" {
		msg = strings.TrimSpace(ge.Stderr)
	}
	l, _, _ := strings.Cut(msg, "\n")
	return l
}

// checkLoose reads a loose object whole: it must inflate, carry a sound
// header with its size, and hash to its name.
func checkLoose(path, id string) error {
	f, err := platform.OpenRegular(path)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := zlib.NewReader(bufio.NewReader(f))
	if err != nil {
		return fmt.Errorf("does not inflate: %w", err)
	}
	defer zr.Close()
	var h hash.Hash = sha1.New()
	if len(id) == 64 {
		h = sha256.New()
	}
	br := bufio.NewReader(io.TeeReader(zr, h))
	hdr, err := br.ReadString(0)
	if err != nil {
		return fmt.Errorf("no header: %w", err)
	}
	typ, size, ok := strings.Cut(strings.TrimSuffix(hdr, "\x00"), " ")
	n, serr := strconv.ParseInt(size, 10, 64)
	if !ok || serr != nil || n < 0 || (typ != "blob" && typ != "tree" && typ != "commit" && typ != "tag") {
		return fmt.Errorf("bad header %q", strings.TrimSuffix(hdr, "\x00"))
	}
	got, err := io.Copy(io.Discard, br)
	if err != nil {
		return fmt.Errorf("does not inflate: %w", err)
	}
	if got != n {
		return fmt.Errorf("holds %d bytes, its header says %d", got, n)
	}
	if sum := hex.EncodeToString(h.Sum(nil)); sum != id {
		return fmt.Errorf("hashes to %s", sum)
	}
	return nil
}

// Problem is one thing Checkup found in a store, with the repair Fix makes.
type Problem struct {
	Check   string // lock, pack, object, index, statcache or ref
	Message string
	// Repair says what Fix does; empty when there is nothing cairn can do
	// (or nothing yet: a lock a live process holds).
	Repair string
	// Hint says what to do about a problem without a repair.
	Hint string
	fix  func(ctx context.Context) (string, error)
}

// Fix makes the repair Repair names and says what it did.
func (p Problem) Fix(ctx context.Context) (string, error) {
	if p.fix == nil {
		return "", errors.New("no repair")
	}
	return p.fix(ctx)
}

// Checkup examines what seals rely on in one store, for `cairn doctor`.
// Repairs are made only through Problem.Fix, under the store's lock
// (Checkup.LockStore).
type Checkup struct {
	g      *Git
	gitDir string
	held   lockHolder // the store lock while LockStore holds it
}

// NewCheckup examines the store whose GIT_DIR is g.Dir, through g.
func NewCheckup(g *Git) *Checkup {
	cg := *g
	cg.Index = filepath.Join(g.Dir, cairnSubdir, "index")
	cg.WorkTree = ""
	c := &Checkup{g: &cg, gitDir: g.Dir}
	cg.held = &c.held
	return c
}

// LockStore takes the store's lock, as every seal does, waiting until ctx is
// done; repairs run under it. As in a seal, every git the checkup starts
// until unlock inherits the lock (proc.go): a repair's git (read-tree on
// cairn's index, update-ref) that outlived a killed cairn doctor keeps the
// store locked, so no seal takes its lock files for a dead writer's.
func (c *Checkup) LockStore(ctx context.Context) (unlock func(), err error) {
	lk, err := lockCtx(ctx, filepath.Join(c.gitDir, cairnSubdir, "lock"))
	if err != nil {
		return nil, err
	}
	c.held.set(lk.File())
	return func() {
		c.held.set(nil)
		lk.Unlock()
	}, nil
}

// staleLockAge is how old a lock file nobody holds must be to be removed.
const staleLockAge = time.Minute

// Locks reports lock files git or cairn left: cairn's index.lock,
// packed-refs.lock, HEAD.lock and refs/**/*.lock. One no process holds open (looked up
// in /proc where there is one) and older than a minute is removed by Fix.
func (c *Checkup) Locks() []Problem {
	paths := []string{filepath.Join(c.gitDir, cairnSubdir, "index.lock"), filepath.Join(c.gitDir, "packed-refs.lock"), filepath.Join(c.gitDir, "HEAD.lock")}
	_ = filepath.WalkDir(filepath.Join(c.gitDir, "refs"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".lock") {
			paths = append(paths, p)
		}
		return nil
	})
	var out []Problem
	for _, p := range paths {
		fi, err := os.Lstat(p)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		age := time.Since(fi.ModTime()).Round(time.Second)
		pid, looked := lockFileHolder(p)
		switch {
		case pid > 0:
			if age > staleLockAge {
				out = append(out, Problem{Check: "lock", Message: fmt.Sprintf("%s is %s old, held by pid %d", p, age, pid),
					Hint: fmt.Sprintf("if pid %d hangs, stop it; a lock a live process holds is not removed", pid)})
			}
		case age <= staleLockAge || !looked && age < 10*time.Minute:
			// Young: a git at work may hold it without an open file.
		default:
			how := "no holder found"
			if !looked {
				how = "holder unknown (no /proc to look in)"
			}
			path := p
			out = append(out, Problem{Check: "lock", Message: fmt.Sprintf("stale lock %s, %s old, %s", p, age, how),
				Repair: "remove " + p,
				fix: func(context.Context) (string, error) {
					if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
						return "", err
					}
					return "removed " + path, nil
				}})
		}
	}
	return out
}

// lockFileHolder finds a process holding path open, through /proc; looked is
// false where there is no /proc to look in.
func lockFileHolder(path string) (pid int, looked bool) {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return 0, false
	}
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		return 0, false
	}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real // /proc names files by their resolved path
	}
	for _, pe := range procs {
		n, err := strconv.Atoi(pe.Name())
		if err != nil {
			continue
		}
		fdDir := filepath.Join("/proc", pe.Name(), "fd")
		fds, err := os.ReadDir(fdDir)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if t, err := os.Readlink(filepath.Join(fdDir, fd.Name())); err == nil && t == path {
				return n, true
			}
		}
	}
	return 0, true
}

// Packs reports packs without their index (a minute old at least); Fix
// indexes each (git index-pack), or quarantines one git cannot index.
func (c *Checkup) Packs() []Problem {
	var out []Problem
	for _, p := range orphanPacks(c.gitDir, time.Minute) {
		pack := p
		out = append(out, Problem{Check: "pack", Message: pack + " has no index: git does not see its objects",
			Repair: "index it with git index-pack (if git cannot, move it to " + filepath.Join(c.gitDir, cairnSubdir, quarantineSubdir) + ")",
			fix:    func(ctx context.Context) (string, error) { return indexPack(ctx, c.g, c.gitDir, pack) }})
	}
	return out
}

// LooseObjects reads every loose object whole; Fix quarantines one that
// does not inflate or does not hash to its name.
func (c *Checkup) LooseObjects() []Problem {
	objects := filepath.Join(c.gitDir, "objects")
	dirs, _ := os.ReadDir(objects)
	var out []Problem
	for _, d := range dirs {
		if !d.IsDir() || !hexDir.MatchString(d.Name()) {
			continue
		}
		ents, _ := os.ReadDir(filepath.Join(objects, d.Name()))
		for _, e := range ents {
			if !looseName.MatchString(e.Name()) {
				continue
			}
			p := filepath.Join(objects, d.Name(), e.Name())
			err := checkLoose(p, d.Name()+e.Name())
			if err == nil || errors.Is(err, fs.ErrNotExist) {
				continue
			}
			out = append(out, Problem{Check: "object", Message: fmt.Sprintf("loose object %s: %v", p, err),
				Repair: "move it to " + filepath.Join(c.gitDir, cairnSubdir, quarantineSubdir) + " (git then reads a good copy from a pack, or reports it missing)",
				fix: func(context.Context) (string, error) {
					dst, err := quarantine(c.gitDir, p)
					if err != nil {
						return "", err
					}
					return "moved " + p + " to " + dst, nil
				}})
		}
	}
	return out
}

// positionTree is the tree cairn's index stands for: the position's, else main's.
func (c *Checkup) positionTree(ctx context.Context) (string, bool) {
	var revs []string
	if b, err := readNoFollow(filepath.Join(c.gitDir, cairnSubdir, "position"), maxSmallFile); err == nil {
		if p := strings.TrimSpace(string(b)); p != "" {
			revs = append(revs, p)
		}
	}
	for _, r := range append(revs, "refs/heads/main") {
		if out, err := c.g.Run(ctx, nil, "rev-parse", "--verify", "-q", r+"^{tree}"); err == nil {
			return strings.TrimSpace(string(out)), true
		}
	}
	return "", false
}

// Index checks cairn's private index: git reads it whole, and it is not
// empty when the position's tree is not. Fix rebuilds it from that tree
// (git read-tree); without one it removes it (the next seal rebuilds it
// from the work tree). It is derived data either way.
func (c *Checkup) Index(ctx context.Context) []Problem {
	idx := c.g.Index
	if fi, err := os.Lstat(idx); err != nil || !fi.Mode().IsRegular() {
		return nil // none yet: the next seal writes it
	}
	var why string
	var n countWriter
	if err := indexWhole(idx); err != nil {
		why = err.Error()
	} else if err := c.g.RunTo(ctx, &n, nil, "ls-files", "--stage", "-z"); err != nil {
		why = "git cannot read it: " + errLine(err)
	} else if n == 0 {
		if tree, ok := c.positionTree(ctx); ok {
			if out, err := c.g.Run(ctx, nil, "ls-tree", "--name-only", tree); err == nil && len(bytes.TrimSpace(out)) > 0 {
				why = "it is empty, the checkpoint it follows is not"
			}
		}
	}
	if why == "" {
		return nil
	}
	return []Problem{{Check: "index", Message: fmt.Sprintf("cairn's index %s: %s", idx, why),
		Repair: "rebuild it from the position's tree (git read-tree)",
		fix: func(ctx context.Context) (string, error) {
			if err := os.Remove(idx); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return "", err
			}
			tree, ok := c.positionTree(ctx)
			if !ok {
				return "removed " + idx + " (no position to rebuild it from; the next seal rebuilds it from the work tree)", nil
			}
			if _, err := c.g.Run(ctx, nil, "read-tree", tree); err != nil {
				return "", fmt.Errorf("removed %s, but read-tree %s failed (the next seal rebuilds it): %w", idx, tree, err)
			}
			return fmt.Sprintf("rebuilt %s from tree %s (git read-tree)", idx, tree), nil
		}}}
}

// indexWhole checks an index file's signature and its trailing checksum,
// which git itself verifies only in fsck: a torn index reads as entries
// with garbage names and null ids, which a seal would write into a tree.
func indexWhole(path string) error {
	b, err := readNoFollow(path, 4<<30)
	if err != nil {
		return err
	}
	if len(b) < 12+20 || string(b[:4]) != "DIRC" {
		return errors.New("not an index (cut short, or no signature)")
	}
	if v := uint32(b[4])<<24 | uint32(b[5])<<16 | uint32(b[6])<<8 | uint32(b[7]); v < 2 || v > 4 {
		return fmt.Errorf("index version %d", v)
	}
	s1 := sha1.Sum(b[:len(b)-20])
	if bytes.Equal(s1[:], b[len(b)-20:]) {
		return nil
	}
	if len(b) >= 12+32 {
		s2 := sha256.Sum256(b[:len(b)-32])
		if bytes.Equal(s2[:], b[len(b)-32:]) {
			return nil
		}
	}
	if bytes.Count(b[len(b)-20:], []byte{0}) == 20 { // index.skipHash: git reads it to see
		return nil
	}
	return errors.New("its checksum does not match (cut short or torn)")
}

type countWriter int

func (c *countWriter) Write(p []byte) (int, error) {
	*c += countWriter(bytes.Count(p, []byte{0}))
	return len(p), nil
}

// StatCache checks that the in-process engine's stat cache decodes whole;
// Fix removes a damaged one (derived: the next seal records a new one).
func (c *Checkup) StatCache() []Problem {
	path := filepath.Join(c.gitDir, cairnSubdir, "statcache")
	b, err := readNoFollow(path, maxStatCache)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err == nil {
		_, err = decodeStatCache(b)
	}
	if err == nil {
		return nil
	}
	return []Problem{{Check: "statcache", Message: fmt.Sprintf("stat cache %s: %v", path, err),
		Repair: "remove it (derived: the next seal records a new one)",
		fix: func(context.Context) (string, error) {
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return "", err
			}
			return "removed " + path, nil
		}}}
}

// BrokenRefsFile, under cairn/quarantine/, records refs a repair removed
// because their object is missing: "<sha> <ref> <time>", one a line.
const BrokenRefsFile = "broken-refs"

// Refs reports refs naming an object the store lacks: that checkpoint is
// lost unless the objects come back from a backup. Fix records the ref and
// its id in cairn/quarantine/broken-refs and deletes the ref (git would
// otherwise fail every repack and fsck on it); `git update-ref <ref> <sha>`
// puts it back once the objects are restored.
func (c *Checkup) Refs(ctx context.Context) []Problem {
	refs := map[string]string{} // ref → sha; loose refs win over packed ones
	if b, err := readNoFollow(filepath.Join(c.gitDir, "packed-refs"), 1<<30); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if sha, ref, ok := strings.Cut(l, " "); ok && !strings.HasPrefix(l, "#") && !strings.HasPrefix(l, "^") {
				refs[ref] = sha
			}
		}
	}
	_ = filepath.WalkDir(filepath.Join(c.gitDir, "refs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(p, ".lock") || !d.Type().IsRegular() {
			return nil
		}
		b, err := readNoFollow(p, 4096)
		if err != nil {
			return nil
		}
		v := strings.TrimSpace(string(b))
		if strings.HasPrefix(v, "ref: ") {
			return nil
		}
		rel, _ := filepath.Rel(c.gitDir, p)
		refs[filepath.ToSlash(rel)] = v
		return nil
	})
	if len(refs) == 0 {
		return nil
	}
	names := make([]string, 0, len(refs))
	var in bytes.Buffer
	for r, sha := range refs {
		names = append(names, r)
		in.WriteString(sha + "\n")
	}
	out, err := c.g.Run(ctx, &in, "cat-file", "--batch-check=%(objectname)")
	if err != nil {
		return []Problem{{Check: "ref", Message: "cannot look refs' objects up: " + errLine(err)}}
	}
	missing := map[string]bool{}
	for _, l := range strings.Split(string(out), "\n") {
		if sha, ok := strings.CutSuffix(l, " missing"); ok {
			missing[sha] = true
		}
	}
	// A pack without its index may hold them (one too young for Packs to
	// index): no ref is moved while there is one.
	pending := len(orphanPacks(c.gitDir, 0)) > 0
	var probs []Problem
	slices.Sort(names)
	for _, ref := range names {
		sha := refs[ref]
		if !missing[sha] {
			continue
		}
		ref := ref
		if pending {
			probs = append(probs, Problem{Check: "ref", Message: fmt.Sprintf("%s names %s, which the store lacks", ref, sha),
				Hint: "a pack without its index may hold it: run `cairn doctor --fsck --repair` again in a minute, once it is indexed"})
			continue
		}
		probs = append(probs, Problem{Check: "ref", Message: fmt.Sprintf("%s names %s, which the store lacks: that checkpoint is lost unless its objects come back from a backup", ref, sha),
			Repair: "record it in " + filepath.Join(c.gitDir, cairnSubdir, quarantineSubdir, BrokenRefsFile) + " and delete the ref (`git update-ref " + ref + " " + sha + "` restores it once the objects are back)",
			fix: func(ctx context.Context) (string, error) {
				if err := c.recordBrokenRef(ref, sha); err != nil {
					return "", err
				}
				if _, err := c.g.Run(ctx, nil, "update-ref", "--no-deref", "-d", ref, sha); err != nil {
					return "", err
				}
				return fmt.Sprintf("deleted %s (was %s; recorded in %s)", ref, sha, filepath.Join(c.gitDir, cairnSubdir, quarantineSubdir, BrokenRefsFile)), nil
			}})
	}
	return probs
}

func (c *Checkup) recordBrokenRef(ref, sha string) error {
	dir := filepath.Join(c.gitDir, cairnSubdir, quarantineSubdir)
	if err := platform.MkdirAllNoFollow(dir, 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(dir, BrokenRefsFile), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "%s %s %s\n", sha, ref, isoTime(time.Now()))
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}
