package service

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/platform"
)

var update = flag.Bool("update", false, "rewrite testdata/ golden files and the packaging/ files rendered from the templates")

// golden renders every unit cairn can install with fixed inputs. An upgrade of
// kardianos/service cannot change them: cairn hands kardianos the rendered text.
var golden = []struct {
	file string
	kind Kind
	unit Unit
}{
	{"systemd-system.service", KindSystemd, Unit{Name: "cairn", Mode: platform.ModeSystem,
		Executable: "/usr/bin/cairn", ConfigPath: "/etc/cairn/config.toml"}},
	{"systemd-user.service", KindSystemd, Unit{Name: "cairn", Mode: platform.ModeUser,
		Executable: "/usr/bin/cairn", ConfigPath: "%E/cairn/config.toml"}},
	{"systemd-spaces.service", KindSystemd, Unit{Name: "cairn-test", Mode: platform.ModeSystem,
		Executable: "/opt/my tools/cairn", ConfigPath: `/etc/cairn "x"/$HOME.toml`}},
	{"sysv.sh", KindSysV, Unit{Name: "cairn", Mode: platform.ModeSystem,
		Executable: "/usr/bin/cairn", ConfigPath: "/etc/cairn/config.toml", LogPath: "/var/log/cairn/cairn.log"}},
	{"launchd-system.plist", KindLaunchd, Unit{Name: "ai.cairn.daemon", Mode: platform.ModeSystem,
		Executable: "/usr/local/bin/cairn", ConfigPath: "/Library/Application Support/cairn/config.toml",
		LogPath: "/Library/Logs/cairn/cairn.log"}},
}

// packaged are the files in packaging/ that are rendered templates.
var packaged = map[string]string{
	"systemd-system.service": "packaging/systemd/cairn.service",
	"systemd-user.service":   "packaging/systemd/cairn-user.service",
	"launchd-system.plist":   "packaging/launchd/ai.cairn.daemon.plist",
}

func TestRenderedUnitsMatchGolden(t *testing.T) {
	for _, g := range golden {
		t.Run(g.file, func(t *testing.T) {
			got, err := Render(g.kind, g.unit)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", g.file)
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./platform/service -run Golden -update)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("rendered %s differs from %s (run with -update if intended):\n%s", g.kind, path, got)
			}
		})
	}
}

func TestPackagingFilesAreRenderedTemplates(t *testing.T) {
	for golden, pkg := range packaged {
		want, err := os.ReadFile(filepath.Join("testdata", golden))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("..", "..", pkg)
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test ./platform/service -update)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is not testdata/%s: packaging files are generated, run go test ./platform/service -update", pkg, golden)
		}
	}
}

func TestRenderUnitTraps(t *testing.T) {
	sys, _ := Render(KindSystemd, golden[0].unit)
	user, _ := Render(KindSystemd, golden[1].unit)
	for _, c := range []struct {
		text []byte
		want string
	}{
		{sys, "WantedBy=multi-user.target\n"},
		{user, "WantedBy=default.target\n"}, // kardianos's default user unit says multi-user.target
		{sys, "Type=notify\n"},
		{sys, "Restart=on-failure\n"},
		{sys, "RestartSec=2\n"},
		{sys, "LimitNOFILE=65536\n"},
		{sys, "ExecStart=/usr/bin/cairn daemon --config /etc/cairn/config.toml --service\n"},
	} {
		if !bytes.Contains(c.text, []byte(c.want)) {
			t.Errorf("unit lacks %q", c.want)
		}
	}
	if _, err := Render(KindSysV, Unit{Mode: platform.ModeUser}); err == nil {
		t.Error("a SysV user service rendered; want an error")
	}
}

// TestOnlyThisPackageImportsKardianos keeps kardianos/service behind this adapter.
func TestOnlyThisPackageImportsKardianos(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "github.com/cairn-dev/cairn/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if f[0] != "github.com/cairn-dev/cairn/platform/service" && slices.Contains(f[1:], "github.com/kardianos/service") {
			t.Errorf("%s imports github.com/kardianos/service; only platform/service may", f[0])
		}
	}
}
