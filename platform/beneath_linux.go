package platform

import (
	"errors"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// pathFlag opens a folder on the way only to resolve names in it (O_PATH:
// no read permission needed, as for a path lookup).
const pathFlag = unix.O_PATH

// beneath is how openat2 resolves a Tree's paths: never above the folder,
// never through a link (magic links of /proc included).
const beneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// openBeneath2 opens rel beneath dirfd with openat2; ok false means the
// walk must do it (no openat2 here, or a filter refused the call).
func openBeneath2(dirfd int, rel string, flags int, mode uint32) (fd int, err error, ok bool) {
	how := unix.OpenHow{Flags: uint64(flags), Resolve: beneath}
	if flags&(unix.O_CREAT|unix.O_TMPFILE) != 0 {
		how.Mode = uint64(mode)
	}
	for i := 0; ; i++ {
		fd, err = unix.Openat2(dirfd, rel, &how)
		switch {
		case err == nil:
			return fd, nil, true
		case err == unix.EINTR, err == unix.EAGAIN && i < 16:
			continue
		case err == unix.ENOSYS:
			openat2Off.Store(true)
			return -1, nil, false
		case err == unix.EPERM:
			// A seccomp filter that refuses openat2 says EPERM; the walk
			// answers for this path (and gives EPERM again if it was real).
			return -1, nil, false
		case err == unix.ELOOP:
			return -1, ErrThroughLink, true
		case err == unix.EXDEV:
			return -1, ErrNotBeneath, true
		}
		return -1, err, true
	}
}

// lstat opens rel itself (O_PATH|O_NOFOLLOW: a link at rel is opened, not
// followed) and describes it from the descriptor.
func (t *Tree) lstat(rel string) (fs.FileInfo, error) {
	fd, err := t.open(rel, unix.O_PATH|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), t.abs(rel))
	defer f.Close()
	fi, err := f.Stat()
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return nil, pe.Err
	}
	return fi, err
}

// renameNoReplace is renameat2 with RENAME_NOREPLACE, or, where the file
// system lacks it, a check then renameat.
func renameNoReplace(ofd int, oname string, nfd int, nname string) error {
	err := unix.Renameat2(ofd, oname, nfd, nname, unix.RENAME_NOREPLACE)
	if err != unix.EINVAL && err != unix.ENOSYS {
		return err
	}
	var st unix.Stat_t
	if unix.Fstatat(nfd, nname, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
		return unix.EEXIST
	}
	return unix.Renameat(ofd, oname, nfd, nname)
}
