package snapshot

import (
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
	"syscall"

	"github.com/cairn-dev/cairn/platform"
)

// The in-process restore writes each new file and link under a temporary
// name beside its path, then renames it over the path (platform.Tree's
// ReplaceFile). A process killed between the two (kill -9, the OOM killer, a
// crash) leaves that temporary entry in the user's work tree, where the next
// seal would hold it as the user's own file. So before its first write a
// restore records, in the store, the tag its temporary names carry and the
// folders it writes in (cairn/restoring, docs/cairn-formats.md); once its
// writes end the record goes. The next seal or restore of the store (under
// the store lock, so the record's writer is gone) that finds a record removes,
// in those folders only, the entries named with that tag that are regular
// files or links (what a restore makes), then the record. The tag is random:
// no file of the user's bears it.

// restoreJournalName is the record's file, in the store's cairn folder.
const restoreJournalName = "restoring"

// restoreJournal is the record of a restore's writes under way.
type restoreJournal struct {
	Tag     string   `json:"tag"`
	Folders []string `json:"folders"`
}

// journalTag is what a record's tag must look like (newRestoreTag).
var journalTag = regexp.MustCompile(`^[0-9a-f]{16}$`)

func (s *Store) restoreJournalPath() string {
	return filepath.Join(s.gitDir, cairnSubdir, restoreJournalName)
}

// newRestoreTag is a fresh tag for one restore's temporary names.
func newRestoreTag() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// beginRestoreWrites records that the restore tagged tag writes in the
// folders of paths. Not flushed: a process killed (the case it is for) leaves
// it in the page cache; after a power loss the file system's journal, which
// orders the record's rename before the temporary entries are made, keeps
// either both or neither.
func (s *Store) beginRestoreWrites(tag string, paths []string) error {
	var dirs []string
	for _, p := range paths {
		dirs = append(dirs, path.Dir(p))
	}
	slices.Sort(dirs)
	b, err := json.Marshal(restoreJournal{Tag: tag, Folders: slices.Compact(dirs)})
	if err != nil {
		return err
	}
	p := s.restoreJournalPath()
	tmp := fmt.Sprintf("%s.tmp-%d", p, os.Getpid())
	if err := createNoFollowTrunc(tmp, b); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("restore record: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("restore record: %w", err)
	}
	return nil
}

// endRestoreWrites removes the record once the restore's writes have ended
// (each temporary entry renamed, or removed when its write failed).
func (s *Store) endRestoreWrites() error {
	if err := os.Remove(s.restoreJournalPath()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("restore record: %w", err)
	}
	return nil
}

// sweepRestoreTemps removes what a restore killed while writing left (see
// above), and its record; a record it cannot read whole is removed (nothing
// can be found by it). It runs under the store lock, before a seal or a
// restore looks at the work tree. It returns the paths removed.
func (s *Store) sweepRestoreTemps() ([]string, error) {
	p := s.restoreJournalPath()
	b, err := readNoFollow(p, maxSmallFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	var j restoreJournal
	if err != nil || json.Unmarshal(b, &j) != nil || !journalTag.MatchString(j.Tag) {
		return nil, s.endRestoreWrites()
	}
	var gone []string
	err = s.withWorkTree(func(t *platform.Tree) error {
		for _, d := range j.Folders {
			if d != "." {
				if c, err := cleanRel(d); err != nil || c != d {
					continue // not a folder a restore names
				}
			}
			ents, err := t.ReadDir(filepath.FromSlash(d))
			switch {
			case errors.Is(err, fs.ErrNotExist), errors.Is(err, platform.ErrThroughLink), errors.Is(err, syscall.ENOTDIR):
				continue // the folder is gone, or no longer one: nothing of the restore's is reachable there
			case err != nil:
				return err
			}
			for _, e := range ents {
				name := e.Name()
				if !platform.IsTempOf(name, j.Tag) || (e.Type() != 0 && e.Type() != fs.ModeSymlink) {
					continue // a file or link a restore makes, and only those
				}
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
	return gone, s.endRestoreWrites()
}
