package snapshot

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/cairn-dev/cairn/platform"
	"github.com/cairn-dev/cairn/restore/ckpt"
	"github.com/cairn-dev/cairn/snapshot/gitobj"
)

// Refs and the position: where a checkpoint goes and what it follows.

// target picks the ref a checkpoint is sealed on, its parent, and the value
// the ref must still hold for the compare-and-swap.
func (s *Store) target(ctx context.Context, req SealRequest, id string) (ref, parent, old string, err error) {
	switch {
	case req.Ref != "":
		ref = req.Ref
	case req.RunID != "":
		ref = "refs/heads/run-" + req.RunID
	default:
		// One ref per checkpoint outside runs, so a retention policy can drop them one by one.
		ref = "refs/cairn/" + string(req.Kind) + "/" + id
	}
	if tip, ok := s.refTip(ctx, ref); ok {
		return ref, tip, tip, nil
	}
	switch {
	case req.StartSHA != "":
		p, ok := s.resolve(ctx, req.StartSHA+"^{commit}")
		if !ok {
			return "", "", "", fmt.Errorf("start checkpoint %s is not a commit of the store", req.StartSHA)
		}
		parent = p
	case req.RunID == "" && req.Ref == "" && s.position() != "":
		parent = s.position()
	default:
		p, ok := s.refTip(ctx, "refs/heads/main")
		if !ok {
			return "", "", "", errors.New("store has no main branch")
		}
		parent = p
	}
	return ref, parent, zeroSHA, nil
}

// ownRef reports whether ref holds one checkpoint outside runs
// (refs/cairn/<kind>/<id>). Such a checkpoint is sealed as a root commit so
// that dropping its ref frees what only it holds; its parent is in the
// ledger and the Cairn-Parent trailer.
func ownRef(ref string) bool { return strings.HasPrefix(ref, "refs/cairn/") }

// position is the checkpoint the work tree was last sealed from or restored
// to: the parent of a checkpoint outside runs, and `← HEAD` in the listing.
func (s *Store) position() string { return positionOf(s.gitDir, s.records) }

// positionOf is the position file of the store at gitDir, or else the
// newest of recs that has a commit.
func positionOf(gitDir string, recs []ckpt.Record) string {
	if b, err := readNoFollow(filepath.Join(gitDir, cairnSubdir, "position"), maxSmallFile); err == nil {
		if sha := strings.TrimSpace(string(b)); gitobj.IsHex(sha) {
			return sha
		}
	}
	for i := len(recs) - 1; i >= 0; i-- {
		if recs[i].SHA != "" {
			return recs[i].SHA
		}
	}
	return ""
}

// Position is the checkpoint the work tree was last sealed from or restored to.
func (s *Store) Position() string {
	if v := s.ledgerView.Load(); v != nil {
		return positionOf(s.gitDir, *v) // the file is replaced atomically: no lock to read it
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.position()
}

func (s *Store) setPosition(sha string) {
	_ = platform.WriteFileAtomic(filepath.Join(s.gitDir, cairnSubdir, "position"), []byte(sha+"\n"), 0o644)
}

// notePosition is setPosition for a seal, just before its ledger record is
// appended: replaced atomically but not flushed, since the ledger's fsync
// right after commits the file system's journal with it (docs/cairn-formats.md,
// "Files"). A crash between the two leaves the position on a checkpoint whose
// ref moved, which the next open records as recovered.
func (s *Store) notePosition(sha string) {
	_ = replaceUnflushed(filepath.Join(s.gitDir, cairnSubdir, "position"), []byte(sha+"\n"))
}

// refTip reads a full ref name from the store's files (a loose ref, else
// packed-refs) without starting git: it is on the path of every seal. The
// compare-and-swap in update-ref still guards the write.
func (s *Store) refTip(ctx context.Context, ref string) (string, bool) {
	sha, ok, err := gitobj.ReadRef(s.gitDir, ref)
	if err != nil {
		return s.resolve(ctx, ref) // symbolic, a link, or huge: let git say
	}
	return sha, ok
}

func (s *Store) resolve(ctx context.Context, rev string) (string, bool) {
	out, err := s.git.Run(ctx, nil, "rev-parse", "--verify", "--quiet", "--end-of-options", rev)
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(out)), true
}
