package platform

import (
	"os"
	"path/filepath"
	"runtime"
)

// Mode says whose service cairn runs as: the machine's (root) or one user's.
type Mode int

const (
	ModeSystem Mode = iota // root, machine-wide folders
	ModeUser               // one user, that user's folders
)

func (m Mode) String() string {
	if m == ModeUser {
		return "user"
	}
	return "system"
}

// CurrentMode is system for root, user otherwise.
func CurrentMode() Mode {
	if os.Geteuid() == 0 {
		return ModeSystem
	}
	return ModeUser
}

// Paths are where a cairn daemon keeps its config, state, socket and (where
// no journal takes its output) its log, following the OS's conventions.
type Paths struct {
	Config string // the TOML config file
	State  string // stores of plain-layout workspaces, the daemon lock
	Socket string // the daemon's Unix socket
	Log    string // the log file where no journal takes stdout/stderr (SysV, launchd)
}

// PathsFor are the conventional paths of a mode on an OS ("linux", "darwin"),
// read from the environment ($XDG_*, $HOME) of the calling user.
func PathsFor(goos string, mode Mode) Paths {
	home, _ := os.UserHomeDir()
	if goos == "darwin" {
		if mode == ModeSystem {
			lib := "/Library/Application Support/cairn"
			return Paths{Config: filepath.Join(lib, "config.toml"), State: lib,
				Socket: "/var/run/cairn/cairn.sock", Log: "/Library/Logs/cairn/cairn.log"}
		}
		lib := filepath.Join(home, "Library", "Application Support", "cairn")
		return Paths{Config: filepath.Join(lib, "config.toml"), State: lib,
			Socket: filepath.Join(lib, "cairn.sock"), Log: filepath.Join(home, "Library", "Logs", "cairn", "cairn.log")}
	}
	if mode == ModeSystem {
		return Paths{Config: "/etc/cairn/config.toml", State: "/var/lib/cairn",
			Socket: "/run/cairn/cairn.sock", Log: "/var/log/cairn/cairn.log"}
	}
	config := xdg("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	state := filepath.Join(xdg("XDG_STATE_HOME", filepath.Join(home, ".local", "state")), "cairn")
	p := Paths{Config: filepath.Join(config, "cairn", "config.toml"), State: state,
		Socket: filepath.Join(state, "cairn.sock"), Log: filepath.Join(state, "cairn.log")}
	if v := os.Getenv("XDG_RUNTIME_DIR"); v != "" {
		p.Socket = filepath.Join(v, "cairn", "cairn.sock")
	}
	return p
}

// xdg is an XDG base directory: the variable if set to an absolute path, else the fallback.
func xdg(name, fallback string) string {
	if v := os.Getenv(name); filepath.IsAbs(v) {
		return v
	}
	return fallback
}

// DefaultPaths are the paths for this OS and this user's mode.
func DefaultPaths() Paths { return PathsFor(runtime.GOOS, CurrentMode()) }

// DefaultStateDir is where a daemon or command run by this user keeps stores of
// plain-layout workspaces and its own state, following the OS's conventions.
func DefaultStateDir() string {
	if v := os.Getenv("CAIRN_STATE_DIR"); v != "" {
		return v
	}
	return DefaultPaths().State
}

// DefaultSocket is the daemon's socket: /run/cairn for root on Linux, the
// user's runtime directory otherwise, else beside the state.
func DefaultSocket(stateDir string) string {
	if v := os.Getenv("CAIRN_SOCKET"); v != "" {
		return v
	}
	p := DefaultPaths()
	if CurrentMode() == ModeSystem || os.Getenv("XDG_RUNTIME_DIR") != "" && runtime.GOOS == "linux" {
		return p.Socket
	}
	return filepath.Join(stateDir, "cairn.sock")
}

// SelfUID is this process's effective uid.
func SelfUID() uint32 { return uint32(os.Geteuid()) }
