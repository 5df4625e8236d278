package platform

import (
	"errors"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// ErrNoReplaceUnsupported means RenameNoReplace cannot be done here.
var ErrNoReplaceUnsupported = errors.New("rename without replacing is not supported here")

// RenameNoReplace renames oldpath to newpath unless newpath exists, in one
// step (renameat2 RENAME_NOREPLACE): fs.ErrExist when it does, and
// ErrNoReplaceUnsupported where the file system cannot say (the caller checks first).
func RenameNoReplace(oldpath, newpath string) error {
	err := unix.Renameat2(unix.AT_FDCWD, oldpath, unix.AT_FDCWD, newpath, unix.RENAME_NOREPLACE)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EEXIST):
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: fs.ErrExist}
	case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EOPNOTSUPP):
		return ErrNoReplaceUnsupported
	}
	return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
}
