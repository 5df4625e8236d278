package platform

import (
	"fmt"
	"os"
	"path/filepath"
)

// WriteFileAtomic writes data to path through a temporary file in the same
// folder, fsyncs it, renames it into place and fsyncs the folder, so a crash
// leaves either the old file or the new one.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	return WriteFileAtomicOwned(path, data, perm, -1, -1)
}

// WriteFileAtomicOwned is WriteFileAtomic that gives the file to uid:gid
// before it is renamed into place (uid < 0: the writer's). The rename
// replaces a symbolic link at path rather than writing through it.
func WriteFileAtomicOwned(path string, data []byte, perm os.FileMode, uid, gid int) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op once renamed
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return fmt.Errorf("chmod %s: %w", path, err)
	}
	if uid >= 0 {
		if err := f.Chown(uid, gid); err != nil {
			f.Close()
			return fmt.Errorf("chown %s: %w", path, err)
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("fsync %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename into %s: %w", path, err)
	}
	return SyncDir(dir)
}

// SyncDir fsyncs a directory so a rename or create inside it is durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open dir %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync dir %s: %w", dir, err)
	}
	return nil
}
