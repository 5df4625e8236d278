package platform

import (
	"errors"
	"io/fs"
	"syscall"
)

// WalkSkippable errors describe the entry, not the walk: it vanished, is not
// readable, or was swapped for a link or a file since it was listed.
func WalkSkippable(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) ||
		errors.Is(err, ErrLinkInPath) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.ELOOP)
}
