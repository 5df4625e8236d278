//go:build unix

package platform

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// ErrLocked is returned by TryLock when another process holds the lock.
var ErrLocked = errors.New("locked by another process")

// FileLock is an exclusive advisory lock (flock) on a file. The holder's pid is
// written into the file so a refused caller can say who holds it.
type FileLock struct {
	f *os.File
}

// Lock blocks until the lock on path is held.
func Lock(path string) (*FileLock, error) { return lock(path, true) }

// TryLock takes the lock on path or returns an error wrapping ErrLocked that
// names the holder's pid.
func TryLock(path string) (*FileLock, error) { return lock(path, false) }

func lock(path string, wait bool) (*FileLock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	how := syscall.LOCK_EX
	if !wait {
		how |= syscall.LOCK_NB
	}
	for {
		err = syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		holder := readPid(f)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			if holder != "" {
				return nil, fmt.Errorf("%s: %w (pid %s)", path, ErrLocked, holder)
			}
			return nil, fmt.Errorf("%s: %w", path, ErrLocked)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &FileLock{f: f}, nil
}

func readPid(f *os.File) string {
	b := make([]byte, 32)
	n, _ := f.ReadAt(b, 0)
	return strings.TrimSpace(string(b[:n]))
}

// File is the locked file: a child started with it (exec.Cmd.ExtraFiles)
// shares the lock, which then lasts until the last of them closes it or
// Unlock releases it.
func (l *FileLock) File() *os.File { return l.f }

// Unlock releases the lock and clears the pid. The file stays, so the next
// holder reuses it.
func (l *FileLock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	// A clean release clears the pid: a pid left in the file names a holder
	// that died holding it (cairn doctor reports those).
	_ = l.f.Truncate(0)
	err := syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	l.f = nil
	return err
}
