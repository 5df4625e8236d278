//go:build unix

package platform

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// Reading files a workspace's owner controls, as root. The owner may put a
// symbolic link, a FIFO, a device or a huge file where cairn expects a small
// JSON file: none of them is followed, blocks, or is read whole.
//
// Writing is WriteFileAtomic(Owned) (file.go): os.CreateTemp opens its
// temporary file with O_CREATE|O_EXCL, and O_EXCL fails on any existing name,
// a symbolic link included (dangling or not), so nothing is written through a
// link; rename(2) then replaces the target's directory entry — a link or a
// hard link planted there is replaced, never written through.

// ErrNotRegular is returned when a path cairn reads is not a regular file
// (a FIFO, device, socket or folder).
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is returned when a file is larger than the limit it is read with.
var ErrTooLarge = errors.New("file too large")

// MaxRuntimeFile is the size limit for a runtime file read whole (state.json,
// its backup, runtime.lock, the archive manifest): well above any real
// state.json, low enough that a planted file cannot exhaust the daemon's memory.
var MaxRuntimeFile int64 = 64 << 20

// symlinkError is ErrSymlink for a read, with a message that says so.
type symlinkError struct{}

func (symlinkError) Error() string        { return "is a symbolic link (not followed)" }
func (symlinkError) Is(target error) bool { return target == ErrSymlink }

// OpenRegular opens path for reading only if it is a regular file. A symbolic
// link as the last component is refused (an error matching ErrSymlink), and
// anything that is not a regular file is refused with ErrNotRegular. The open
// itself never blocks: O_NONBLOCK keeps a FIFO without a writer from hanging
// it, O_NOCTTY keeps a terminal from becoming the daemon's controlling one.
// A missing file is an error matching fs.ErrNotExist.
func OpenRegular(path string) (*os.File, error) {
	const flags = syscall.O_RDONLY | syscall.O_NOFOLLOW | syscall.O_NONBLOCK | syscall.O_CLOEXEC | syscall.O_NOCTTY
	var fd int
	var err error
	for {
		fd, err = syscall.Open(path, flags, 0)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		// Linux and macOS say ELOOP for a final link under O_NOFOLLOW; some
		// BSDs say EMLINK or EFTYPE, so a failed open also looks at the name.
		if err == syscall.ELOOP {
			return nil, &fs.PathError{Op: "open", Path: path, Err: symlinkError{}}
		}
		if fi, lerr := os.Lstat(path); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return nil, &fs.PathError{Op: "open", Path: path, Err: symlinkError{}}
		}
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return regularFile(fd, path)
}

// regularFile checks that the descriptor fd (opened O_NONBLOCK) is a regular
// file, closing it if not, and returns it as a file read in blocking mode.
func regularFile(fd int, path string) (*os.File, error) {
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		syscall.Close(fd)
		return nil, &fs.PathError{Op: "fstat", Path: path, Err: err}
	}
	if kind := uint32(st.Mode) & syscall.S_IFMT; kind != syscall.S_IFREG {
		syscall.Close(fd)
		return nil, &fs.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w (%s)", ErrNotRegular, kindName(kind))}
	}
	// Ordinary blocking reads from here; os.NewFile then keeps the file out of
	// the poller, as os.Open does for a regular file.
	if err := syscall.SetNonblock(fd, false); err != nil {
		syscall.Close(fd)
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

func kindName(kind uint32) string {
	switch kind {
	case syscall.S_IFIFO:
		return "a named pipe"
	case syscall.S_IFCHR:
		return "a character device"
	case syscall.S_IFBLK:
		return "a block device"
	case syscall.S_IFSOCK:
		return "a socket"
	case syscall.S_IFDIR:
		return "a directory"
	case syscall.S_IFLNK:
		return "a symbolic link"
	}
	return fmt.Sprintf("file type %#o", kind)
}

// ReadCapped reads f (opened by OpenRegular) from its current offset to the
// end, refusing with ErrTooLarge a file whose size is over max before reading
// anything, and one that grows past max while it is read.
func ReadCapped(f *os.File, max int64) ([]byte, error) {
	if max < 0 {
		max = 0
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() > max {
		return nil, &fs.PathError{Op: "read", Path: f.Name(), Err: fmt.Errorf("%w: %d bytes, larger than the %d-byte limit", ErrTooLarge, fi.Size(), max)}
	}
	// Sized for the file as it is now; a file that grows (or a size of 0, as
	// for files in /proc) is read on, up to one byte past the limit.
	buf := make([]byte, 0, fi.Size()+512)
	r := io.LimitReader(f, max+1)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: f.Name(), Err: err}
		}
	}
	if int64(len(buf)) > max {
		return nil, &fs.PathError{Op: "read", Path: f.Name(), Err: fmt.Errorf("%w: grew larger than the %d-byte limit while read", ErrTooLarge, max)}
	}
	return buf, nil
}

// ReadFileCapped is os.ReadFile for a file a workspace's owner controls: it
// opens path with OpenRegular and reads it with ReadCapped.
func ReadFileCapped(path string, max int64) ([]byte, error) {
	f, err := OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadCapped(f, max)
}
