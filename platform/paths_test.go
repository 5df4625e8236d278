package platform

import "testing"

func TestPathsFor(t *testing.T) {
	t.Setenv("HOME", "/home/ann")
	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv("XDG_STATE_HOME", "/home/ann/st")
	t.Setenv("XDG_RUNTIME_DIR", "/run/user/1000")
	for _, c := range []struct {
		goos string
		mode Mode
		want Paths
	}{
		{"linux", ModeSystem, Paths{"/etc/cairn/config.toml", "/var/lib/cairn", "/run/cairn/cairn.sock", "/var/log/cairn/cairn.log"}},
		{"linux", ModeUser, Paths{"/home/ann/.config/cairn/config.toml", "/home/ann/st/cairn", "/run/user/1000/cairn/cairn.sock", "/home/ann/st/cairn/cairn.log"}},
		{"darwin", ModeSystem, Paths{"/Library/Application Support/cairn/config.toml", "/Library/Application Support/cairn", "/var/run/cairn/cairn.sock", "/Library/Logs/cairn/cairn.log"}},
		{"darwin", ModeUser, Paths{"/home/ann/Library/Application Support/cairn/config.toml", "/home/ann/Library/Application Support/cairn", "/home/ann/Library/Application Support/cairn/cairn.sock", "/home/ann/Library/Logs/cairn/cairn.log"}},
	} {
		if got := PathsFor(c.goos, c.mode); got != c.want {
			t.Errorf("PathsFor(%s, %s) = %+v, want %+v", c.goos, c.mode, got, c.want)
		}
	}
}
