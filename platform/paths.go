package platform

import (
	"os"
	"path/filepath"
	"runtime"
)

// DefaultStateDir is where a daemon or command run by this user keeps stores of
// plain-layout workspaces and its own state, following the OS's conventions.
func DefaultStateDir() string {
	if v := os.Getenv("CAIRN_STATE_DIR"); v != "" {
		return v
	}
	if os.Geteuid() == 0 && runtime.GOOS == "linux" {
		return "/var/lib/cairn"
	}
	home, _ := os.UserHomeDir()
	if runtime.GOOS == "darwin" {
		return filepath.Join(home, "Library", "Application Support", "cairn")
	}
	if v := os.Getenv("XDG_STATE_HOME"); v != "" {
		return filepath.Join(v, "cairn")
	}
	return filepath.Join(home, ".local", "state", "cairn")
}

// DefaultSocket is the daemon's socket: /run/cairn for root on Linux, the
// user's runtime directory otherwise, else beside the state.
func DefaultSocket(stateDir string) string {
	if v := os.Getenv("CAIRN_SOCKET"); v != "" {
		return v
	}
	if os.Geteuid() == 0 && runtime.GOOS == "linux" {
		return "/run/cairn/cairn.sock"
	}
	if v := os.Getenv("XDG_RUNTIME_DIR"); v != "" && runtime.GOOS == "linux" {
		return filepath.Join(v, "cairn", "cairn.sock")
	}
	return filepath.Join(stateDir, "cairn.sock")
}
