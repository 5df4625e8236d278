//go:build !unix

package sealbench

import "io/fs"

// settle is a no-op where there is no sync(2).
func settle() {}

// diskBytes is a file's size where blocks are not known.
func diskBytes(fi fs.FileInfo) int64 { return fi.Size() }
