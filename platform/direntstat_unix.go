//go:build unix

package platform

import "golang.org/x/sys/unix"

// DirEntryStat is one name in a folder and what lstat says of it. On Linux
// a folder or a symbolic link is described by its type alone (Stat.Mode
// holds S_IFDIR or S_IFLNK, nothing else), as the folder's listing gives it:
// a walk needs no more of either, and is spared a call per folder.
type DirEntryStat struct {
	Name string
	Stat unix.Stat_t
	Err  error // lstat failed (ENOENT: the name went meanwhile)
}
