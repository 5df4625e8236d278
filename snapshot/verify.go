package snapshot

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// VerifyReport is what Verify found (restore/ckpt's, shared with the socket API).
type VerifyReport = ckpt.Verification

// Verify compares a checkpoint with what git alone would record for the
// work tree now, and looks up every object the checkpoint names (README.md,
// "cairn verify"). id is a ledger id (c7), a SHA or SHA prefix, or "" for the
// newest checkpoint with a commit; patterns nil means the store's defaults.
//
// The work tree is read by git into a temporary index in the store's cairn/
// folder, removed afterwards: none of cairn's caches (its index, the stat
// cache, the in-process engine's trees) is consulted, and nothing of the
// store's index, HEAD, refs or objects is written. The rules are the seal's
// (a full reconcile's, stage.go): the selection and Excluded, regular files
// up to the size limit, git's ignore rules, the files of a repository nested
// in the work tree. Verify only reads the store, so it takes no store lock.
// Differences and missing objects are the report's; an error means verify
// itself could not run.
func (s *Store) Verify(ctx context.Context, patterns []string, id string) (VerifyReport, error) {
	if patterns == nil {
		patterns = s.opts.Patterns
	}
	rep := VerifyReport{Patterns: append([]string{}, patterns...), Differences: []ckpt.VerifyDiff{}, Missing: []ckpt.MissingObject{}}
	sel, err := NewSelector(patterns)
	if err != nil {
		return rep, err
	}
	if err := s.checkLinks(); err != nil {
		return rep, err
	}
	rep.ID, rep.SHA, err = s.verifyTarget(ctx, id)
	if err != nil {
		return rep, err
	}
	held, tree, err := s.checkpointFiles(ctx, &rep)
	if err != nil || tree == "" {
		return rep, err // no commit: nothing to compare with
	}
	rep.Tree = tree
	defer s.useWorkTree()()
	disk, err := s.diskFiles(ctx, sel, &rep)
	if err != nil {
		return rep, err
	}
	rep.Files = len(held)
	rep.Differences = compareFiles(held, disk)
	return rep, nil
}

// treeFile is one file of a tree or an index: its git mode and object id.
type treeFile struct{ mode, sha string }

var ledgerID = regexp.MustCompile(`^c[0-9]+$`)
var hexPrefix = regexp.MustCompile(`^[0-9a-fA-F]{4,64}$`)

// verifyTarget finds the checkpoint id names: its ledger id (if any) and commit.
// A ledger id is taken from the ledger alone, so a checkpoint whose commit
// is gone can still be verified (and reported missing).
func (s *Store) verifyTarget(ctx context.Context, id string) (string, string, error) {
	recs := s.Records()
	switch {
	case id == "":
		for i := len(recs) - 1; i >= 0; i-- {
			if recs[i].Usable() {
				return recs[i].ID, strings.ToLower(recs[i].SHA), nil
			}
		}
		return "", "", errors.New("no checkpoint with a commit to verify")
	case ledgerID.MatchString(id):
		for _, r := range recs {
			if r.ID == id {
				if r.SHA == "" {
					return "", "", fmt.Errorf("checkpoint %s has no commit (%s)", id, r.State)
				}
				return r.ID, strings.ToLower(r.SHA), nil
			}
		}
		return "", "", fmt.Errorf("unknown checkpoint: %s", id)
	case !hexPrefix.MatchString(id):
		return "", "", fmt.Errorf("unknown checkpoint: %s (give a ledger id or a SHA prefix)", id)
	}
	prefix := strings.ToLower(id)
	found := map[string]bool{}
	for _, r := range recs {
		if r.SHA != "" && strings.HasPrefix(strings.ToLower(r.SHA), prefix) {
			found[strings.ToLower(r.SHA)] = true
		}
	}
	if len(prefix) == 40 || len(prefix) == 64 {
		found[prefix] = true // a whole SHA is taken as it is, present or not
	} else {
		for _, c := range s.Commits(ctx, prefix) {
			found[strings.ToLower(c.SHA)] = true
		}
	}
	shas := make([]string, 0, len(found))
	for sha := range found {
		shas = append(shas, sha)
	}
	sort.Strings(shas)
	switch len(shas) {
	case 0:
		return "", "", fmt.Errorf("unknown checkpoint: %s", id)
	case 1:
	default:
		return "", "", fmt.Errorf("ambiguous checkpoint %s: it begins %s", id, strings.Join(shas, ", "))
	}
	for i := len(recs) - 1; i >= 0; i-- {
		if strings.EqualFold(recs[i].SHA, shas[0]) {
			return recs[i].ID, shas[0], nil
		}
	}
	return "", shas[0], nil
}

// checkpointFiles lists the files the commit rep.SHA holds and records in
// rep every object it names that the store lacks: the commit, a tree (its
// files are then unknown) or a blob. tree is empty when the commit is missing.
func (s *Store) checkpointFiles(ctx context.Context, rep *VerifyReport) (map[string]treeFile, string, error) {
	types, err := s.objectTypes(ctx, []string{rep.SHA})
	if err != nil {
		return nil, "", err
	}
	switch types[rep.SHA] {
	case "commit":
	case "missing":
		rep.Missing = append(rep.Missing, ckpt.MissingObject{SHA: rep.SHA, Type: "commit"})
		return nil, "", nil
	default:
		return nil, "", fmt.Errorf("%s is a %s, not a commit", rep.SHA, types[rep.SHA])
	}
	out, err := s.git.Run(ctx, nil, "rev-parse", "--verify", "--end-of-options", rep.SHA+"^{tree}")
	if err != nil {
		return nil, "", fmt.Errorf("read commit %s: %w", rep.SHA, err)
	}
	root := strings.TrimSpace(string(out))
	type entry struct{ mode, typ, sha, path string }
	var entries []entry
	parse := func(b []byte, dir string) {
		for _, l := range splitNul(b) {
			meta, p, ok := strings.Cut(l, "\t")
			f := strings.Fields(meta)
			if !ok || len(f) != 3 {
				continue
			}
			if dir != "" {
				p = dir + "/" + p
			}
			entries = append(entries, entry{f[0], f[1], f[2], p})
		}
	}
	trees := map[string]bool{} // trees known present
	if out, err := s.git.Run(ctx, nil, "ls-tree", "-r", "-t", "-z", "--full-tree", root); err == nil {
		parse(out, "")
		trees[root] = true
		for _, e := range entries {
			if e.typ == "tree" {
				trees[e.sha] = true
			}
		}
	} else {
		// A tree is missing (or damaged): walk tree by tree, naming the
		// missing ones and listing what the others hold.
		todo := []entry{{typ: "tree", sha: root}}
		for len(todo) > 0 {
			t := todo[0]
			todo = todo[1:]
			types, terr := s.objectTypes(ctx, []string{t.sha})
			if terr != nil {
				return nil, "", terr
			}
			if types[t.sha] == "missing" {
				rep.Missing = append(rep.Missing, ckpt.MissingObject{SHA: t.sha, Type: "tree", Path: t.path})
				continue
			}
			out, lerr := s.git.Run(ctx, nil, "ls-tree", "-z", "--full-tree", t.sha)
			if lerr != nil {
				return nil, "", fmt.Errorf("read tree %s (%s): %w", t.sha, orRoot(t.path), lerr)
			}
			trees[t.sha] = true
			n := len(entries)
			parse(out, t.path)
			for _, e := range entries[n:] {
				if e.typ == "tree" {
					todo = append(todo, e)
				}
			}
		}
	}
	held := map[string]treeFile{}
	var blobs []string
	where := map[string]string{}
	for _, e := range entries {
		if e.typ != "blob" {
			continue // trees are listed above; a gitlink names no object of the store
		}
		held[e.path] = treeFile{e.mode, e.sha}
		if _, ok := where[e.sha]; !ok {
			where[e.sha] = e.path
			blobs = append(blobs, e.sha)
		}
	}
	types, err = s.objectTypes(ctx, blobs)
	if err != nil {
		return nil, "", err
	}
	for _, b := range blobs {
		if types[b] == "missing" {
			rep.Missing = append(rep.Missing, ckpt.MissingObject{SHA: b, Type: "blob", Path: where[b]})
		}
	}
	sort.Slice(rep.Missing, func(i, j int) bool { return rep.Missing[i].Path < rep.Missing[j].Path })
	return held, root, nil
}

func orRoot(p string) string {
	if p == "" {
		return "the root"
	}
	return p
}

// objectTypes asks the store for the type of each object ("missing" when it
// lacks one), in one cat-file.
func (s *Store) objectTypes(ctx context.Context, shas []string) (map[string]string, error) {
	types := make(map[string]string, len(shas))
	if len(shas) == 0 {
		return types, nil
	}
	out, err := s.git.Run(ctx, strings.NewReader(strings.Join(shas, "\n")+"\n"), "cat-file", "--batch-check=%(objectname) %(objecttype)")
	if err != nil {
		return nil, err
	}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if sha, typ, ok := strings.Cut(l, " "); ok {
			types[sha] = typ // "<sha> missing" for an object the store lacks
		}
	}
	for _, sha := range shas {
		if types[sha] == "" {
			return nil, fmt.Errorf("git did not answer for object %s", sha)
		}
	}
	return types, nil
}

// verifyIndexPrefix names the temporary index files of Verify in cairn/.
const verifyIndexPrefix = "verify-"

// diskFiles is what git would record for the work tree now under sel, read
// by git alone into a temporary index: every untracked (the index starts
// empty), unignored path, the files of nested repositories with git's
// ignore rules asked for each, then the seal's rules, then git hashes them.
func (s *Store) diskFiles(ctx context.Context, sel *Selector, rep *VerifyReport) (map[string]treeFile, error) {
	dir := filepath.Join(s.gitDir, cairnSubdir)
	s.sweepVerifyIndexes(dir)
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(dir, fmt.Sprintf("%s%d-%s.index", verifyIndexPrefix, os.Getpid(), hex.EncodeToString(rnd[:])))
	defer os.Remove(tmp + ".lock")
	defer os.Remove(tmp)
	g := s.git.withIndex(tmp)
	g.ownIndex = true

	// Folders left out (leftout.go) are not entered here either.
	args := append([]string{"ls-files", "-z", "-o", "--exclude-standard"}, s.left().excludeArgs()...)
	out, warn, err := g.RunWarn(ctx, nil, args...)
	if err != nil {
		return nil, err
	}
	rep.Unreadable = append(rep.Unreadable, unreadableDirs(warn)...)
	var candidates, nested []string
	for _, p := range splitNul(out) {
		if strings.HasSuffix(p, "/") { // a repository inside the work tree: git lists only its folder
			nested = append(nested, s.verifyWalk(strings.TrimSuffix(p, "/"), rep)...)
			continue
		}
		candidates = append(candidates, p)
	}
	if len(nested) > 0 {
		ask := make([]string, len(nested))
		for i, f := range nested {
			ask[i] = "./" + f // never read as pathspec magic
		}
		out, err := g.Run(ctx, nulJoin(ask), "check-ignore", "--no-index", "-z", "--stdin")
		var ge *GitError
		if err != nil && !(errors.As(err, &ge) && ge.ExitCode == 1) { // 1: nothing ignored
			return nil, err
		}
		ignored := map[string]bool{}
		for _, f := range splitNul(out) {
			ignored[strings.TrimPrefix(f, "./")] = true
		}
		for _, f := range nested {
			if !ignored[f] {
				candidates = append(candidates, f)
			}
		}
	}
	var add []string
	for _, rel := range candidates {
		if Excluded(rel) || !sel.Match(rel) {
			continue
		}
		fi, err := s.lstatWork(rel)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			// gone since git listed it
		case err != nil:
			rep.Unreadable = append(rep.Unreadable, ckpt.PathIssue{Path: rel, Reason: err.Error()})
		case !fi.Mode().IsRegular():
			// symlinks, FIFOs, sockets, devices: never checkpointed
		case fi.Size() > s.opts.MaxFileSize:
			rep.Skipped = append(rep.Skipped, ckpt.PathIssue{Path: rel, Reason: ckpt.TooLarge(s.opts.MaxFileSize, fi.Size())})
		default:
			add = append(add, rel)
		}
	}
	slices.Sort(add)
	add = slices.Compact(add)
	// --info-only: git hashes each file as it would add it (attributes and
	// all) and writes no object into the store.
	bad, err := verifyAdd(ctx, g, add)
	if err != nil {
		return nil, err
	}
	rep.Unreadable = append(rep.Unreadable, bad...)
	sortIssues(rep.Unreadable)
	sortIssues(rep.Skipped)
	disk := map[string]treeFile{}
	if len(add) == 0 {
		return disk, nil
	}
	out, err = g.Run(ctx, nil, "ls-files", "-s", "-z")
	if err != nil {
		return nil, err
	}
	for _, l := range splitNul(out) {
		meta, p, ok := strings.Cut(l, "\t")
		f := strings.Fields(meta)
		if ok && len(f) == 3 {
			disk[p] = treeFile{f[0], f[1]}
		}
	}
	return disk, nil
}

// verifyAdd adds paths to g's index without writing objects. A file git
// cannot read is isolated by halving the batch, and named.
func verifyAdd(ctx context.Context, g *Git, paths []string) ([]ckpt.PathIssue, error) {
	return isolateUnreadable(ctx, g, paths, "changed while verify read it (git: bus error)",
		"update-index", "-z", "--add", "--info-only", "--stdin")
}

// verifyWalk lists the files under a work-tree folder as a seal's full
// reconcile does (walkWorkTree); unreadable folders are named.
func (s *Store) verifyWalk(rel string, rep *VerifyReport) []string {
	files, issues := s.walkWorkTree(rel)
	rep.Unreadable = append(rep.Unreadable, issues...)
	return files
}

// sweepVerifyIndexes removes temporary indexes a killed verify left behind.
func (s *Store) sweepVerifyIndexes(dir string) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), verifyIndexPrefix) {
			continue
		}
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() && time.Since(fi.ModTime()) > staleTmpAge {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// compareFiles lists every path whose mode or blob differs between the
// checkpoint and the disk, sorted.
func compareFiles(held, disk map[string]treeFile) []ckpt.VerifyDiff {
	out := []ckpt.VerifyDiff{}
	for p, h := range held {
		d, ok := disk[p]
		switch {
		case !ok:
			out = append(out, ckpt.VerifyDiff{Path: p, Status: ckpt.VerifyRemoved, CheckpointMode: h.mode, CheckpointBlob: h.sha})
		case d != h:
			out = append(out, ckpt.VerifyDiff{Path: p, Status: ckpt.VerifyChanged, CheckpointMode: h.mode, CheckpointBlob: h.sha, DiskMode: d.mode, DiskBlob: d.sha})
		}
	}
	for p, d := range disk {
		if _, ok := held[p]; !ok {
			out = append(out, ckpt.VerifyDiff{Path: p, Status: ckpt.VerifyAdded, DiskMode: d.mode, DiskBlob: d.sha})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// withIndex returns a copy of g that uses the index file at path.
func (g *Git) withIndex(path string) *Git {
	c := *g
	c.Extra = slices.Clone(g.Extra)
	c.Index = path
	return &c
}
