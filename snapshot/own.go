package snapshot

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cairn-dev/cairn/platform"
)

// Privileges. When a root daemon acts for a workspace owner (Options.Cred),
// git runs as the owner, and every file or folder cairn itself creates for
// the store — the store's home, locks, ledger, cairn's index files, position,
// .gitconfig, info files, temporary files — is given to the owner before or
// right after it appears. Go-side writes never go through a symbolic link:
// files are opened with O_NOFOLLOW or replaced by rename, folders are
// created component by component refusing links, and every write under the
// store lock first checks that no folder on the way is a link.

// ids is the owner files are given to, or -1, -1 to keep the writer's.
func (s *Store) ids() (int, int) {
	if s.opts.Cred == nil {
		return -1, -1
	}
	return int(s.opts.Cred.UID), int(s.opts.Cred.GID)
}

// mkdirAll creates path's missing folders, owned by the owner, refusing links.
func (s *Store) mkdirAll(path string) error {
	uid, gid := s.ids()
	return platform.MkdirAllOwned(path, 0o755, uid, gid)
}

// writeAtomic replaces path with data, owned by the owner.
func (s *Store) writeAtomic(path string, data []byte) error {
	uid, gid := s.ids()
	return platform.WriteFileAtomicOwned(path, data, 0o644, uid, gid)
}

// linkBase is the folder below which every component of the store's paths
// is cairn's to create: the workspace (Hankweave layout) or the stores folder
// of the state directory (plain layout).
func (s *Store) linkBase() string {
	if s.layout == LayoutHankweave {
		return s.dir
	}
	return filepath.Dir(s.home)
}

// checkLinks refuses a store whose folders were replaced by symbolic links.
func (s *Store) checkLinks() error {
	if s.opts.Cred == nil {
		return nil // the daemon's own folder: links there are its user's choice
	}
	if err := platform.NoSymlinkBelow(s.linkBase(), filepath.Join(s.gitDir, cairnSubdir), true); err != nil {
		return fmt.Errorf("store %s: %w", s.gitDir, err)
	}
	return nil
}

// reown gives a store made by an earlier daemon that did not act as the
// owner (its home belongs to someone else) to the owner, once: git runs as
// them and must write it. The walk never follows a link.
func (s *Store) reown() error {
	uid, gid := s.ids()
	if uid < 0 {
		return nil
	}
	if have, _, ok := platform.Owner(s.home); !ok || int(have) == uid {
		return nil
	}
	return filepath.WalkDir(s.home, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}

// readNoFollow reads a file cairn owns, refusing a symbolic link.
func readNoFollow(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|platform.NoFollow, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// createNoFollow creates (or truncates) a file cairn owns, refusing a
// symbolic link, and gives it to the owner.
func (s *Store) createNoFollow(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|platform.NoFollow, 0o644)
	if err != nil {
		return err
	}
	if uid, gid := s.ids(); uid >= 0 {
		err = f.Chown(uid, gid)
	}
	if err == nil {
		_, err = f.Write(data)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
