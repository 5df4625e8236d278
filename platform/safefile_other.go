//go:build !unix

package platform

import (
	"errors"
	"os"
)

// ErrNotRegular is returned when a path cairn reads is not a regular file.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is returned when a file is larger than the limit it is read with.
var ErrTooLarge = errors.New("file too large")

// MaxRuntimeFile is the size limit for a runtime file read whole.
var MaxRuntimeFile int64 = 64 << 20

// OpenRegular, ReadCapped and ReadFileCapped are not available here: cairn
// runs on Linux and macOS only.
func OpenRegular(path string) (*os.File, error)             { return nil, ErrUnsupported }
func ReadCapped(f *os.File, max int64) ([]byte, error)      { return nil, ErrUnsupported }
func ReadFileCapped(path string, max int64) ([]byte, error) { return nil, ErrUnsupported }
