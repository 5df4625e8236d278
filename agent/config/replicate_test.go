package config

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/agent/replicate"
)

func TestReplicateConfig(t *testing.T) {
	src := `
[defaults]
layout = "auto"

[defaults.replicate]
remote = "ssh://git@fleet.example/cairn.git"
interval = "30s"
ssh_command = "ssh -i /etc/cairn/fleet_key -o BatchMode=yes"

[[watch]]
path = "/srv/runs/*"

[watch.replicate]
host = "build-7.eu"
push_user = "ci"

[[watch]]
path = "/srv/quiet/*"

[watch.replicate]
enabled = false
`
	c, err := Parse("cairn.toml", src)
	if err != nil {
		t.Fatal(err)
	}
	def := c.Defaults.Merge(DefaultSettings())
	runs := c.Watch[0].Settings.Merge(def)
	r := runs.Replicate
	if r.Remote != "ssh://git@fleet.example/cairn.git" || r.Host != "build-7.eu" || r.Every() != 30*time.Second ||
		r.PushUser != "ci" || r.SSHCommand != "ssh -i /etc/cairn/fleet_key -o BatchMode=yes" || !r.On() {
		t.Errorf("merged replicate %+v", r)
	}
	if q := c.Watch[1].Settings.Merge(def).Replicate; q.On() || q.Remote == "" {
		t.Errorf("enabled = false: %+v", q)
	}
	if d := DefaultSettings().Replicate; d.On() || d.Every() != 10*time.Second {
		t.Errorf("default replicate %+v", d)
	}
	if h := def.Replicate.HostName(); h == "" {
		t.Errorf("no default host")
	} else if _, err := replicate.Host(h); err != nil {
		t.Errorf("default host: %v", err)
	}
	// Settings travel to workers as JSON.
	raw, err := json.Marshal(runs)
	if err != nil {
		t.Fatal(err)
	}
	var back Settings
	if err := json.Unmarshal(raw, &back); err != nil || !back.Equal(runs) {
		t.Errorf("settings through JSON: %s → %+v (%v)", raw, back, err)
	}

	// A [[watch]] entry may turn it on with the defaults' remote.
	on := "[defaults.replicate]\nremote = \"file:///srv/fleet.git\"\nenabled = false\n[[watch]]\npath = \"/w/*\"\n[watch.replicate]\nenabled = true\n"
	if _, err := Parse("cairn.toml", on); err != nil {
		t.Errorf("enabled in a watch with the defaults' remote: %v", err)
	}

	for _, tc := range []struct {
		name, src string
		line      int
		reason    string
	}{
		{"bad host", "[defaults]\n[defaults.replicate]\nremote = \"file:///r.git\"\nhost = \"a/b\"\n", 4, "cannot name a ref"},
		{"host with dots", "[defaults.replicate]\nremote = \"file:///r.git\"\n\nhost = \"..x\"\n", 4, "cannot name a ref"},
		{"option as remote", "[defaults.replicate]\nremote = \"--upload-pack=evil\"\n", 2, "cannot start with '-'"},
		{"password in an ssh URL", "[defaults.replicate]\nremote = \"ssh://git:pw@host/r.git\"\n", 2, "never used by git"},
		{"enabled without remote", "[defaults.replicate]\nenabled = true\n", 2, "needs a remote"},
		{"short interval", "[defaults.replicate]\nremote = \"file:///r.git\"\ninterval = \"1ms\"\n", 3, "too short"},
		{"unknown key", "[defaults.replicate]\nremote = \"file:///r.git\"\nbranch = \"x\"\n", 3, "unknown key"},
		{"in a watch", "[[watch]]\npath = \"/srv/*\"\n[watch.replicate]\nremote = \"file:///r.git\"\nhost = \"bad host\"\n", 5, "cannot name a ref"},
	} {
		t.Run(tc.name, func(t *testing.T) { wantConfigError(t, tc.src, tc.line, tc.reason) })
	}
}
