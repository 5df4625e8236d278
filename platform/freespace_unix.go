//go:build unix

package platform

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// FreeSpace reports the bytes available to an unprivileged writer and the
// size of the filesystem holding path.
func FreeSpace(path string) (free, total uint64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, 0, fmt.Errorf("statfs %s: %w", path, err)
	}
	bs := uint64(st.Bsize) // int64 on linux, uint32 on darwin
	return uint64(st.Bavail) * bs, uint64(st.Blocks) * bs, nil
}
