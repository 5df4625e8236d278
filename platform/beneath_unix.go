//go:build unix

package platform

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Tree is a folder (a workspace, an execution directory) opened once, with
// every path under it resolved beneath it and no symbolic link followed at
// any component: a folder its owner, or anyone who may write inside it,
// swaps for a link between two calls is refused (ErrThroughLink), never
// followed. On Linux each path is one openat2(2) with
// RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS; where that is missing (an older
// kernel, another OS) it is walked one component at a time with openat and
// O_NOFOLLOW from the folder's descriptor. Go's os.Root is not enough: it
// follows links that stay inside the root. README.md, "Security".
//
// A Tree may be used from several goroutines at once.
type Tree struct {
	fd   int
	path string
}

// ErrThroughLink is returned when a path under a Tree resolves through a
// symbolic link (at any component, the last included): it was not followed.
// It matches ErrLinkInPath and ErrSymlink too.
var ErrThroughLink error = throughLink{}

type throughLink struct{}

func (throughLink) Error() string { return "resolves through a symbolic link (not followed)" }
func (throughLink) Is(target error) bool {
	return target == ErrLinkInPath || target == ErrSymlink
}

// ErrNotBeneath is returned for a path that is not relative, clean and
// beneath the Tree's folder (absolute, empty, or with a ".." component).
var ErrNotBeneath = errors.New("not a clean path beneath the folder")

// openat2Off makes every resolution take the component-by-component walk:
// set when the kernel has no openat2, and by tests.
var openat2Off atomic.Bool

// walkFlags open one folder on the way, never its link.
const walkFlags = pathFlag | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC

// OpenTree opens the folder at path (O_NOFOLLOW|O_DIRECTORY: path itself
// must not be a link; the folders above it are the caller's to trust).
func OpenTree(path string) (*Tree, error) {
	path = filepath.Clean(path)
	fd, err := openat(unix.AT_FDCWD, path, dirFlags)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: linkErr(classify(unix.AT_FDCWD, path, err))}
	}
	return &Tree{fd: fd, path: path}, nil
}

// Name is the path the Tree was opened at.
func (t *Tree) Name() string { return t.path }

// Close closes the folder's descriptor.
func (t *Tree) Close() error {
	if t == nil || t.fd < 0 {
		return nil
	}
	err := unix.Close(t.fd)
	t.fd = -1
	return err
}

// Rel is abs relative to the Tree's folder, or ErrNotBeneath when abs is
// not (lexically) inside it.
func (t *Tree) Rel(abs string) (string, error) {
	rel, err := filepath.Rel(t.path, abs)
	if err != nil || splitCheck(rel) != nil {
		return "", fmt.Errorf("%s: %w %s", abs, ErrNotBeneath, t.path)
	}
	return rel, nil
}

func (t *Tree) abs(rel string) string { return filepath.Join(t.path, rel) }

func (t *Tree) pathErr(op, rel string, err error) error {
	return &os.PathError{Op: op, Path: t.abs(rel), Err: err}
}

// splitCheck refuses a path that is not relative, clean and free of "..".
func splitCheck(rel string) error {
	if rel == "." {
		return nil
	}
	if rel == "" || filepath.IsAbs(rel) || filepath.Clean(rel) != rel || rel == ".." ||
		strings.HasPrefix(rel, "../") || strings.ContainsRune(rel, 0) {
		return ErrNotBeneath
	}
	return nil
}

// open resolves rel beneath the Tree and opens it with flags (O_CLOEXEC
// added; mode for O_CREAT). Errors are bare errnos, ErrThroughLink or
// ErrNotBeneath; callers add the path.
func (t *Tree) open(rel string, flags int, mode uint32) (int, error) {
	if err := splitCheck(rel); err != nil {
		return -1, err
	}
	flags |= unix.O_CLOEXEC
	if rel == "." {
		return openatMode(t.fd, ".", flags&^(unix.O_CREAT|unix.O_EXCL), 0)
	}
	if !openat2Off.Load() {
		if fd, err, ok := openBeneath2(t.fd, rel, flags, mode); ok {
			return fd, err
		}
	}
	return walkOpen(t.fd, strings.Split(rel, "/"), flags, mode)
}

// walkOpen opens parts below dirfd one component at a time, each folder
// with O_NOFOLLOW|O_DIRECTORY and the last with O_NOFOLLOW added to flags.
func walkOpen(dirfd int, parts []string, flags int, mode uint32) (int, error) {
	fd := dirfd
	for i, name := range parts {
		var next int
		var err error
		if i == len(parts)-1 {
			next, err = openatMode(fd, name, flags|unix.O_NOFOLLOW, mode)
		} else {
			next, err = openatMode(fd, name, walkFlags, 0)
		}
		if err != nil {
			err = linkErr(classify(fd, name, err))
		}
		if fd != dirfd {
			unix.Close(fd)
		}
		if err != nil {
			return -1, err
		}
		fd = next
	}
	return fd, nil
}

// openatMode is openat with a mode, retried on EINTR.
func openatMode(dirfd int, name string, flags int, mode uint32) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, name, flags, mode)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// linkErr words a link met on the way as ErrThroughLink.
func linkErr(err error) error {
	if err == ErrLinkInPath {
		return ErrThroughLink
	}
	return err
}

// OpenFile opens rel beneath the Tree with flag and perm, as os.OpenFile.
func (t *Tree) OpenFile(rel string, flag int, perm os.FileMode) (*os.File, error) {
	fd, err := t.open(rel, flag, uint32(perm.Perm()))
	if err != nil {
		return nil, t.pathErr("open", rel, err)
	}
	return os.NewFile(uintptr(fd), t.abs(rel)), nil
}

// OpenRegular is platform.OpenRegular beneath the Tree: rel must be a
// regular file, opened without blocking on a FIFO and never through a link.
func (t *Tree) OpenRegular(rel string) (*os.File, error) {
	fd, err := t.open(rel, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, t.pathErr("open", rel, err)
	}
	return regularFile(fd, t.abs(rel))
}

// ReadFile reads rel (a regular file, at most max bytes) beneath the Tree.
func (t *Tree) ReadFile(rel string, max int64) ([]byte, error) {
	f, err := t.OpenRegular(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadCapped(f, max)
}

// Sub opens the folder rel beneath the Tree as a Tree of its own.
func (t *Tree) Sub(rel string) (*Tree, error) {
	fd, err := t.open(rel, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, t.pathErr("open", rel, err)
	}
	return &Tree{fd: fd, path: t.abs(rel)}, nil
}

// parent opens the folder holding rel (with flags) and returns its last
// component; the caller closes the descriptor.
func (t *Tree) parent(rel string, flags int) (int, string, error) {
	if err := splitCheck(rel); err != nil || rel == "." {
		return -1, "", ErrNotBeneath
	}
	dir, name := ".", rel
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		dir, name = rel[:i], rel[i+1:]
	}
	fd, err := t.open(dir, flags|unix.O_DIRECTORY, 0)
	return fd, name, err
}

// Remove removes the file or empty folder rel, as os.Remove, from its
// folder resolved beneath the Tree; a link at rel is removed itself.
func (t *Tree) Remove(rel string) error {
	pfd, name, err := t.parent(rel, pathFlag)
	if err != nil {
		return t.pathErr("remove", rel, err)
	}
	defer unix.Close(pfd)
	e1 := unix.Unlinkat(pfd, name, 0)
	if e1 == nil {
		return nil
	}
	e2 := unix.Unlinkat(pfd, name, unix.AT_REMOVEDIR)
	if e2 == nil {
		return nil
	}
	if e2 != unix.ENOTDIR {
		e1 = e2
	}
	return t.pathErr("remove", rel, e1)
}

// RemoveDir removes the empty folder rel (rmdir), resolved beneath the
// Tree: a file, a link or a folder holding anything at rel stays, and the
// error says why (ENOTDIR, ENOTEMPTY).
func (t *Tree) RemoveDir(rel string) error {
	pfd, name, err := t.parent(rel, pathFlag)
	if err != nil {
		return t.pathErr("rmdir", rel, err)
	}
	defer unix.Close(pfd)
	if err := unix.Unlinkat(pfd, name, unix.AT_REMOVEDIR); err != nil {
		return t.pathErr("rmdir", rel, err)
	}
	return nil
}

// Rename renames from to to, both beneath the Tree (renameat on their
// folders' descriptors), replacing what is at to as rename(2) does.
func (t *Tree) Rename(from, to string) error { return t.rename(from, t, to, false) }

// Move renames from beneath t to to beneath dst, refusing (fs.ErrExist)
// when to exists.
func (t *Tree) Move(from string, dst *Tree, to string) error { return t.rename(from, dst, to, true) }

func (t *Tree) rename(from string, dst *Tree, to string, noReplace bool) error {
	lerr := func(err error) error {
		return &os.LinkError{Op: "rename", Old: t.abs(from), New: dst.abs(to), Err: err}
	}
	ofd, oname, err := t.parent(from, pathFlag)
	if err != nil {
		return lerr(err)
	}
	defer unix.Close(ofd)
	nfd, nname, err := dst.parent(to, pathFlag)
	if err != nil {
		return lerr(err)
	}
	defer unix.Close(nfd)
	if noReplace {
		err = renameNoReplace(ofd, oname, nfd, nname)
	} else {
		err = unix.Renameat(ofd, oname, nfd, nname)
	}
	if err != nil {
		return lerr(err)
	}
	return nil
}

// MkdirAll creates rel and its missing parents beneath the Tree, each new
// folder with perm and given to uid:gid (uid < 0: the caller's). An
// existing component that is a link is refused, never followed.
func (t *Tree) MkdirAll(rel string, perm os.FileMode, uid, gid int) error {
	if err := splitCheck(rel); err != nil {
		return t.pathErr("mkdir", rel, err)
	}
	if rel == "." {
		return nil
	}
	const flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd := t.fd
	defer func() {
		if fd != t.fd {
			unix.Close(fd)
		}
	}()
	for _, name := range strings.Split(rel, "/") {
		next, err := openatMode(fd, name, flags, 0)
		if err == unix.ENOENT {
			if err = unix.Mkdirat(fd, name, uint32(perm.Perm())); err == nil || err == unix.EEXIST {
				made := err == nil
				next, err = openatMode(fd, name, flags, 0)
				if err == nil && made && uid >= 0 {
					err = unix.Fchown(next, uid, gid)
				}
			}
		}
		if err != nil {
			err = linkErr(classify(fd, name, err))
			if next > 0 {
				unix.Close(next)
			}
			return t.pathErr("mkdir", rel, err)
		}
		if fd != t.fd {
			unix.Close(fd)
		}
		fd = next
	}
	return nil
}

// WriteFileAtomic writes data to rel beneath the Tree through a temporary
// file created with O_EXCL in the same folder (opened once, beneath the
// Tree), given perm and uid:gid (uid < 0: the caller's), fsynced and renamed
// into place; the folder is fsynced. A link at rel is replaced, never
// written through.
func (t *Tree) WriteFileAtomic(rel string, data []byte, perm os.FileMode, uid, gid int) error {
	pfd, name, err := t.parent(rel, unix.O_RDONLY)
	if err != nil {
		return t.pathErr("write", rel, err)
	}
	defer unix.Close(pfd)
	var tmp string
	var fd int
	for i := 0; ; i++ {
		var rnd [6]byte
		_, _ = rand.Read(rnd[:])
		tmp = "." + name + ".tmp-" + hex.EncodeToString(rnd[:])
		fd, err = openatMode(pfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != unix.EEXIST || i == 10 {
			break
		}
	}
	if err != nil {
		return t.pathErr("write", rel, err)
	}
	f := os.NewFile(uintptr(fd), t.abs(rel))
	werr := func() error {
		if _, err := f.Write(data); err != nil {
			return err
		}
		if err := f.Chmod(perm); err != nil {
			return err
		}
		if uid >= 0 {
			if err := f.Chown(uid, gid); err != nil {
				return err
			}
		}
		return f.Sync()
	}()
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		if err := unix.Renameat(pfd, tmp, pfd, name); err != nil {
			werr = t.pathErr("rename into", rel, err)
		}
	}
	if werr != nil {
		_ = unix.Unlinkat(pfd, tmp, 0)
		return fmt.Errorf("write %s: %w", t.abs(rel), werr)
	}
	if err := unix.Fsync(pfd); err != nil {
		return t.pathErr("fsync folder of", rel, err)
	}
	return nil
}

// Lstat describes rel beneath the Tree without following it: a link at rel
// is described itself; a link on the way is ErrThroughLink.
func (t *Tree) Lstat(rel string) (fs.FileInfo, error) {
	fi, err := t.lstat(rel)
	if err != nil {
		return nil, t.pathErr("lstat", rel, err)
	}
	return fi, nil
}

// ReadDir lists the folder rel beneath the Tree (as os.ReadDir, unsorted):
// the entries' types are the directory's, nothing is followed.
func (t *Tree) ReadDir(rel string) ([]fs.DirEntry, error) {
	var ents []fs.DirEntry
	err := t.EachEntry(rel, func(e fs.DirEntry) { ents = append(ents, e) })
	return ents, err
}

// EachEntry calls fn for each entry of the folder rel beneath the Tree (as
// ReadDir, unsorted), reading a bounded batch at a time: a folder of any
// size costs the caller only what fn keeps.
func (t *Tree) EachEntry(rel string, fn func(fs.DirEntry)) error {
	fd, err := t.open(rel, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return t.pathErr("open", rel, err)
	}
	f := os.NewFile(uintptr(fd), t.abs(rel))
	defer f.Close()
	for {
		ents, err := f.ReadDir(1024)
		for _, e := range ents {
			fn(e)
		}
		if errors.Is(err, io.EOF) || (err == nil && len(ents) == 0) {
			return nil
		}
		if err != nil {
			return t.pathErr("readdir", rel, err)
		}
	}
}
