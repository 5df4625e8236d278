//go:build !unix

package platform

// FreeSpace is not available here: cairn runs only on Linux and macOS.
func FreeSpace(path string) (free, total uint64, err error) {
	return 0, 0, ErrUnsupported
}
