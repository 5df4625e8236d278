//go:build unix && !linux

package platform

import (
	"os"

	"golang.org/x/sys/unix"
)

// ScanDir lists the folder rel beneath the Tree (resolved as every path of
// a Tree is: no link followed) and calls fn for each entry with what lstat
// says of it, from the folder's own descriptor (fstatat,
// AT_SYMLINK_NOFOLLOW): a link is described, never followed, and no path is
// resolved again per entry; err is the stat's error (ENOENT: the name went
// meanwhile). st is valid during the call only.
func (t *Tree) ScanDir(rel string, fn func(name string, st *unix.Stat_t, err error)) error {
	fd, err := t.open(rel, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return t.pathErr("open", rel, err)
	}
	f := os.NewFile(uintptr(fd), t.abs(rel))
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return t.pathErr("readdir", rel, err)
	}
	var st unix.Stat_t
	for _, n := range names {
		st = unix.Stat_t{}
		for {
			err = unix.Fstatat(fd, n, &st, unix.AT_SYMLINK_NOFOLLOW)
			if err != unix.EINTR {
				break
			}
		}
		fn(n, &st, err)
	}
	return nil
}
