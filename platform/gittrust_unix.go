//go:build unix

package platform

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
)

// Whether a git repository is one git may run in for a given user (README.md,
// "Security"): git runs what a repository's config names (filters, a
// fsmonitor, an alternate refs command) and the hooks of a repository it
// pushes into, as whoever runs it. Root therefore runs git only in a
// repository that nobody else can change, checked as sshd's StrictModes
// checks a home: every folder from / down to the repository, the repository's
// folder, its config, hooks and info (and the files in both), objects and
// objects/info (and its files) belong to root (or the user) and are writable
// by no one else. Each is read with lstat from the top down, so once a folder
// passed, nobody else can swap what is below it; a symbolic link inside the
// repository is refused, one above it is followed only where it lies in a
// folder that passed.

// UntrustedError names a path that someone other than the user git would run
// as can change, and the command that fixes it.
type UntrustedError struct {
	Path string // the path
	Why  string // what is wrong, e.g. "is group-writable (group devs)"
	Who  string // who could change it, e.g. "a member of group devs"
	Fix  string // e.g. "chmod g-w /srv/repo/.git/config"
}

func (e *UntrustedError) Error() string {
	return fmt.Sprintf("%s %s: %s could change what git runs; fix: %s", e.Path, e.Why, e.Who, e.Fix)
}

// maxTrustLinks bounds the symbolic links followed above a repository.
const maxTrustLinks = 40

// CheckGitTrusted checks that nobody but uid (and root) can change the git
// repository whose folder is gitDir (absolute), nor, when workTree is set,
// the top of its work tree (gitDir is then normally workTree/.git). A
// missing gitDir is no error when nobody else could create it. The error is
// an *UntrustedError when someone else could change something, else what
// stopped the check.
func CheckGitTrusted(uid uint32, gitDir, workTree string) error {
	top := gitDir
	if workTree != "" {
		top = workTree
	}
	if err := CheckTrustedFolder(uid, top); err != nil {
		return err
	}
	if workTree != "" {
		if _, err := trustedEntry(uid, gitDir, true); err != nil {
			return err
		}
	}
	if _, err := os.Lstat(gitDir); errors.Is(err, fs.ErrNotExist) {
		return nil // git finds no repository; nobody else can put one there
	}
	if _, err := trustedEntry(uid, filepath.Join(gitDir, "config"), false); err != nil {
		return err
	}
	for _, sub := range []struct {
		name    string
		entries bool
	}{{"hooks", true}, {"info", true}, {"objects", false}, {"objects/info", true}} {
		p := filepath.Join(gitDir, sub.name)
		fi, err := trustedEntry(uid, p, true)
		if err != nil {
			return err
		}
		if fi == nil || !sub.entries {
			continue
		}
		names, err := readNames(p)
		if err != nil {
			return err
		}
		for _, n := range names {
			if _, err := trustedEntry(uid, filepath.Join(p, n), false); err != nil {
				return err
			}
		}
	}
	return nil
}

// CheckTrustedFolder checks that dir (absolute) and every folder above it
// belong to uid or root and that nobody else can rename or replace them: not
// writable by group or others, except a folder with the sticky bit (as /tmp)
// above it, where others cannot move what they do not own. A symbolic link
// above dir is followed when the folder it is in passed; dir itself must be a
// folder (or missing, its parent having passed).
func CheckTrustedFolder(uid uint32, dir string) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("check %s: not an absolute path", dir)
	}
	rest := strings.Split(filepath.Clean(dir)[1:], "/")
	cur := "/"
	if _, err := trustedEntry(uid, "/", true); err != nil {
		return err
	}
	links := 0
	for len(rest) > 0 {
		name := rest[0]
		rest = rest[1:]
		if name == "" || name == "." {
			continue
		}
		if name == ".." {
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, name)
		fi, err := os.Lstat(next)
		if errors.Is(err, fs.ErrNotExist) {
			return nil // nobody else can create it: its parent passed
		} else if err != nil {
			return fmt.Errorf("check %s: %w", next, err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			// A link in a folder that passed: only its owner could replace
			// it (in a sticky folder), who must then be uid or root too.
			st, ok := fi.Sys().(*syscall.Stat_t)
			if !ok {
				return fmt.Errorf("check %s: no owner", next)
			}
			if st.Uid != uid && st.Uid != 0 {
				return &UntrustedError{Path: next, Why: "is a symbolic link of " + userName(st.Uid), Who: "that user",
					Fix: "replace the link with what it points to"}
			}
			if links++; links > maxTrustLinks {
				return fmt.Errorf("check %s: too many symbolic links", dir)
			}
			target, err := os.Readlink(next)
			if err != nil {
				return fmt.Errorf("check %s: %w", next, err)
			}
			if filepath.IsAbs(target) {
				cur = "/"
			}
			rest = append(strings.Split(strings.TrimPrefix(filepath.Clean(target), "/"), "/"), rest...)
			continue
		}
		if _, err := trustedInfo(uid, next, fi, true, len(rest) > 0); err != nil {
			return err
		}
		cur = next
	}
	return nil
}

// trustedEntry lstats path and checks it (trustedInfo, sticky not allowed);
// a missing path gives nil, nil.
func trustedEntry(uid uint32, path string, folder bool) (fs.FileInfo, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("check %s: %w", path, err)
	}
	return trustedInfo(uid, path, fi, folder, false)
}

// trustedInfo checks one path as lstat saw it: not a link, a folder when
// folder is set, owned by uid or root, writable by nobody else (a sticky
// folder may be, when sticky is allowed: it is above what is checked).
func trustedInfo(uid uint32, path string, fi fs.FileInfo, folder, sticky bool) (fs.FileInfo, error) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil, fmt.Errorf("check %s: no owner", path)
	}
	mode := fi.Mode()
	switch {
	case mode&fs.ModeSymlink != 0:
		return nil, &UntrustedError{Path: path, Why: "is a symbolic link", Who: "whoever controls its target",
			Fix: "replace the link with what it points to"}
	case folder && !mode.IsDir():
		return nil, fmt.Errorf("check %s: not a folder", path)
	case st.Uid != uid && st.Uid != 0:
		return nil, &UntrustedError{Path: path, Why: "belongs to " + userName(st.Uid), Who: "that user",
			Fix: fmt.Sprintf("chown %s %s", ownerArg(uid), path)}
	case sticky && mode&fs.ModeSticky != 0:
		return fi, nil
	case mode.Perm()&0o002 != 0:
		return nil, &UntrustedError{Path: path, Why: "is writable by everyone", Who: "any user",
			Fix: "chmod o-w " + path}
	case mode.Perm()&0o020 != 0:
		g := groupName(st.Gid)
		return nil, &UntrustedError{Path: path, Why: "is group-writable (group " + g + ")", Who: "a member of group " + g,
			Fix: "chmod g-w " + path}
	}
	return fi, nil
}

// readNames lists a folder's entries.
func readNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("check %s: %w", dir, err)
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("check %s: %w", dir, err)
	}
	return names, nil
}

// ownerArg is uid as chown takes it: root by name.
func ownerArg(uid uint32) string {
	if uid == 0 {
		return "root"
	}
	return fmt.Sprint(uid)
}

func userName(uid uint32) string {
	if u, err := user.LookupId(fmt.Sprint(uid)); err == nil {
		return fmt.Sprintf("uid %d (%s)", uid, u.Username)
	}
	return fmt.Sprintf("uid %d", uid)
}

func groupName(gid uint32) string {
	if g, err := user.LookupGroupId(fmt.Sprint(gid)); err == nil {
		return g.Name
	}
	return fmt.Sprint(gid)
}
