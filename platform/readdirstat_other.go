//go:build unix && !linux

package platform

import (
	"os"

	"golang.org/x/sys/unix"
)

// ReadDirStat lists the folder rel beneath the Tree (resolved as every path
// of a Tree is: no link followed) and describes each entry as lstat does,
// from the folder's own descriptor (fstatat, AT_SYMLINK_NOFOLLOW): a link
// is described, never followed, and no path is resolved again per entry.
// It is a walk's one step: a folder opened once, its names, their stats.
func (t *Tree) ReadDirStat(rel string) ([]DirEntryStat, error) {
	fd, err := t.open(rel, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, t.pathErr("open", rel, err)
	}
	f := os.NewFile(uintptr(fd), t.abs(rel))
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, t.pathErr("readdir", rel, err)
	}
	out := make([]DirEntryStat, len(names))
	for i, n := range names {
		out[i].Name = n
		for {
			err = unix.Fstatat(fd, n, &out[i].Stat, unix.AT_SYMLINK_NOFOLLOW)
			if err != unix.EINTR {
				break
			}
		}
		if err != nil {
			out[i].Err = err
		}
	}
	return out, nil
}
