//go:build !unix

package platform

import (
	"errors"
	"io/fs"
	"os"
)

// Tree resolves paths beneath a folder without following links; it needs
// openat with O_NOFOLLOW, which this OS lacks here.
type Tree struct{ path string }

// ErrThroughLink is returned when a path resolves through a symbolic link.
var ErrThroughLink = errors.New("resolves through a symbolic link (not followed)")

// ErrNotBeneath is returned for a path that is not beneath the folder.
var ErrNotBeneath = errors.New("not a clean path beneath the folder")

func OpenTree(path string) (*Tree, error)                                   { return nil, ErrUnsupported }
func (t *Tree) Name() string                                                { return t.path }
func (t *Tree) Close() error                                                { return nil }
func (t *Tree) Rel(abs string) (string, error)                              { return "", ErrUnsupported }
func (t *Tree) OpenFile(string, int, os.FileMode) (*os.File, error)         { return nil, ErrUnsupported }
func (t *Tree) OpenRegular(string) (*os.File, error)                        { return nil, ErrUnsupported }
func (t *Tree) ReadFile(string, int64) ([]byte, error)                      { return nil, ErrUnsupported }
func (t *Tree) Sub(string) (*Tree, error)                                   { return nil, ErrUnsupported }
func (t *Tree) Remove(string) error                                         { return ErrUnsupported }
func (t *Tree) RemoveDir(string) error                                      { return ErrUnsupported }
func (t *Tree) Rename(string, string) error                                 { return ErrUnsupported }
func (t *Tree) Move(string, *Tree, string) error                            { return ErrUnsupported }
func (t *Tree) MkdirAll(string, os.FileMode, int, int) error                { return ErrUnsupported }
func (t *Tree) WriteFileAtomic(string, []byte, os.FileMode, int, int) error { return ErrUnsupported }
func (t *Tree) ReplaceFile(string, []byte, os.FileMode, string) error       { return ErrUnsupported }
func (t *Tree) Rewrite(string, []byte, bool) bool                           { return false }
func (t *Tree) ReplaceSymlink(string, string, string) error                 { return ErrUnsupported }
func (t *Tree) Lstat(string) (fs.FileInfo, error)                           { return nil, ErrUnsupported }
func (t *Tree) ReadDir(string) ([]fs.DirEntry, error)                       { return nil, ErrUnsupported }
func (t *Tree) EachEntry(string, func(fs.DirEntry)) error                   { return ErrUnsupported }
