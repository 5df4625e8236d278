//go:build unix

package platform

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrLinkInPath is returned when a folder is opened for a root caller and
// some component of its path is a symbolic link its owner could have planted.
var ErrLinkInPath = errors.New("a component of the path is a symbolic link")

// dirFlags open one folder and never its link: O_NOFOLLOW fails on a symlink
// as the last (here the only) component.
const dirFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC

// OpenDirNoFollow opens the folder at path, which must be absolute and clean,
// one component at a time from "/" so that no component, anywhere, is
// followed if it is a symbolic link (the error then wraps ErrLinkInPath).
// A missing component gives an error wrapping fs.ErrNotExist.
func OpenDirNoFollow(path string) (*os.File, error) {
	if !filepath.IsAbs(path) || filepath.Clean(path) != path {
		return nil, fmt.Errorf("open %s: not an absolute, clean path", path)
	}
	fd, err := openat(unix.AT_FDCWD, "/", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: "/", Err: err}
	}
	cur := "/"
	for _, name := range strings.Split(path[1:], "/") {
		if name == "" { // path is "/"
			continue
		}
		cur = filepath.Join(cur, name)
		next, err := openat(fd, name, dirFlags)
		if err != nil {
			err = classify(fd, name, err)
			unix.Close(fd)
			if cur == path {
				return nil, &os.PathError{Op: "open", Path: path, Err: err}
			}
			return nil, fmt.Errorf("open %s: %s: %w", path, cur, err)
		}
		unix.Close(fd)
		fd = next
	}
	return os.NewFile(uintptr(fd), path), nil
}

// OpenDirAt opens the folder name (one path component) inside dir, relative
// to dir's descriptor and never through a symbolic link: a folder swapped for
// a link after dir was read is refused (ErrLinkInPath), not followed.
func OpenDirAt(dir *os.File, name string) (*os.File, error) {
	path := filepath.Join(dir.Name(), name)
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') {
		return nil, fmt.Errorf("open %s: %q is not a single path component", path, name)
	}
	rc, err := dir.SyscallConn()
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	fd, oerr := -1, error(nil)
	if err := rc.Control(func(pfd uintptr) {
		fd, oerr = openat(int(pfd), name, dirFlags)
		if oerr != nil {
			oerr = classify(int(pfd), name, oerr)
		}
	}); err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	if oerr != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: oerr}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// DirInfo is the owner, mode and device of the open folder f, read from its
// descriptor (fstat) so it describes exactly what was opened.
func DirInfo(f *os.File) (uid, gid uint32, mode os.FileMode, dev uint64, err error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, 0, 0, 0, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, 0, 0, fmt.Errorf("stat %s: no owner information", f.Name())
	}
	return st.Uid, st.Gid, fi.Mode(), uint64(st.Dev), nil
}

// openat retries on EINTR, which a slow (network or FUSE) file system may return.
func openat(dirfd int, name string, flags int) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, name, flags, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// classify turns a failed no-follow open into ErrLinkInPath when name is a
// symbolic link: the errno for that differs (ELOOP on Linux, EMLINK on
// FreeBSD, ENOTDIR with O_DIRECTORY on some), so the entry itself is asked.
func classify(dirfd int, name string, err error) error {
	if err == unix.ENOENT {
		return err
	}
	var st unix.Stat_t
	if unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return ErrLinkInPath
	}
	return err
}

// RenameAt renames oldName in oldDir to newName in newDir, both single
// components relative to folders already open: nothing on the way is resolved
// again, so a folder swapped for a link meanwhile cannot redirect it.
func RenameAt(oldDir *os.File, oldName string, newDir *os.File, newName string) error {
	for _, n := range []string{oldName, newName} {
		if n == "" || n == "." || n == ".." || strings.ContainsRune(n, '/') {
			return fmt.Errorf("rename: %q is not a single path component", n)
		}
	}
	err := unix.Renameat(int(oldDir.Fd()), oldName, int(newDir.Fd()), newName)
	if err != nil {
		return &os.LinkError{Op: "rename", Old: filepath.Join(oldDir.Name(), oldName), New: filepath.Join(newDir.Name(), newName), Err: err}
	}
	return nil
}

// EntryOwner is the uid owning name in the open folder dir, asked without
// following name if it is a link (fstatat with AT_SYMLINK_NOFOLLOW): a
// cheaper look than opening it, for a caller deciding whether to.
func EntryOwner(dir *os.File, name string) (uint32, error) {
	rc, err := dir.SyscallConn()
	if err != nil {
		return 0, err
	}
	var st unix.Stat_t
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.Fstatat(int(fd), name, &st, unix.AT_SYMLINK_NOFOLLOW)
	}); err != nil {
		return 0, err
	}
	if serr != nil {
		return 0, &os.PathError{Op: "stat", Path: filepath.Join(dir.Name(), name), Err: serr}
	}
	return st.Uid, nil
}
