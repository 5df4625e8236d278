//go:build !linux

package platform

import "errors"

// ErrNoReplaceUnsupported means RenameNoReplace cannot be done here.
var ErrNoReplaceUnsupported = errors.New("rename without replacing is not supported here")

// RenameNoReplace is Linux's renameat2 RENAME_NOREPLACE; elsewhere the
// caller checks for newpath first and renames.
func RenameNoReplace(oldpath, newpath string) error { return ErrNoReplaceUnsupported }
