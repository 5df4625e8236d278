package config

import (
	"strings"
	"testing"
)

// TestAutodevLayoutConfig: layout = "autodev" is accepted where a layout is,
// and auto stays auto (it never means autodev).
func TestAutodevLayoutConfig(t *testing.T) {
	c, err := Parse("cairn.toml", "[[watch]]\npath = \"/srv/repo\"\nlayout = \"autodev\"\n")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Watch[0].Layout; got != LayoutAutodev {
		t.Fatalf("layout %q", got)
	}
	if DefaultSettings().Layout != "auto" {
		t.Fatalf("default layout %q", DefaultSettings().Layout)
	}
	_, err = Parse("cairn.toml", "[defaults]\nlayout = \"autodevx\"\n")
	if err == nil || !strings.Contains(err.Error(), "want auto, hankweave, plain or autodev") {
		t.Fatalf("a bad layout: %v", err)
	}
}
