package platform

import (
	"encoding/binary"
	"sync"

	"golang.org/x/sys/unix"
)

// direntBufs are getdents64 buffers, reused across folders.
var direntBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// ScanDir lists the folder rel beneath the Tree (resolved as every path of
// a Tree is: no link followed) and calls fn for each entry with what lstat
// says of it, from the folder's own descriptor (fstatat,
// AT_SYMLINK_NOFOLLOW): a link is described, never followed, and no path is
// resolved again per entry. A folder or a link is described by its type
// alone (st.Mode holds S_IFDIR or S_IFLNK, nothing else), as the listing
// gives it: a walk needs no more of either. An entry whose type the file
// system does not give is stat'ed as any other; err is the stat's error
// (ENOENT: the name went meanwhile). st is valid during the call only. It is
// a walk's one step: a folder opened once, its names read straight from
// getdents64, their stats.
func (t *Tree) ScanDir(rel string, fn func(name string, st *unix.Stat_t, err error)) error {
	fd, err := t.open(rel, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return t.pathErr("open", rel, err)
	}
	defer unix.Close(fd)
	bp := direntBufs.Get().(*[]byte)
	defer direntBufs.Put(bp)
	buf := *bp
	var st unix.Stat_t
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return t.pathErr("readdir", rel, err)
		}
		if n <= 0 {
			return nil
		}
		for b := buf[:n]; len(b) > 0; {
			name, typ, reclen, ok := parseDirent(b)
			if !ok {
				return t.pathErr("readdir", rel, unix.EIO)
			}
			b = b[reclen:]
			if name == "." || name == ".." {
				continue
			}
			st = unix.Stat_t{}
			switch typ {
			case unix.DT_DIR:
				st.Mode = unix.S_IFDIR
				fn(name, &st, nil)
				continue
			case unix.DT_LNK:
				st.Mode = unix.S_IFLNK
				fn(name, &st, nil)
				continue
			}
			for {
				err = unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
				if err != unix.EINTR {
					break
				}
			}
			fn(name, &st, err)
		}
	}
}

// parseDirent reads the first linux_dirent64 record of b: d_ino (8 bytes),
// d_off (8), d_reclen (2), d_type (1), then the name, NUL-terminated.
func parseDirent(b []byte) (name string, typ uint8, reclen int, ok bool) {
	const head = 19 // offsetof(d_name)
	if len(b) < head {
		return "", 0, 0, false
	}
	reclen = int(binary.NativeEndian.Uint16(b[16:18]))
	if reclen < head || reclen > len(b) {
		return "", 0, 0, false
	}
	typ = b[18]
	nb := b[head:reclen]
	for i, c := range nb {
		if c == 0 {
			return string(nb[:i]), typ, reclen, true
		}
	}
	return "", 0, 0, false
}
