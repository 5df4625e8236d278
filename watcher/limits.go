package watcher

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// LimitError is a kernel limit that stopped a watch: which limit, its current
// value and how to raise it. It unwraps to the errno (syscall.ENOSPC or
// syscall.EMFILE).
type LimitError struct {
	Path   string // the folder that could not be watched
	Sysctl string // fs.inotify.max_user_watches or fs.inotify.max_user_instances
	Value  int    // the limit's current value, -1 if unknown
	Err    error
}

func (e *LimitError) Error() string {
	cur := "unknown"
	if e.Value >= 0 {
		cur = strconv.Itoa(e.Value)
	}
	what, raise := "inotify watch limit", "524288"
	if e.Sysctl == sysctlInstances {
		what, raise = "inotify instance or open-file limit", "1024"
	}
	return fmt.Sprintf("%s reached (%s = %s, %v) watching %s: folders from there on are not watched; "+
		"raise it with `sysctl -w %s=%s` (persist it in /etc/sysctl.d/)",
		what, e.Sysctl, cur, e.Err, e.Path, e.Sysctl, raise)
}

func (e *LimitError) Unwrap() error { return e.Err }

const (
	sysctlWatches   = "fs.inotify.max_user_watches"
	sysctlInstances = "fs.inotify.max_user_instances"
)

// asLimit returns the LimitError that err stands for, or nil when err is not a
// kernel limit. ENOSPC from inotify_add_watch is the per-user watch limit;
// EMFILE comes from the per-user instance limit or the process's open files.
func asLimit(path string, err error) *LimitError {
	var sysctl string
	switch {
	case errors.Is(err, syscall.ENOSPC):
		sysctl = sysctlWatches
	case errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE):
		sysctl = sysctlInstances
	default:
		return nil
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		err = errno // drop fsnotify's wrapping: the path is in the message already
	}
	return &LimitError{Path: path, Sysctl: sysctl, Value: readSysctl(sysctl), Err: err}
}

// readSysctl reads an integer sysctl from /proc/sys; -1 when it cannot.
func readSysctl(name string) int {
	b, err := os.ReadFile("/proc/sys/" + strings.ReplaceAll(name, ".", "/"))
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return -1
	}
	return n
}
