//go:build unix

package platform

import (
	"math/rand/v2"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Replacing a work-tree entry the way a checkout does, beneath the Tree and
// never through a link: the new file or link is made under a temporary name
// in the same folder (that folder resolved beneath the Tree, O_EXCL, never
// following a link at the temporary name) and renamed over what is at rel.
// A reader never sees a half-written file, and whatever stood at rel (a
// file, a link, a FIFO, an empty folder) is replaced, never written
// through. Nothing is fsynced, as git's checkout does not: a restore keeps
// the work tree it replaced in its pre-restore checkpoint.

// ReplaceFile writes data to rel through a temporary file created with
// perm (0o666 or 0o777: the process's umask applies, as it does to git's
// checkout) and renamed over rel. A folder at rel is removed first when it
// is empty; one that is not fails (ENOTEMPTY, EISDIR).
func (t *Tree) ReplaceFile(rel string, data []byte, perm os.FileMode) error {
	return t.replace(rel, "write", func(pfd int, tmp string) error {
		fd, err := openatMode(pfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm.Perm()))
		if err != nil {
			return err
		}
		f := os.NewFile(uintptr(fd), tmp)
		_, werr := f.Write(data)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		return werr
	})
}

// ReplaceSymlink makes rel a symbolic link to target (the link itself; the
// target is never looked at) through a temporary link renamed over rel.
func (t *Tree) ReplaceSymlink(rel, target string) error {
	return t.replace(rel, "symlink", func(pfd int, tmp string) error {
		return unix.Symlinkat(target, pfd, tmp)
	})
}

// replace makes a new entry with mk under a temporary name in rel's folder
// and renames it over rel.
func (t *Tree) replace(rel, op string, mk func(pfd int, tmp string) error) error {
	pfd, name, err := t.parent(rel, pathFlag)
	if err != nil {
		return t.pathErr(op, rel, err)
	}
	defer unix.Close(pfd)
	var tmp string
	for i := 0; ; i++ {
		// A short name of its own (rel's may be as long as a name can be),
		// only new (O_EXCL, or symlinkat, checks it): the runtime's
		// generator, not the kernel's.
		tmp = ".cairn-" + strconv.FormatUint(rand.Uint64()>>16, 36)
		err = mk(pfd, tmp)
		if err != unix.EEXIST || i == 10 {
			break
		}
	}
	if err != nil {
		_ = unix.Unlinkat(pfd, tmp, 0)
		return t.pathErr(op, rel, err)
	}
	err = unix.Renameat(pfd, tmp, pfd, name)
	if err == unix.EISDIR || err == unix.ENOTEMPTY || err == unix.EEXIST {
		// A folder where the new entry goes: gone if it is empty (a
		// checkout emptied it), else it stays and the write fails.
		if rerr := unix.Unlinkat(pfd, name, unix.AT_REMOVEDIR); rerr == nil {
			err = unix.Renameat(pfd, tmp, pfd, name)
		} else if rerr == unix.ENOTEMPTY || rerr == unix.EEXIST {
			err = rerr
		}
	}
	if err != nil {
		_ = unix.Unlinkat(pfd, tmp, 0)
		return t.pathErr(op, rel, err)
	}
	return nil
}
