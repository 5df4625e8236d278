package snapshot

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/cairn-dev/cairn/platform"
)

// Symbolic links. Cairn runs in a worker with the workspace owner's uid, in
// folders its agent can write: Go-side writes never go through a symbolic
// link. Files are opened with O_NOFOLLOW or replaced by rename, folders are
// created component by component refusing links, and every write under the
// store lock first checks that no folder on the way is a link.

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
	if err := platform.NoSymlinkBelow(s.linkBase(), filepath.Join(s.gitDir, cairnSubdir), true); err != nil {
		return fmt.Errorf("store %s: %w", s.gitDir, err)
	}
	return nil
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
// symbolic link.
func createNoFollow(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|platform.NoFollow, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
