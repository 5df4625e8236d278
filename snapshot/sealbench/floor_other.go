//go:build !linux

package sealbench

import (
	"io/fs"
	"path/filepath"
)

// walkFloor lists every folder under root and lstats every entry that is not
// a folder, and does nothing else (one core here; see floor_linux.go).
func walkFloor(root string) (int, error) {
	n := 0
	err := filepath.WalkDir(root, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			if _, err := d.Info(); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	return n, err
}
