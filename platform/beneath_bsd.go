//go:build unix && !linux

package platform

import (
	"io/fs"
	"path/filepath"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// pathFlag opens a folder on the way (no O_PATH here).
const pathFlag = unix.O_RDONLY

// openBeneath2: there is no openat2 here; the walk resolves every path.
func openBeneath2(dirfd int, rel string, flags int, mode uint32) (int, error, bool) {
	return -1, nil, false
}

// lstat asks fstatat, without following, in rel's folder opened beneath the Tree.
func (t *Tree) lstat(rel string) (fs.FileInfo, error) {
	if rel == "." {
		var st unix.Stat_t
		if err := unix.Fstat(t.fd, &st); err != nil {
			return nil, err
		}
		return statInfo(filepath.Base(t.path), &st), nil
	}
	pfd, name, err := t.parent(rel, pathFlag)
	if err != nil {
		return nil, err
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstatat(pfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, err
	}
	return statInfo(name, &st), nil
}

// statInfo is os.Lstat's answer built from a stat record (the kernel's
// struct stat, which syscall.Stat_t also is).
func statInfo(name string, st *unix.Stat_t) fs.FileInfo {
	sys := (*syscall.Stat_t)(unsafe.Pointer(st))
	mode := fs.FileMode(st.Mode & 0o777)
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		mode |= fs.ModeDir
	case unix.S_IFLNK:
		mode |= fs.ModeSymlink
	case unix.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		mode |= fs.ModeSocket
	case unix.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		mode |= fs.ModeDevice
	}
	if st.Mode&unix.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if st.Mode&unix.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if st.Mode&unix.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	return &statFileInfo{name: name, size: st.Size, mode: mode,
		mtime: time.Unix(int64(st.Mtim.Sec), int64(st.Mtim.Nsec)), sys: sys}
}

type statFileInfo struct {
	name  string
	size  int64
	mode  fs.FileMode
	mtime time.Time
	sys   *syscall.Stat_t
}

func (fi *statFileInfo) Name() string       { return fi.name }
func (fi *statFileInfo) Size() int64        { return fi.size }
func (fi *statFileInfo) Mode() fs.FileMode  { return fi.mode }
func (fi *statFileInfo) ModTime() time.Time { return fi.mtime }
func (fi *statFileInfo) IsDir() bool        { return fi.mode.IsDir() }
func (fi *statFileInfo) Sys() any           { return fi.sys }

// renameNoReplace checks, then renames (no renameat2 here).
func renameNoReplace(ofd int, oname string, nfd int, nname string) error {
	var st unix.Stat_t
	if unix.Fstatat(nfd, nname, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
		return unix.EEXIST
	}
	return unix.Renameat(ofd, oname, nfd, nname)
}
