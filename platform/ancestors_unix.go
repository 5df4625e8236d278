//go:build unix

package platform

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Ancestor is one folder above a path, as its descriptor says.
type Ancestor struct {
	Path string
	Info fs.FileInfo
}

// StatAncestors describes every folder from "/" down to path's parent, each
// opened relative to the one above it with O_NOFOLLOW (searching, not
// reading: a folder its caller may only enter is described too) and read
// with fstat. A component that is a symbolic link ends it with ErrLinkInPath.
func StatAncestors(path string) ([]Ancestor, error) {
	if !filepath.IsAbs(path) || filepath.Clean(path) != path {
		return nil, fmt.Errorf("%s: not an absolute, clean path", path)
	}
	fd, err := openat(unix.AT_FDCWD, "/", searchFlags)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: "/", Err: err}
	}
	cur := "/"
	var out []Ancestor
	parts := strings.Split(strings.TrimPrefix(filepath.Dir(path), "/"), "/")
	for i := 0; ; i++ {
		f := os.NewFile(uintptr(fd), cur)
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, err
		}
		out = append(out, Ancestor{Path: cur, Info: fi})
		if i >= len(parts) || parts[i] == "" {
			f.Close()
			return out, nil
		}
		next, err := openat(int(f.Fd()), parts[i], searchFlags)
		if err != nil {
			err = classify(int(f.Fd()), parts[i], err)
		}
		f.Close()
		cur = filepath.Join(cur, parts[i])
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: cur, Err: err}
		}
		fd = next
	}
}
