//go:build !unix

package platform

import (
	"errors"
	"os"
)

// ErrUnsupported is returned by every OS-specific piece of cairn without a
// version here: cairn builds for windows (a build check) but runs only on
// Linux and macOS.
var ErrUnsupported = errors.New("not supported on this OS (cairn runs on Linux and macOS)")

// ErrLocked is returned by TryLock when another process holds the lock.
var ErrLocked = errors.New("locked by another process")

// ErrSymlink is returned when cairn refuses to write through a symbolic link.
var ErrSymlink = errors.New("refusing to write through a symbolic link")

// NoFollow has no equivalent open flag here.
const NoFollow = 0

// FileLock is not available here.
type FileLock struct{}

func Lock(path string) (*FileLock, error)               { return nil, ErrUnsupported }
func TryLock(path string) (*FileLock, error)            { return nil, ErrUnsupported }
func (l *FileLock) Unlock() error                       { return nil }
func (l *FileLock) File() *os.File                      { return nil }
func SyncFS(path string) error                          { return ErrUnsupported }
func OwnerUID(path string) (uint32, bool)               { return 0, false }
func InfoOwner(fi os.FileInfo) (uint32, bool)           { return 0, false }
func Owner(path string) (uid, gid uint32, ok bool)      { return 0, 0, false }
func NoSymlinkBelow(base, path string, last bool) error { return ErrUnsupported }

// MkdirAllNoFollow is os.MkdirAll here.
func MkdirAllNoFollow(path string, perm os.FileMode) error {
	return os.MkdirAll(path, perm)
}

// ProcessRunning cannot tell here and answers true, so nothing is taken for stale.
func ProcessRunning(pid int) bool { return true }
