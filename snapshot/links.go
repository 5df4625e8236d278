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

// Size bounds for the store's own files read whole: a file planted or grown
// there must not exhaust the daemon's memory.
const (
	maxSmallFile  = 1 << 20 // last-id, position, pins, maintenance.json, index.json, a loose ref
	maxLedgerFile = 1 << 30 // the ledger: one line per checkpoint and prune
)

// readNoFollow reads a file cairn owns, refusing a symbolic link, anything
// but a regular file, and a file over max bytes (platform.ReadFileCapped).
func readNoFollow(path string, max int64) ([]byte, error) {
	return platform.ReadFileCapped(path, max)
}

// copyNoFollow copies in (opened by platform.OpenRegular) to dst, created
// or truncated, refusing a symbolic link; it streams, so it needs no bound.
func copyNoFollow(in *os.File, dst string) error {
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|platform.NoFollow, 0o644)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	// The copy keeps the source's mtime: git tells a racily clean entry (a
	// file changed in the same timestamp tick as the index was written, at
	// the same size) by comparing it with the index file's mtime, and a
	// copy made later would make git trust that entry's stale stat. dst is
	// in cairn's own store, created just above without following a link.
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	return os.Chtimes(dst, fi.ModTime(), fi.ModTime())
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
