package gitobj

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cairn-dev/cairn/platform"
)

// ErrRefMoved means the ref did not hold the value a compare-and-swap
// expected: another writer moved it. Nothing was written.
var ErrRefMoved = errors.New("ref moved")

// ErrRefLocked means <ref>.lock exists: another writer is moving the ref.
var ErrRefLocked = errors.New("ref locked")

// ReadRef reads a full ref name from the files backend: the loose file, else
// packed-refs. ok is false when the ref does not exist. A symbolic ref or
// anything unexpected is an error: the caller lets git answer.
//
// A Hankweave store lies in a folder its user controls: neither file is
// followed through a link, waited on (a FIFO) or read past a bound.
func ReadRef(gitDir, ref string) (id string, ok bool, err error) {
	b, err := platform.ReadFileCapped(filepath.Join(gitDir, filepath.FromSlash(ref)), 4<<10)
	switch {
	case err == nil:
		v := strings.TrimSpace(string(b))
		if !IsHex(v) {
			return "", false, fmt.Errorf("ref %s: not an object id: %q", ref, v)
		}
		return v, true, nil
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
	case errors.Is(err, syscall.EISDIR) || errors.Is(err, platform.ErrNotRegular) && isDir(filepath.Join(gitDir, filepath.FromSlash(ref))):
		return "", false, nil // a folder of refs, not a ref
	default:
		return "", false, err
	}
	f, err := platform.OpenRegular(filepath.Join(gitDir, "packed-refs"))
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	} else if err != nil {
		return "", false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, name, found := strings.Cut(sc.Text(), " "); found && name == ref && IsHex(v) {
			return v, true, nil
		}
	}
	return "", false, sc.Err()
}

// IsHex reports whether s is a full object id in lower-case hex (SHA-1 or SHA-256).
func IsHex(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// Reflog is the entry a ref update appends to the ref's log.
type Reflog struct {
	Ident   string    // "Name <email>"
	When    time.Time // written with its zone's offset
	Message string
	// Create makes the log when it does not exist (core.logAllRefUpdates
	// covers the ref); otherwise an entry is written only to an existing log.
	Create bool
}

// RefLock is a ref's <ref>.lock, taken and holding the new value, until
// Commit renames it over the ref or Release removes it.
type RefLock struct {
	gitDir, ref, path, lock, newID string
	done                           bool
}

// LockPath is the lock file, for a caller that flushes it with others.
func (l *RefLock) LockPath() string { return l.lock }

// LockRef creates <ref>.lock exclusively and writes newID into it, fsynced
// when sync is set. Without it the caller must flush the file system before
// Commit, as a seal does once for its objects and the lock together. A lock
// at least staleAge old is taken for a crashed writer's and removed (0: any).
func LockRef(gitDir, ref, newID string, staleAge time.Duration, sync bool) (*RefLock, error) {
	if !IsHex(newID) || !strings.HasPrefix(ref, "refs/") || strings.Contains(ref, "..") {
		return nil, fmt.Errorf("update %s: bad arguments", ref)
	}
	path := filepath.Join(gitDir, filepath.FromSlash(ref))
	lock := path + ".lock"
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("update %s: %w", ref, err)
	}
	f, err := os.OpenFile(lock, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		if fi, serr := os.Lstat(lock); serr == nil && time.Since(fi.ModTime()) >= staleAge {
			os.Remove(lock)
			f, err = os.OpenFile(lock, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		}
	}
	if errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("update %s: %w: %s exists (another writer?)", ref, ErrRefLocked, lock)
	} else if err != nil {
		return nil, fmt.Errorf("update %s: %w", ref, err)
	}
	_, err = f.Write([]byte(newID + "\n"))
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(lock)
		return nil, fmt.Errorf("update %s: %w", ref, err)
	}
	return &RefLock{gitDir: gitDir, ref: ref, path: path, lock: lock, newID: newID}, nil
}

// Commit compares the ref's current value (loose, else packed) with oldID,
// appends the reflog entry and renames the lock over the ref; renamed, when
// set, is called right after. On a mismatch it returns ErrRefMoved and the
// ref is untouched (Release removes the lock).
func (l *RefLock) Commit(oldID string, log *Reflog, renamed func()) error {
	if l.done {
		return fmt.Errorf("update %s: lock already released", l.ref)
	}
	if !IsHex(oldID) {
		return fmt.Errorf("update %s: bad arguments", l.ref)
	}
	cur, exists, err := ReadRef(l.gitDir, l.ref)
	if err != nil {
		return fmt.Errorf("update %s: %w", l.ref, err)
	}
	zero := strings.Trim(oldID, "0") == ""
	if zero && exists || !zero && cur != oldID {
		have := cur
		if !exists {
			have = "nothing"
		}
		want := oldID
		if zero {
			want = "nothing"
		}
		return fmt.Errorf("update %s: %w: it holds %s, expected %s", l.ref, ErrRefMoved, have, want)
	}
	if log != nil {
		if err := appendReflog(l.gitDir, l.ref, oldID, l.newID, log); err != nil {
			return fmt.Errorf("update %s: reflog: %w", l.ref, err)
		}
	}
	if err := os.Rename(l.lock, l.path); err != nil {
		return fmt.Errorf("update %s: %w", l.ref, err)
	}
	l.done = true
	if renamed != nil {
		renamed()
	}
	return nil
}

// Release removes the lock unless Commit renamed it; safe to call twice.
func (l *RefLock) Release() {
	if l != nil && !l.done {
		os.Remove(l.lock)
		l.done = true
	}
}

// appendReflog writes one line as git's files backend does:
// "<old> <new> <ident> <unix time> <±hhmm>\t<message>\n".
func appendReflog(gitDir, ref, oldID, newID string, log *Reflog) error {
	path := filepath.Join(gitDir, "logs", filepath.FromSlash(ref))
	// Never through a link or into a FIFO planted in the store's folders.
	flags := os.O_WRONLY | os.O_APPEND | platform.NoFollow | syscall.O_NONBLOCK
	if log.Create {
		flags |= os.O_CREATE
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if errors.Is(err, fs.ErrNotExist) && !log.Create {
		return nil
	} else if err != nil {
		return err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return fmt.Errorf("reflog %s: not a regular file", path)
	}
	_, off := log.When.Zone()
	sign := '+'
	if off < 0 {
		sign, off = '-', -off
	}
	line := fmt.Sprintf("%s %s %s %d %c%02d%02d\t%s\n", oldID, newID, log.Ident, log.When.Unix(), sign, off/3600, off%3600/60, reflogMessage(log.Message))
	// Not fsynced, as git does not: the ledger's fsync after the seal
	// commits the file system's journal.
	_, err = f.Write([]byte(line))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// reflogMessage normalizes a message as git's copy_reflog_msg does: leading
// white space dropped, each run of it one space, trailing white space cut.
func reflogMessage(msg string) string {
	var b bytes.Buffer
	wasSpace := true
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		sp := c == ' ' || c == '\t' || c == '\n' || c == '\r' // git's isspace
		if wasSpace && sp {
			continue
		}
		wasSpace = sp
		if sp {
			c = ' '
		}
		b.WriteByte(c)
	}
	return strings.TrimRight(b.String(), " ")
}

func isDir(path string) bool {
	fi, err := os.Lstat(path)
	return err == nil && fi.IsDir()
}
