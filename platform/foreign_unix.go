//go:build unix

package platform

import (
	"bufio"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// maxAccountsFile bounds how much of /etc/group and /etc/passwd is read.
const maxAccountsFile = 16 << 20

// Accounts is who is in which group, as /etc/group (listed members) and
// /etc/passwd (each user's primary group) say, read once. A group neither
// file names, or files that could not be read, have unknown members.
type Accounts struct {
	members map[uint32][]string // gid → user names
	names   map[string]uint32   // user name → uid
	gname   map[uint32]string   // gid → group name
	err     error
	stamp   [2]accountsStamp // the two files as read
}

// accountsStamp tells a file changed since it was read.
type accountsStamp struct {
	mtime int64
	size  int64
}

var accountsFiles = [2]string{"/etc/passwd", "/etc/group"}

func stampOf(path string) accountsStamp {
	fi, err := os.Stat(path)
	if err != nil {
		return accountsStamp{}
	}
	return accountsStamp{fi.ModTime().UnixNano(), fi.Size()}
}

// Stale reports whether /etc/passwd or /etc/group changed since a was read.
func (a *Accounts) Stale() bool {
	for i, f := range accountsFiles {
		if stampOf(f) != a.stamp[i] {
			return true
		}
	}
	return false
}

// ReadAccounts reads /etc/group and /etc/passwd.
func ReadAccounts() *Accounts {
	a := &Accounts{members: map[uint32][]string{}, names: map[string]uint32{}, gname: map[uint32]string{}}
	for i, f := range accountsFiles {
		a.stamp[i] = stampOf(f)
	}
	a.err = eachLine("/etc/passwd", func(f []string) {
		if len(f) < 4 {
			return
		}
		uid, err1 := strconv.ParseUint(f[2], 10, 32)
		gid, err2 := strconv.ParseUint(f[3], 10, 32)
		if err1 != nil || err2 != nil {
			return
		}
		a.names[f[0]] = uint32(uid)
		a.members[uint32(gid)] = append(a.members[uint32(gid)], f[0])
	})
	if err := eachLine("/etc/group", func(f []string) {
		if len(f) < 4 {
			return
		}
		gid, err := strconv.ParseUint(f[2], 10, 32)
		if err != nil {
			return
		}
		a.gname[uint32(gid)] = f[0]
		for _, m := range strings.Split(f[3], ",") {
			if m = strings.TrimSpace(m); m != "" {
				a.members[uint32(gid)] = append(a.members[uint32(gid)], m)
			}
		}
	}); err != nil && a.err == nil {
		a.err = err
	}
	return a
}

// eachLine calls fn with the colon-separated fields of each line of path.
func eachLine(path string, fn func([]string)) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, maxAccountsFile))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		fn(strings.Split(line, ":"))
	}
	return sc.Err()
}

// others are the members of group gid other than uid and root, sorted;
// known is false when nothing says who its members are.
func (a *Accounts) others(gid, uid uint32) (names []string, known bool) {
	if a.err != nil {
		return nil, false
	}
	_, named := a.gname[gid]
	m, ok := a.members[gid]
	if !named && !ok {
		return nil, false
	}
	for _, n := range m {
		u, ok := a.names[n]
		if ok && (u == uid || u == 0) {
			continue
		}
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names, true
}

// groupName is gid's name, or its number.
func (a *Accounts) groupName(gid uint32) string {
	if n, ok := a.gname[gid]; ok {
		return n
	}
	return strconv.FormatUint(uint64(gid), 10)
}

// ForeignWhy says why the folder fi describes (from lstat or fstat) is
// writable by someone other than uid and root, or "" when it is not: it is
// owned by another user, writable by everyone, or writable by a group with
// another member (or members nobody knows). For an ancestor of a workspace
// (ancestor set) a sticky folder's write bits are accepted: others cannot
// rename or remove an entry they do not own there (README, "Security").
func ForeignWhy(fi fs.FileInfo, uid uint32, ancestor bool, a *Accounts) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "its owner is unknown"
	}
	return ForeignWhyOf(st.Uid, st.Gid, fi.Mode(), uid, ancestor, a)
}

// ForeignWhyOf is ForeignWhy of a folder owned by fuid:fgid with mode.
func ForeignWhyOf(fuid, fgid uint32, mode fs.FileMode, uid uint32, ancestor bool, a *Accounts) string {
	sticky := ancestor && mode&fs.ModeSticky != 0
	switch {
	case fuid != uid && fuid != 0:
		return fmt.Sprintf("owned by uid %d", fuid)
	case mode.Perm()&0o002 != 0 && !sticky:
		return "writable by everyone"
	case mode.Perm()&0o020 != 0 && !sticky:
		names, known := a.others(fgid, uid)
		switch {
		case !known:
			return fmt.Sprintf("writable by group %s (its members are unknown)", a.groupName(fgid))
		case len(names) > 0:
			return fmt.Sprintf("writable by group %s (%s)", a.groupName(fgid), strings.Join(names, ", "))
		}
	}
	return ""
}
