//go:build unix

package platform

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// InfoOwner is the uid owning the file fi describes (from an Lstat or Stat).
func InfoOwner(fi os.FileInfo) (uint32, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return st.Uid, true
}

// OwnerUID is the uid owning path.
func OwnerUID(path string) (uint32, bool) {
	uid, _, ok := Owner(path)
	return uid, ok
}

// Owner is the uid and gid owning path (following a final symlink).
func Owner(path string) (uid, gid uint32, ok bool) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, 0, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return st.Uid, st.Gid, true
}

// ErrSymlink is returned when cairn refuses to write through a symbolic link
// inside a workspace: a root daemon must not follow links its owner planted.
var ErrSymlink = errors.New("refusing to write through a symbolic link")

// NoFollow is the open flag that refuses a symbolic link as the last component.
const NoFollow = syscall.O_NOFOLLOW

// MkdirAllNoFollow is os.MkdirAll that refuses an existing component that is
// a symbolic link, so it never creates folders through one.
func MkdirAllNoFollow(path string, perm os.FileMode) error {
	path = filepath.Clean(path)
	fi, err := os.Lstat(path)
	if err == nil {
		if fi.IsDir() {
			return nil
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("%s: %w", path, ErrSymlink)
		}
		return fmt.Errorf("mkdir %s: not a directory", path)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if parent := filepath.Dir(path); parent != path {
		if err := MkdirAllNoFollow(parent, perm); err != nil {
			return err
		}
	}
	if err := os.Mkdir(path, perm); err != nil {
		if errors.Is(err, fs.ErrExist) {
			if fi, err := os.Lstat(path); err == nil && fi.IsDir() {
				return nil
			}
		}
		return err
	}
	return nil
}

// NoSymlinkBelow checks that no component of path below base (base itself
// excluded, path's last component included when last) is a symbolic link.
// Missing components end the check: whatever is created later is created by
// cairn. It narrows, not closes, the window in which an owner could swap a
// folder for a link; git does the same check before it writes.
func NoSymlinkBelow(base, path string, last bool) error {
	rel, err := filepath.Rel(base, path)
	if err != nil || rel == "." {
		return err
	}
	cur := base
	parts := strings.Split(filepath.ToSlash(rel), "/")
	for i, p := range parts {
		if i == len(parts)-1 && !last {
			break
		}
		cur = filepath.Join(cur, p)
		fi, err := os.Lstat(cur)
		if err != nil {
			return nil
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("%s: %w", cur, ErrSymlink)
		}
	}
	return nil
}
