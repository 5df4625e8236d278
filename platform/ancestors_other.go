//go:build !unix

package platform

import (
	"fmt"
	"io/fs"
)

// Ancestor is one folder above a path.
type Ancestor struct {
	Path string
	Info fs.FileInfo
}

// StatAncestors needs openat with O_NOFOLLOW, which this OS lacks here.
func StatAncestors(path string) ([]Ancestor, error) {
	return nil, fmt.Errorf("%s: %w", path, ErrUnsupported)
}
