package platform

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// ErrUnnamedUnsupported means CreateUnnamed or LinkUnnamed cannot be done
// here: the caller writes a named temporary file and renames it instead.
var ErrUnnamedUnsupported = errors.New("unnamed files are not supported here")

// procFD reports whether /proc/self/fd is there: LinkUnnamed names a file
// through it (linkat with AT_EMPTY_PATH would need CAP_DAC_READ_SEARCH,
// which a worker running as the workspace's owner does not have).
var procFD = sync.OnceValue(func() bool {
	fi, err := os.Stat("/proc/self/fd")
	return err == nil && fi.IsDir()
})

// CreateUnnamed opens a new regular file in dir that has no name yet
// (O_TMPFILE), for reading and writing, with perm (less the umask).
// LinkUnnamed names it; a file never named vanishes when it is closed, a
// crash included, so no temporary file is ever left behind.
// ErrUnnamedUnsupported where the system or file system cannot.
func CreateUnnamed(dir string, perm fs.FileMode) (*os.File, error) {
	if !procFD() {
		return nil, ErrUnnamedUnsupported
	}
	for {
		fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, uint32(perm.Perm()))
		switch {
		case err == nil:
			return os.NewFile(uintptr(fd), filepath.Join(dir, "(unnamed)")), nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.EISDIR), errors.Is(err, unix.EINVAL):
			// EISDIR: a kernel older than O_TMPFILE reads it as O_DIRECTORY.
			return nil, ErrUnnamedUnsupported
		}
		return nil, &os.PathError{Op: "open unnamed", Path: dir, Err: err}
	}
}

// LinkUnnamed gives f, made by CreateUnnamed, the name newpath, unless
// newpath exists: fs.ErrExist then, and nothing is replaced.
func LinkUnnamed(f *os.File, newpath string) error {
	err := unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(int(f.Fd())), unix.AT_FDCWD, newpath, unix.AT_SYMLINK_FOLLOW)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EEXIST):
		return &os.LinkError{Op: "link", Old: f.Name(), New: newpath, Err: fs.ErrExist}
	}
	return &os.LinkError{Op: "link", Old: f.Name(), New: newpath, Err: err}
}
