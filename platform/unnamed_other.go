//go:build !linux

package platform

import (
	"errors"
	"io/fs"
	"os"
)

// ErrUnnamedUnsupported means CreateUnnamed or LinkUnnamed cannot be done
// here: the caller writes a named temporary file and renames it instead.
var ErrUnnamedUnsupported = errors.New("unnamed files are not supported here")

// CreateUnnamed is Linux's O_TMPFILE; elsewhere it is unsupported.
func CreateUnnamed(dir string, perm fs.FileMode) (*os.File, error) { return nil, ErrUnnamedUnsupported }

// LinkUnnamed names a file CreateUnnamed made; elsewhere it is unsupported.
func LinkUnnamed(f *os.File, newpath string) error { return ErrUnnamedUnsupported }
