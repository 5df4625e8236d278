package config

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/snapshot/retain"
)

func TestRetentionConfig(t *testing.T) {
	src := `
[defaults]
layout = "auto"

[defaults.retention]
keep_last = 10
keep_within = "2d"

[defaults.retention.pre_restore]
keep_daily = 7

[[watch]]
path = "/srv/runs/*"

[watch.retention.checkpoints]
keep_within = "1w"
keep_monthly = 6
`
	c, err := Parse("cairn.toml", src)
	if err != nil {
		t.Fatal(err)
	}
	def := c.Defaults.Merge(DefaultSettings())
	merged := c.Watch[0].Settings.Merge(def)
	want := retain.Policies{
		Autosave:    retain.Policy{KeepLast: 10, KeepWithin: 48 * time.Hour},
		PreRestore:  retain.Policy{KeepDaily: 7},
		Checkpoints: retain.Policy{KeepWithin: 7 * 24 * time.Hour, KeepMonthly: 6},
	}
	if got := merged.Retention.Policies(); got != want {
		t.Errorf("merged retention %+v, want %+v", got, want)
	}
	// Unset groups take the built-in defaults.
	if got := def.Retention.Checkpoints; got != retain.Defaults().Checkpoints {
		t.Errorf("defaults' checkpoints %+v", got)
	}
	if got := DefaultSettings().Retention.Policies(); got != retain.Defaults() {
		t.Errorf("DefaultSettings retention %+v", got)
	}
	raw, err := json.Marshal(merged)
	if err != nil {
		t.Fatal(err)
	}
	var back Settings
	if err := json.Unmarshal(raw, &back); err != nil || !back.Equal(merged) {
		t.Errorf("settings through JSON: %s → %+v (%v)", raw, back, err)
	}

	// The inline form the packaged config shows is the built-in default.
	inline := "[defaults]\nretention = { keep_within = \"1d\", keep_hourly = 168, keep_daily = 30, pre_restore = { keep_within = \"30d\" }, checkpoints = { keep_within = \"90d\" } }\n"
	if c, err := Parse("cairn.toml", inline); err != nil || c.Defaults.Retention.Policies() != retain.Defaults() {
		t.Errorf("inline retention: %+v %v", c, err)
	}

	for _, tc := range []struct {
		name, src string
		line      int
		reason    string
	}{
		{"keeps nothing", "[defaults]\n[defaults.retention]\nkeep_last = 0\n", 3, "keeps nothing"},
		{"keeps nothing in a group", "[defaults.retention.pre_restore]\nkeep_daily = 0\nkeep_within = \"0s\"\n", 2, "keeps nothing"},
		{"negative", "[defaults.retention]\n\nkeep_hourly = -3\n", 3, "0 or more"},
		{"not a number", "[defaults.retention]\nkeep_daily = \"lots\"\n", 2, "whole number"},
		{"bad duration", "[defaults.retention.checkpoints]\nkeep_within = \"a while\"\n", 2, "bad duration"},
		{"unknown key", "[defaults.retention]\nkeep_yearly = 2\n", 2, "unknown key"},
		{"in a watch", "[[watch]]\npath = \"/srv/*\"\n[watch.retention]\nkeep_last = 0\n", 4, "keeps nothing"},
	} {
		t.Run(tc.name, func(t *testing.T) { wantConfigError(t, tc.src, tc.line, tc.reason) })
	}
}
