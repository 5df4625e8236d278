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
// checkout), named with tag (TempPrefix), and renamed over rel. A folder at
// rel is removed first when it is empty; one that is not fails (ENOTEMPTY,
// EISDIR).
func (t *Tree) ReplaceFile(rel string, data []byte, perm os.FileMode, tag string) error {
	return t.replace(rel, "write", tag, func(pfd int, tmp string) error {
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

// Rewrite writes data over the regular file at rel in place, when that is
// as safe as replacing it and allocates nothing, and reports whether it
// did. A file replaced by a rename costs its new blocks at once (ext4, as
// most file systems that delay allocation, allocates them and starts their
// write-back when a rename replaces a file); one rewritten in the blocks it
// already has costs a copy into the page cache. So rel is rewritten only
// when, on the descriptor opened (its folder resolved beneath the Tree, no
// link followed, rel itself never opened unless it was a regular file):
//
//   - it is a regular file with one link (another name for it keeps its
//     content, as git's unlink and create leave it),
//   - the process owns it and its owner may write it (mode 0200): nothing
//     of another user's, and no read-only file, is written through,
//   - its owner-execute bit is exec (a mode change is a new file),
//   - the blocks it holds take data (st_blocks*512 >= len(data)): the write
//     needs no new block, so a full disk cannot tear it halfway.
//
// Otherwise, or when the write or the truncation fails, it returns false
// and the caller replaces rel (ReplaceFile), which writes the whole file
// anew. Unlike a replacement, a process holding rel open sees the new
// content, and a reader may see it half written: as after git's checkout,
// which unlinks and recreates. The file keeps its inode, owner and
// permission bits (git's checkout gives a new file 0666 under the umask).
func (t *Tree) Rewrite(rel string, data []byte, exec bool) bool {
	pfd, name, err := t.parent(rel, pathFlag)
	if err != nil {
		return false
	}
	defer unix.Close(pfd)
	var before unix.Stat_t
	if unix.Fstatat(pfd, name, &before, unix.AT_SYMLINK_NOFOLLOW) != nil || !rewritable(&before, len(data), exec) {
		return false
	}
	// O_NONBLOCK: should a FIFO stand there by now, the open does not
	// wait for a reader (and the check below refuses it).
	fd, err := openatMode(pfd, name, unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Dev != before.Dev || st.Ino != before.Ino || !rewritable(&st, len(data), exec) {
		return false
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		return false
	}
	return f.Truncate(int64(len(data))) == nil
}

// rewritable is Rewrite's test of the file st describes.
func rewritable(st *unix.Stat_t, size int, exec bool) bool {
	return st.Mode&unix.S_IFMT == unix.S_IFREG && st.Nlink == 1 &&
		int(st.Uid) == os.Geteuid() && st.Mode&0o200 != 0 &&
		(st.Mode&0o100 != 0) == exec && int64(st.Blocks)*512 >= int64(size)
}

// ReplaceSymlink makes rel a symbolic link to target (the link itself; the
// target is never looked at) through a temporary link, named with tag
// (TempPrefix), renamed over rel.
func (t *Tree) ReplaceSymlink(rel, target, tag string) error {
	return t.replace(rel, "symlink", tag, func(pfd int, tmp string) error {
		return unix.Symlinkat(target, pfd, tmp)
	})
}

// replace makes a new entry with mk under a temporary name in rel's folder
// and renames it over rel.
func (t *Tree) replace(rel, op, tag string, mk func(pfd int, tmp string) error) error {
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
		tmp = TempPrefix + strconv.FormatUint(rand.Uint64()>>16, 36)
		if tag != "" {
			tmp = TempPrefix + tag + "-" + tmp[len(TempPrefix):]
		}
		err = mk(pfd, tmp)
		if err != unix.EEXIST || i == 10 {
			break
		}
	}
	if err != nil {
		_ = unix.Unlinkat(pfd, tmp, 0)
		return t.pathErr(op, rel, err)
	}
	faultPoint("temp-made")
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
