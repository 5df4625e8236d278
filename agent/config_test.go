package agent

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseConfig(t *testing.T) {
	good := `
state_dir = "/var/lib/cairn"
log_level = "info"

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
`
	c, err := ParseConfig("cairn.toml", good)
	if err != nil {
		t.Fatal(err)
	}
	if c.Defaults.MaxFileSize != 50<<20 || c.Defaults.AutosaveQuiet.Duration != 3*time.Second || len(c.Watch) != 1 ||
		c.Watch[0].Layout != "hankweave" || *c.Watch[0].Autosave {
		t.Fatalf("parsed %+v", c)
	}
	merged := c.Watch[0].Settings.merge(c.Defaults.merge(DefaultSettings()))
	if merged.AutosaveMaxWait.Duration != time.Minute || merged.Excludes[0] != "node_modules" || *merged.Autosave {
		t.Errorf("merged %+v", merged)
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
		{"quiet over max", "[defaults]\nautosave_quiet = \"2m\"\nautosave_max_wait = \"1m\"\n", 2, "longer"},
		{"bad level", "log_level = \"loud\"\n", 1, "log_level"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig("cairn.toml", tc.src)
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("want a ConfigError, got %v", err)
			}
			if ce.File != "cairn.toml" || ce.Line != tc.line || !strings.Contains(ce.Error(), tc.reason) {
				t.Errorf("got %q (line %d), want line %d mentioning %q", ce.Error(), ce.Line, tc.line, tc.reason)
			}
		})
	}
}
