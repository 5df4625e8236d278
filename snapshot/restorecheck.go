package snapshot

import (
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// A restore reads what it needs of its target before it changes anything
// (README.md, "Restore and rollback"): every tree of the target, and every
// blob it will write, read whole from the store and hashed. A target the
// store cannot give back is refused with the list of what is lost
// (ckpt.TargetDamagedError), the work tree untouched.
//
// Before the pre-restore checkpoint, the blobs read are those the target
// holds that differ from the position's checkpoint (every one when there is
// no position), plus those at paths the watcher saw change: the plan's
// writes, but for files changed since the last seal that nobody reported.
// Those are read once the plan is known, before the first file is written.

// targetCheck is what checkTarget read of a target.
type targetCheck struct {
	target string
	files  map[string]treeFile // path → mode and blob (gitlinks left out)
	read   map[string]bool     // blobs read whole and found whole
}

// checkTarget lists the target's trees and reads the blobs the restore
// will most likely write. A lost object refuses the restore.
func (s *Store) checkTarget(ctx context.Context, target, pos string, prefixes, changed []string) (*targetCheck, error) {
	tc := &targetCheck{target: target, files: map[string]treeFile{}, read: map[string]bool{}}
	out, err := s.git.Run(ctx, nil, "rev-parse", "--verify", "--end-of-options", target+"^{tree}")
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		return nil, &ckpt.TargetDamagedError{Target: target, Lost: []ckpt.LostObject{{SHA: target, Type: "commit", Problem: gitProblem(err)}}}
	}
	lost, err := s.listTarget(ctx, strings.TrimSpace(string(out)), prefixes, tc.files)
	if err != nil {
		return nil, err
	}
	// The blobs to read now: what the target changes from the position, by
	// a tree diff that skips every folder the two share; when it cannot run
	// (a tree lost), by the two listings.
	var want []string
	diffed := false
	if pos != "" {
		ch, err := s.rawDiff(ctx, pos, target)
		if err == nil {
			diffed = true
			for _, c := range ch {
				if (c.status == "A" || c.status == "M" || c.status == "T") && c.mode != "160000" && under(c.path, prefixes) {
					want = append(want, c.sha)
				}
			}
		} else if ctx.Err() != nil {
			return nil, err
		}
	}
	if !diffed {
		held := map[string]treeFile{}
		if pos != "" {
			if out, err := s.git.Run(ctx, nil, "ls-tree", "-r", "-z", "--full-tree", pos); err == nil {
				parseTree(out, "", func(mode, typ, sha, p string) { held[p] = treeFile{mode, sha} })
			} else if ctx.Err() != nil {
				return nil, err
			}
		}
		for p, f := range tc.files {
			if h, ok := held[p]; !ok || h.sha != f.sha {
				want = append(want, f.sha)
			}
		}
	}
	for _, p := range changed {
		if f, ok := tc.files[p]; ok {
			want = append(want, f.sha)
		}
	}
	more, err := s.readBlobs(ctx, tc, want)
	if err != nil {
		return nil, err
	}
	if lost = append(lost, more...); len(lost) > 0 {
		return nil, s.refuseDamaged(ctx, target, lost)
	}
	return tc, nil
}

// checkWrites reads the blobs of the planned writes checkTarget did not.
func (s *Store) checkWrites(ctx context.Context, tc *targetCheck, work *restoreWork) error {
	var want []string
	for _, b := range work.wrote {
		if !tc.read[b.sha] {
			want = append(want, b.sha)
		}
	}
	lost, err := s.readBlobs(ctx, tc, want)
	if err != nil {
		return err
	}
	if len(lost) > 0 {
		return s.refuseDamaged(ctx, tc.target, lost)
	}
	return nil
}

// refuseDamaged is the refusal naming lost, by path; an object missing from the
// store is told apart from one it holds but cannot read.
func (s *Store) refuseDamaged(ctx context.Context, target string, lost []ckpt.LostObject) error {
	var ask []string
	for _, l := range lost {
		if l.Problem == "" {
			ask = append(ask, l.SHA)
		}
	}
	if len(ask) > 0 {
		types, err := s.objectTypes(ctx, slices.Compact(slices.Sorted(slices.Values(ask))))
		if err != nil && ctx.Err() != nil {
			return err
		}
		for i := range lost {
			if lost[i].Problem != "" {
				continue
			}
			if types[lost[i].SHA] == "missing" {
				lost[i].Problem = "missing"
			} else {
				lost[i].Problem = "unreadable"
			}
		}
	}
	sort.Slice(lost, func(i, j int) bool {
		if lost[i].Path != lost[j].Path {
			return lost[i].Path < lost[j].Path
		}
		return lost[i].SHA < lost[j].SHA
	})
	return &ckpt.TargetDamagedError{Target: target, Lost: lost}
}

// lostCommit is the refusal of a target the ledger records whose commit
// git cannot read; nil for a target the ledger does not know (unknown).
func (s *Store) lostCommit(ctx context.Context, target string) error {
	known := false // s.mu is held: the store's lock
	for _, r := range s.records {
		known = known || (r.SHA != "" && strings.EqualFold(r.SHA, target))
	}
	if !known {
		return nil
	}
	return s.refuseDamaged(ctx, strings.ToLower(target), []ckpt.LostObject{{SHA: strings.ToLower(target), Type: "commit"}})
}

// listTarget fills files with the blobs of the tree root under prefixes. A
// tree git cannot list is walked down, folder by folder, to the trees that
// are lost; the files under those are unknown.
func (s *Store) listTarget(ctx context.Context, root string, prefixes []string, files map[string]treeFile) ([]ckpt.LostObject, error) {
	var lost []ckpt.LostObject
	type tree struct{ sha, path string }
	add := func(mode, typ, sha, p string) {
		if typ == "blob" && under(p, prefixes) {
			files[p] = treeFile{mode, sha}
		}
	}
	for todo := []tree{{root, ""}}; len(todo) > 0; {
		t := todo[0]
		todo = todo[1:]
		out, err := s.git.Run(ctx, nil, "ls-tree", "-r", "-t", "-z", "--full-tree", t.sha)
		if err == nil {
			parseTree(out, t.path, add)
			continue
		}
		if ctx.Err() != nil {
			return nil, err
		}
		// Something below t is lost: t alone, then each of its folders.
		out, err = s.git.Run(ctx, nil, "ls-tree", "-z", "--full-tree", t.sha)
		if err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			lost = append(lost, ckpt.LostObject{SHA: t.sha, Type: "tree", Path: t.path})
			continue
		}
		parseTree(out, t.path, func(mode, typ, sha, p string) {
			switch {
			case typ == "tree" && relevantFolder(p, prefixes):
				todo = append(todo, tree{sha, p})
			default:
				add(mode, typ, sha, p)
			}
		})
	}
	return lost, nil
}

// relevantFolder reports whether a restore of prefixes needs the folder p:
// it is under one, or holds one.
func relevantFolder(p string, prefixes []string) bool {
	if under(p, prefixes) {
		return true
	}
	for _, pre := range prefixes {
		if strings.HasPrefix(pre, p+"/") {
			return true
		}
	}
	return false
}

// parseTree calls fn for each entry of `ls-tree -z` output, its path under dir.
func parseTree(out []byte, dir string, fn func(mode, typ, sha, path string)) {
	for _, l := range splitNul(out) {
		meta, p, ok := strings.Cut(l, "\t")
		f := strings.Fields(meta)
		if !ok || len(f) != 3 {
			continue
		}
		if dir != "" {
			p = dir + "/" + p
		}
		fn(f[0], f[1], f[2], p)
	}
}

// readBlobs reads the blobs shas name (those not read yet) whole through one
// `cat-file --batch`, each hashed and measured as it streams by and then
// dropped; a blob git cannot read ends git's run, and the rest are read by
// the next. It returns the lost ones, named by a path of tc's target.
func (s *Store) readBlobs(ctx context.Context, tc *targetCheck, shas []string) ([]ckpt.LostObject, error) {
	var todo []string
	for _, sha := range shas {
		if !tc.read[sha] {
			todo = append(todo, sha)
		}
	}
	slices.Sort(todo)
	todo = slices.Compact(todo)
	bad := map[string]string{}
	for len(todo) > 0 {
		r := &batchReader{want: todo, bad: bad}
		err := s.git.RunTo(ctx, r, strings.NewReader(strings.Join(todo, "\n")+"\n"), "cat-file", "--batch")
		if r.err != nil {
			return nil, r.err
		}
		for _, sha := range todo[:r.done] {
			if bad[sha] == "" {
				tc.read[sha] = true
			}
		}
		if r.done == len(todo) {
			if err != nil {
				return nil, err
			}
			break
		}
		var ge *GitError
		if ctx.Err() != nil || (err != nil && !errors.As(err, &ge)) || (err != nil && ge.ExitCode < 0) {
			return nil, err
		}
		// git stopped at the blob it could not read: it is lost, the rest next.
		bad[todo[r.done]] = "unreadable"
		if err != nil {
			bad[todo[r.done]] = gitProblem(err)
		}
		todo = todo[r.done+1:]
	}
	if len(bad) == 0 {
		return nil, nil
	}
	where := map[string]string{}
	for p, f := range tc.files {
		if w, ok := where[f.sha]; !ok || p < w {
			where[f.sha] = p
		}
	}
	var lost []ckpt.LostObject
	for sha, why := range bad {
		lost = append(lost, ckpt.LostObject{SHA: sha, Type: "blob", Path: where[sha], Problem: why})
	}
	return lost, nil
}

// gitProblem is "unreadable: " and the first line git printed.
func gitProblem(err error) string {
	var ge *GitError
	if errors.As(err, &ge) {
		if l := strings.TrimPrefix(firstLine(ge.Stderr), "fatal: "); l != "" {
			return "unreadable: " + l
		}
	}
	return "unreadable"
}

// batchReader takes `cat-file --batch` output for want, in order: each
// object's header, then its content, hashed as git would name it and never
// kept, then a newline. done counts the objects fully received; bad gets
// those missing or not what their id says.
type batchReader struct {
	want []string
	bad  map[string]string
	done int
	err  error // the output is not what was asked for

	head   []byte // the header line read so far
	inBody bool   // content bytes come next
	left   int64  // content bytes still to come
	sep    bool   // the newline after the content is next
	typ    string
	h      hash.Hash
}

func (r *batchReader) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 && r.err == nil {
		switch {
		case r.sep:
			if p[0] != '\n' {
				r.err = errors.New("cat-file --batch: no newline after an object")
				break
			}
			p = p[1:]
			r.sep, r.inBody = false, false
			sha := r.want[r.done]
			switch {
			case r.typ != "blob":
				r.bad[sha] = "a " + r.typ + ", not a blob"
			case hex.EncodeToString(r.h.Sum(nil)) != sha:
				r.bad[sha] = "content does not match its id"
			}
			r.done++
		case r.inBody:
			k := int(min(int64(len(p)), r.left))
			r.h.Write(p[:k])
			p, r.left = p[k:], r.left-int64(k)
			if r.left == 0 {
				r.sep = true
			}
		default:
			i := bytes.IndexByte(p, '\n')
			if i < 0 {
				r.head = append(r.head, p...)
				p = nil
				break
			}
			line := string(append(r.head, p[:i]...))
			r.head, p = r.head[:0], p[i+1:]
			r.header(line)
		}
	}
	if r.err != nil {
		return 0, r.err
	}
	return n, nil
}

// header starts the next object: "<id> <type> <size>" or "<id> missing".
func (r *batchReader) header(line string) {
	if r.done >= len(r.want) {
		r.err = fmt.Errorf("cat-file --batch: unexpected %q", line)
		return
	}
	sha := r.want[r.done]
	f := strings.Fields(line)
	if len(f) == 0 || f[0] != sha {
		r.err = fmt.Errorf("cat-file --batch: %q where %s was expected", line, sha)
		return
	}
	if len(f) == 2 && f[1] == "missing" {
		r.bad[sha] = "missing"
		r.done++
		return
	}
	size, err := strconv.ParseInt(f[len(f)-1], 10, 64)
	if len(f) != 3 || err != nil || size < 0 {
		r.err = fmt.Errorf("cat-file --batch: bad header %q", line)
		return
	}
	r.typ, r.left, r.inBody = f[1], size, true
	r.h = sha1.New()
	if len(sha) == 64 {
		r.h = sha256.New()
	}
	fmt.Fprintf(r.h, "%s %d\x00", r.typ, size)
	if size == 0 {
		r.sep = true
	}
}
