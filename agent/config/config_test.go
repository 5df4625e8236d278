package config

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseConfig(t *testing.T) {
	good := `
state_dir = "/var/lib/cairn"
log_level = "info"
max_runtime_file = "8MiB"

[defaults]
layout = "auto"
patterns = ["**", "!*.tmp"]
excludes = ["node_modules"]
max_file_size = "50MiB"
autosave_quiet = "3s"
autosave_max_wait = "1m"

[[watch]]
path = "/srv/runs/*"
layout = "hankweave"
autosave = false
cross_mounts = true
`
	c, err := Parse("cairn.toml", good)
	if err != nil {
		t.Fatal(err)
	}
	if c.Defaults.MaxFileSize != 50<<20 || c.Defaults.AutosaveQuiet.Duration != 3*time.Second || len(c.Watch) != 1 ||
		c.Watch[0].Layout != "hankweave" || *c.Watch[0].Autosave || !c.Watch[0].CrossMounts || c.MaxRuntimeFile != 8<<20 {
		t.Fatalf("parsed %+v", c)
	}
	merged := c.Watch[0].Settings.Merge(c.Defaults.Merge(DefaultSettings()))
	if merged.AutosaveMaxWait.Duration != time.Minute || merged.Excludes[0] != "node_modules" || *merged.Autosave {
		t.Errorf("merged %+v", merged)
	}

	// Settings travel to a root daemon's workers as JSON: they must come back equal.
	raw, err := json.Marshal(merged)
	if err != nil {
		t.Fatal(err)
	}
	var back Settings
	if err := json.Unmarshal(raw, &back); err != nil || !back.Equal(merged) {
		t.Errorf("settings through JSON: %s → %+v (%v), want %+v", raw, back, err, merged)
	}

	for _, tc := range []struct {
		name, src string
		line      int
		reason    string
	}{
		{"syntax", "state_dir = \n", 1, ""},
		{"unknown key", "[defaults]\nlayuot = \"plain\"\n", 2, "unknown key"},
		{"bad layout", "[defaults]\n\nlayout = \"git\"\n", 3, "layout"},
		{"bad duration", "[defaults]\nautosave_quiet = \"soon\"\n", 2, "duration"},
		{"bad size", "[defaults]\nmax_file_size = \"lots\"\n", 2, "size"},
		{"relative watch", "[[watch]]\npath = \"runs/*\"\n", 2, "absolute"},
		{"bad glob", "[[watch]]\npath = \"/srv/[runs\"\n", 2, "glob"},
		{"bad pattern", "[defaults]\npatterns = [\"[x\"]\n", 2, "pattern"},
		{"bad exclude", "[defaults]\nexcludes = [\"src/[x\"]\n", 2, "invalid pattern"},
		{"re-including exclude", "[defaults]\nexcludes = [\"*.log\", \"!keep.log\"]\n", 2, "cannot re-include"},
		{"re-including watch exclude", "[[watch]]\npath = \"/srv/*\"\nexcludes = [\" !x\"]\n", 3, "cannot re-include"},
		{"quiet over max", "[defaults]\nautosave_quiet = \"2m\"\nautosave_max_wait = \"1m\"\n", 2, "longer"},
		{"bad level", "log_level = \"loud\"\n", 1, "log_level"},
	} {
		t.Run(tc.name, func(t *testing.T) { wantConfigError(t, tc.src, tc.line, tc.reason) })
	}
}

// wantConfigError checks that parsing src as cairn.toml fails with a
// Error naming that file, line and (in its message) reason.
func wantConfigError(t *testing.T, src string, line int, reason string) {
	t.Helper()
	_, err := Parse("cairn.toml", src)
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("want a *Error, got %v", err)
	}
	if ce.File != "cairn.toml" || ce.Line != line || !strings.Contains(ce.Error(), reason) {
		t.Errorf("got %q (%s line %d), want line %d mentioning %q", ce.Error(), ce.File, ce.Line, line, reason)
	}
}

// TestConfigMaxWorkspaces: a [[watch]] entry's cap is read, a negative one refused with its line.
func TestConfigMaxWorkspaces(t *testing.T) {
	c, err := Parse("c.toml", "[[watch]]\npath = \"/srv/runs/*\"\nmax_workspaces = 20\n")
	if err != nil || c.Watch[0].MaxWorkspaces != 20 {
		t.Fatalf("%+v %v", c, err)
	}
	_, err = Parse("c.toml", "[[watch]]\npath = \"/srv/runs/*\"\nmax_workspaces = -1\n")
	if err == nil || !strings.Contains(err.Error(), "max_workspaces") || !strings.Contains(err.Error(), ":3") {
		t.Fatalf("negative cap: %v", err)
	}
}
