package agent

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A config file caught between its truncation and its write is empty, and
// an empty config is valid: loaded, it released every workspace, and the
// full file that followed was then refused against it (CI caught it in
// TestConfigReload). A changed file is loaded only once its last write is
// configSettle old.
func TestConfigLoadedOnlyOnceSettled(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cairn.toml")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := os.Chtimes(path, now, now); err != nil {
		t.Fatal(err)
	}
	empty, settled := configStamp(path, now)
	if settled {
		t.Fatal("a file written this instant is taken as settled")
	}
	if _, settled := configStamp(path, now.Add(configSettle)); !settled {
		t.Fatal("a file unwritten for configSettle is not settled")
	}
	if err := os.WriteFile(path, []byte("[[watch]]\npath = \"/srv\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if full, _ := configStamp(path, time.Now()); full == empty {
		t.Fatal("the stamp did not change with the write")
	}
	if s, settled := configStamp(filepath.Join(t.TempDir(), "gone.toml"), now); s == "" || !settled {
		t.Fatalf("a missing file: %q %v", s, settled)
	}
}
