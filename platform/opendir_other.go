//go:build !unix

package platform

import (
	"errors"
	"fmt"
	"os"
)

// ErrLinkInPath is returned when some component of a path is a symbolic link.
var ErrLinkInPath = errors.New("a component of the path is a symbolic link")

// OpenDirNoFollow needs openat with O_NOFOLLOW, which this OS lacks here.
func OpenDirNoFollow(path string) (*os.File, error) {
	return nil, fmt.Errorf("open %s: %w", path, ErrUnsupported)
}

// OpenDirAt needs openat with O_NOFOLLOW, which this OS lacks here.
func OpenDirAt(dir *os.File, name string) (*os.File, error) {
	return nil, fmt.Errorf("open %s: %w", name, ErrUnsupported)
}

// DirInfo has no owner to report here.
func DirInfo(f *os.File) (uid, gid uint32, mode os.FileMode, dev uint64, err error) {
	return 0, 0, 0, 0, fmt.Errorf("stat %s: %w", f.Name(), ErrUnsupported)
}

// RenameAt is not supported here.
func RenameAt(oldDir *os.File, oldName string, newDir *os.File, newName string) error {
	return fmt.Errorf("rename %s: %w", oldName, ErrUnsupported)
}

// EntryOwner has no owner to report here.
func EntryOwner(dir *os.File, name string) (uint32, error) {
	return 0, fmt.Errorf("stat %s: %w", name, ErrUnsupported)
}
