package snapshot

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"

	"github.com/cairn-dev/cairn/platform"
)

// A restore's record (cairn/restoring, docs/cairn-formats.md) says, to the
// next seal of the store in whatever process, what the restore left for it:
//
//   - While a restore writes (from just before its first change to the work
//     tree until its index and stat cache describe what it wrote), the record
//     says so, with the tag of the temporary names under which the
//     in-process restore makes new files and links beside their paths (then
//     renamed over them, platform.Tree.ReplaceFile) and the folders it
//     writes in. A process killed meanwhile (kill -9, the OOM killer, a
//     crash) leaves the record: the next seal removes, in those folders only,
//     the regular files and links named with that tag (what the restore made;
//     the tag is random, no file of the user's bears it), and reconciles the
//     whole work tree (cairn's index may not describe what the restore wrote).
//   - Once the restore has ended, the record lists what it left that cairn's
//     index may not describe (the files it kept, those it wrote, deleted or
//     could not bring to the target), which every seal told what changed adds
//     to what it looks at (Store.reexamine), and the files of those that
//     ignore rules may cover though cairn's index holds them, which a full
//     seal asks check-ignore about (Store.rejudge), until one seals.
//
// The seal that has done what the record asks removes it. Each seal reads it
// under the store lock, so a record found there is never one a live restore
// is still writing.

// restoreRecordName is the record's file, in the store's cairn folder.
const restoreRecordName = "restoring"

// maxRestoreRecord bounds what is read of the record: a restore of a whole
// large tree names tens of thousands of folders and paths.
const maxRestoreRecord = 256 << 20

// restoreRecord is the record; Done tells its two forms apart.
type restoreRecord struct {
	Tag       string   `json:"tag,omitempty"`
	Folders   []string `json:"folders,omitempty"`
	Done      bool     `json:"done,omitempty"`
	Reexamine []string `json:"reexamine,omitempty"`
	Rejudge   []string `json:"rejudge,omitempty"`
}

// recordTag is what a record's tag must look like (newRestoreTag).
var recordTag = regexp.MustCompile(`^[0-9a-f]{16}$`)

func (s *Store) restoreRecordPath() string {
	return filepath.Join(s.gitDir, cairnSubdir, restoreRecordName)
}

// newRestoreTag is a fresh tag for one restore's temporary names.
func newRestoreTag() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// writeRestoreRecord replaces the record with r. Not flushed: a process
// killed (the case it is for) leaves it in the page cache; after a power
// loss the file system's journal, which orders the record's rename before
// the work tree's changes that follow it, keeps it whenever it keeps them.
func (s *Store) writeRestoreRecord(r restoreRecord) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := replaceUnflushed(s.restoreRecordPath(), b); err != nil {
		return fmt.Errorf("restore record: %w", err)
	}
	return nil
}

// beginRestore records that a restore tagged tag (temporary names) is about
// to change the work tree, writing the paths given.
func (s *Store) beginRestore(tag string, writes []string) error {
	var dirs []string
	for _, p := range writes {
		dirs = append(dirs, path.Dir(p))
	}
	slices.Sort(dirs)
	return s.writeRestoreRecord(restoreRecord{Tag: tag, Folders: slices.Compact(dirs)})
}

// endRestore records that the restore ended, leaving reexamine and rejudge
// (Store) for the next seals; none, and the record goes.
func (s *Store) endRestore(reexamine, rejudge []string) error {
	if len(reexamine) == 0 && len(rejudge) == 0 {
		return s.dropRestoreRecord()
	}
	return s.writeRestoreRecord(restoreRecord{Done: true, Reexamine: reexamine, Rejudge: rejudge})
}

// dropRestoreRecord removes the record: a seal did what it asked.
func (s *Store) dropRestoreRecord() error {
	if err := os.Remove(s.restoreRecordPath()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("restore record: %w", err)
	}
	return nil
}

// takeRestoreRecord reads the record before a seal (under the store lock):
// what an ended restore left joins s.reexamine; a restore stopped while it
// wrote makes the seal reconcile the whole work tree (s.restoreUnsure), after
// the temporaries it may have left are removed. A record that cannot be read
// whole is taken as a stopped restore's, with nothing to remove.
func (s *Store) takeRestoreRecord(ctx context.Context) {
	b, err := readNoFollow(s.restoreRecordPath(), maxRestoreRecord)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	var r restoreRecord
	if err != nil || json.Unmarshal(b, &r) != nil {
		s.restoreUnsure = true
		return
	}
	if r.Done {
		s.reexamine = slices.Compact(slices.Sorted(slices.Values(append(slices.Clip(s.reexamine), r.Reexamine...))))
		s.rejudge = slices.Compact(slices.Sorted(slices.Values(append(slices.Clip(s.rejudge), r.Rejudge...))))
		return
	}
	s.restoreUnsure = true
	if !recordTag.MatchString(r.Tag) {
		return
	}
	gone, err := s.sweepRestoreTemps(r)
	if len(gone) > 0 {
		s.note(ctx, fmt.Sprintf("removed %d temporary files a restore stopped while writing left in the work tree (%s)", len(gone), strings.Join(gone[:min(len(gone), 3)], ", ")))
	}
	if err != nil {
		s.note(ctx, err.Error())
		return
	}
	// Swept: what is left to do is the whole reconcile.
	if err := s.writeRestoreRecord(restoreRecord{}); err != nil {
		s.note(ctx, err.Error())
	}
}

// sweepRestoreTemps removes, in the folders r names, the regular files and
// links named with r's tag, never through a link nor outside the work tree.
// It returns the paths removed.
func (s *Store) sweepRestoreTemps(r restoreRecord) ([]string, error) {
	var gone []string
	err := s.withWorkTree(func(t *platform.Tree) error {
		for _, d := range r.Folders {
			if d != "." {
				if c, err := cleanRel(d); err != nil || c != d {
					continue // not a folder a restore names
				}
			}
			// Only the tagged names are kept: the folder may hold any number of others.
			var tagged []string
			err := t.EachEntry(filepath.FromSlash(d), func(e fs.DirEntry) {
				if platform.IsTempOf(e.Name(), r.Tag) && (e.Type() == 0 || e.Type() == fs.ModeSymlink) {
					tagged = append(tagged, e.Name()) // a file or link a restore makes, and only those
				}
			})
			switch {
			case errors.Is(err, fs.ErrNotExist), errors.Is(err, platform.ErrThroughLink), errors.Is(err, syscall.ENOTDIR):
				continue // the folder is gone, or no longer one: nothing of the restore's is reachable there
			case err != nil:
				return err
			}
			for _, name := range tagged {
				rel := name
				if d != "." {
					rel = d + "/" + name
				}
				if err := t.Remove(filepath.FromSlash(rel)); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return err
				}
				gone = append(gone, rel)
			}
		}
		return nil
	})
	if err != nil {
		return gone, fmt.Errorf("removing what a stopped restore left: %w", err)
	}
	return gone, nil
}
