package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// cairn config check: file:line errors and exit 2, "ok" and 0.
func TestConfigCheck(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.toml")
	bad := filepath.Join(dir, "bad.toml")
	badValue := filepath.Join(dir, "bad-value.toml")
	os.WriteFile(good, []byte("log_level = \"info\"\n\n[[watch]]\npath = \"/srv/agents/*\"\n"), 0o644)
	os.WriteFile(bad, []byte("log_level = \"info\"\n\n[[watch]]\npath = \"/srv/agents/*\"\nbogus = 1\n"), 0o644)
	os.WriteFile(badValue, []byte("[defaults]\nmax_file_size = \"lots\"\n"), 0o644)
	if out, errOut, code := run("config", "check", good); code != 0 || out != good+": ok (1 watch entry)\n" || errOut != "" {
		t.Errorf("good config: exit %d, %q %q", code, out, errOut)
	}
	for file, want := range map[string]string{
		bad:                             bad + ":5: unknown key \"watch.bogus\"\n",
		badValue:                        badValue + ":2: ",
		filepath.Join(dir, "none.toml"): filepath.Join(dir, "none.toml") + ": open ",
	} {
		out, errOut, code := run("config", "check", file)
		if code != ExitUsage || out != "" || !strings.HasPrefix(errOut, want) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("config check %s: exit %d, stdout %q, stderr %q; want exit 2 and %q", filepath.Base(file), code, out, errOut, want)
		}
	}
	if _, _, code := run("config", "lint", good); code != ExitUsage {
		t.Errorf("config lint: exit %d, want 2", code)
	}
	// The package's own config passes.
	if _, errOut, code := run("config", "check", filepath.Join("..", "..", "..", "packaging", "config.toml")); code != 0 {
		t.Errorf("packaging/config.toml: exit %d: %s", code, errOut)
	}
}
