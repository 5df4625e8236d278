//go:build unix

package platform

import (
	"os"
	"syscall"
)

// OwnerUID is the uid owning path.
func OwnerUID(path string) (uint32, bool) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return st.Uid, true
}
