package packaging_test

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/agent/config"
)

// installed is where the .deb puts each file; README.md's "From a package"
// section must name every one of them.
var installed = []string{
	"/usr/bin/cairn",
	"/usr/share/cairn/config.toml",
	"/usr/lib/systemd/system/cairn.service",
	"/usr/lib/systemd/user/cairn.service",
	"/usr/lib/sysctl.d/60-cairn-inotify.conf",
	"/usr/share/man/man1/cairn.1.gz",
	"/usr/share/bash-completion/completions/cairn",
	"/usr/share/zsh/vendor-completions/_cairn",
	"/usr/share/fish/vendor_completions.d/cairn.fish",
}

// etcConfig is the daemon's config: no package's file (postinstall copies
// the default there when there is none).
const etcConfig = "/etc/cairn/config.toml"

// targets are the release targets packaging/build.sh builds.
var targets = []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64", "windows/amd64"}

func root(t *testing.T) string {
	t.Helper()
	r, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// The packaged config parses as the daemon parses it, commented out or with
// every documented key switched on.
func TestDefaultConfigParses(t *testing.T) {
	src, err := os.ReadFile("config.toml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := config.Parse("packaging/config.toml", string(src)); err != nil {
		t.Fatalf("as shipped: %v", err)
	}
	key := regexp.MustCompile(`^#(\[\[watch\]\]|[a-z_]+ = .*)$`)
	var lines []string
	n := 0
	for _, l := range strings.Split(string(src), "\n") {
		if key.MatchString(l) {
			l, n = l[1:], n+1
		}
		lines = append(lines, l)
	}
	on := strings.Join(lines, "\n")
	c, err := config.Parse("packaging/config.toml (uncommented)", on)
	if err != nil {
		t.Fatalf("with every key on: %v\n%s", err, on)
	}
	d := config.DefaultSettings()
	if n < 12 || c.StateDir != "/var/lib/cairn" || c.Socket != "/run/cairn/cairn.sock" || c.LogLevel != "info" ||
		c.Defaults.Layout != d.Layout || c.Defaults.MaxFileSize != d.MaxFileSize ||
		c.Defaults.AutosaveQuiet != d.AutosaveQuiet || c.Defaults.AutosaveMaxWait != d.AutosaveMaxWait || len(c.Watch) != 2 {
		t.Fatalf("uncommented config (%d keys) does not show the defaults: %+v", n, c)
	}
}

func TestScriptsAreValidShell(t *testing.T) {
	for _, s := range []string{"postinstall.sh", "preremove.sh", "postremove.sh"} {
		run(t, ".", nil, "sh", "-n", filepath.Join("scripts", s))
		if strings.Contains(mustRead(t, filepath.Join("scripts", s)), "rm -rf") {
			t.Errorf("%s removes files recursively: no script may delete a store", s)
		}
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Every release target builds: static, as packaging/build.sh builds them.
func TestCrossCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: cross-compiling five targets takes minutes")
	}
	r := root(t)
	for _, tg := range targets {
		goos, goarch, _ := strings.Cut(tg, "/")
		t.Run(goos+"_"+goarch, func(t *testing.T) {
			out := t.TempDir() + string(filepath.Separator)
			run(t, r, []string{"CGO_ENABLED=0", "GOOS=" + goos, "GOARCH=" + goarch}, "go", "build", "-trimpath", "-o", out, "./...")
			if _, err := os.Stat(filepath.Join(out, "cairn"+map[bool]string{true: ".exe"}[goos == "windows"])); err != nil {
				t.Fatalf("no cairn binary for %s: %v", tg, err)
			}
		})
	}
}

// The .deb builds with nfpm and goes through install → upgrade → remove →
// purge with dpkg, non-interactively: on a machine without a config (the
// package writes the default, and purge deletes it only while unchanged),
// over a config `cairn service install` wrote (never prompted about, never
// changed, never deleted), and with the default edited after install (kept).
// Every file lands where README.md says, `cairn version` runs, and the
// stores under /var/lib/cairn stay exactly as they were.
func TestDebInstallRemove(t *testing.T) {
	switch {
	case runtime.GOOS != "linux":
		t.Skip("the .deb is for Linux")
	case os.Geteuid() != 0:
		t.Skip("dpkg -i needs root")
	case testing.Short():
		t.Skip("-short: builds nfpm and a package")
	}
	for _, tool := range []string{"dpkg", "dpkg-deb", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is missing: %v", tool, err)
		}
	}
	if out, _ := exec.Command("dpkg-query", "-W", "-f", "${Status}", "cairn").Output(); strings.Contains(string(out), "installed") {
		t.Skipf("a cairn package is installed on this machine (%s); not replacing it", out)
	}
	for _, p := range []string{"/usr/bin/cairn", "/etc/init.d/cairn", "/etc/cairn"} {
		if _, err := os.Lstat(p); err == nil {
			t.Skipf("%s exists: a cairn is installed by hand here; not replacing it", p)
		}
	}
	if out, _ := exec.Command("dpkg-query", "-W", "-f", "${Status}", "git").Output(); !strings.Contains(string(out), "install ok installed") {
		t.Skip("git is not installed as a Debian package: the .deb's dependency cannot be met")
	}

	r := root(t)
	readme := mustRead(t, filepath.Join(r, "README.md"))
	_, section, ok := strings.Cut(readme, "### From a package")
	if !ok {
		t.Fatal(`README.md has no "### From a package" section`)
	}
	if i := strings.Index(section, "\n## "); i >= 0 {
		section = section[:i]
	}
	for _, p := range append(installed, etcConfig, "/var/lib/cairn", "packaging/build.sh") {
		if !strings.Contains(section, p) {
			t.Errorf("README.md's \"From a package\" does not name %s", p)
		}
	}

	const version, version2 = "0.0.1-pkgtest", "0.0.2-pkgtest"
	dist := t.TempDir()
	start := time.Now()
	run(t, r, []string{"DIST=" + dist, "PACKAGES=deb", "VERSION=" + version}, "bash", "packaging/build.sh", "linux/"+runtime.GOARCH)
	t.Logf("build.sh linux/%s + deb: %s", runtime.GOARCH, time.Since(start).Round(time.Second))
	debs, _ := filepath.Glob(filepath.Join(dist, "*.deb"))
	if len(debs) != 1 {
		t.Fatalf("want one .deb in %s, got %v", dist, debs)
	}
	deb := debs[0]
	// The upgrade: the same package as a newer version.
	unpacked := filepath.Join(t.TempDir(), "pkg")
	run(t, "/", nil, "dpkg-deb", "-R", deb, unpacked)
	control := filepath.Join(unpacked, "DEBIAN", "control")
	c := mustRead(t, control)
	c2 := regexp.MustCompile(`(?m)^Version: .*$`).ReplaceAllString(c, "Version: "+debVersion(version2))
	if err := os.WriteFile(control, []byte(c2), 0o644); err != nil {
		t.Fatal(err)
	}
	deb2 := filepath.Join(dist, "cairn_"+version2+".deb")
	run(t, "/", nil, "dpkg-deb", "--root-owner-group", "-b", unpacked, deb2)

	_, statErr := os.Stat("/var/lib/cairn")
	hadState := statErr == nil
	t.Cleanup(func() {
		exec.Command("dpkg", "-P", "cairn").Run()
		os.Remove(etcConfig)
		os.Remove("/etc/cairn/.config.toml.package-sha256")
		os.Remove("/etc/cairn")
		if !hadState {
			os.RemoveAll("/var/lib/cairn")
		}
	})
	shipped := mustRead(t, filepath.Join(r, "packaging", "config.toml"))

	t.Run("fresh", func(t *testing.T) {
		debCycle(t, deb, deb2, version, version2, func(stage string) {
			if got, err := os.ReadFile(etcConfig); stage == "purge" {
				if err == nil {
					t.Errorf("dpkg -P left the package's unchanged %s", etcConfig)
				}
			} else if err != nil || string(got) != shipped {
				t.Errorf("after %s, %s is not the packaged default (%v)", stage, etcConfig, err)
			}
		})
		if _, err := os.Stat("/etc/cairn"); err == nil {
			t.Errorf("dpkg -P left /etc/cairn")
		}
	})

	t.Run("over a config cairn service install wrote", func(t *testing.T) {
		name := fmt.Sprintf("cairn-pkgtest-%d", os.Getpid())
		bin := filepath.Join(dist, "cairn-linux-"+runtime.GOARCH)
		const logDir = "/var/log/cairn" // a SysV install's log folder
		if _, err := os.Stat(logDir); err != nil {
			t.Cleanup(func() { os.Remove(logDir) }) // only if empty
		}
		run(t, "/", nil, bin, "service", "install", "--name", name)
		run(t, "/", nil, bin, "service", "uninstall", "--name", name)
		written, err := os.ReadFile(etcConfig)
		if err != nil {
			t.Fatalf("cairn service install wrote no %s: %v", etcConfig, err)
		}
		debCycle(t, deb, deb2, version, version2, func(stage string) {
			if got, err := os.ReadFile(etcConfig); err != nil || string(got) != string(written) {
				t.Errorf("after %s, the config cairn service install wrote changed or went (%v):\n%s", stage, err, got)
			}
		})
		os.Remove(etcConfig)
		os.Remove("/etc/cairn")
	})

	t.Run("default edited after install", func(t *testing.T) {
		run(t, "/", nil, "dpkg", "-i", deb)
		edited := shipped + "\nlog_level = \"debug\"\n"
		if err := os.WriteFile(etcConfig, []byte(edited), 0o644); err != nil {
			t.Fatal(err)
		}
		run(t, "/", nil, "dpkg", "-P", "cairn")
		if got, err := os.ReadFile(etcConfig); err != nil || string(got) != edited {
			t.Errorf("dpkg -P deleted or changed an edited %s (%v)", etcConfig, err)
		}
		os.Remove(etcConfig)
		os.Remove("/etc/cairn")
	})
}

// debCycle installs deb, upgrades to deb2, removes and purges, checking the
// package's files, `cairn version`, a store under /var/lib/cairn that must
// stay byte for byte, and the config (checkConfig, after each stage).
func debCycle(t *testing.T, deb, deb2, version, version2 string, checkConfig func(stage string)) {
	t.Logf("dpkg -i:\n%s", run(t, "/", nil, "dpkg", "-i", deb))
	for _, p := range installed {
		if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("after dpkg -i, %s: %v", p, err)
		}
	}
	if fi, err := os.Stat("/usr/bin/cairn"); err == nil && fi.Mode().Perm() != 0o755 {
		t.Errorf("/usr/bin/cairn has mode %v, want 0755", fi.Mode().Perm())
	}
	if fi, err := os.Stat("/var/lib/cairn"); err != nil || !fi.IsDir() {
		t.Fatalf("postinstall did not create /var/lib/cairn: %v", err)
	}
	if got := run(t, "/", nil, "/usr/bin/cairn", "version"); !strings.HasPrefix(got, "cairn "+version+" linux/"+runtime.GOARCH) || !strings.Contains(got, "\nbuilt  ") || !strings.Contains(got, "\ncommit ") {
		t.Errorf("cairn version = %q, want the stamped %s, commit and build date", got, version)
	}
	run(t, "/", nil, "/usr/bin/cairn", "config", "check", etcConfig)
	if man := run(t, "/", nil, "sh", "-c", "gzip -dc /usr/share/man/man1/cairn.1.gz"); !strings.HasPrefix(man, ".TH CAIRN 1 \"\" \"cairn "+strings.ReplaceAll(version, "-", `\-`)+"\"") {
		t.Errorf("the man page is not cairn %s's:\n%.200s", version, man)
	}
	checkConfig("install")

	// A workspace with a checkpoint, its store and ledger under /var/lib/cairn.
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("kept across removal\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join("/var/lib/cairn", fmt.Sprintf("pkgtest-%d", os.Getpid()))
	t.Cleanup(func() { os.RemoveAll(state) })
	run(t, "/", nil, "/usr/bin/cairn", "checkpoint", ws, "--state-dir", state, "--label", "before-removal")
	ledger := run(t, "/", nil, "/usr/bin/cairn", "list", ws, "--state-dir", state, "--json")
	if !strings.Contains(ledger, "before-removal") {
		t.Fatalf("cairn list does not show the checkpoint:\n%s", ledger)
	}
	before := tree(t, state)
	if !hasSuffix(before, "ledger.jsonl") || !hasSuffix(before, "/HEAD") {
		t.Fatalf("no store or ledger under %s: %v", state, keys(before))
	}

	t.Logf("dpkg -i (upgrade):\n%s", run(t, "/", nil, "dpkg", "-i", deb2))
	if got, _ := exec.Command("dpkg-query", "-W", "-f", "${Version}", "cairn").Output(); string(got) != debVersion(version2) {
		t.Errorf("after the upgrade dpkg says version %q, want %s", got, debVersion(version2))
	}
	checkConfig("upgrade")
	same(t, "the upgrade", before, tree(t, state))

	t.Logf("dpkg -r:\n%s", run(t, "/", nil, "dpkg", "-r", "cairn"))
	for _, p := range installed {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("dpkg -r left %s", p)
		}
	}
	checkConfig("remove")
	same(t, "dpkg -r", before, tree(t, state))

	t.Logf("dpkg -P:\n%s", run(t, "/", nil, "dpkg", "-P", "cairn"))
	checkConfig("purge")
	same(t, "dpkg -P", before, tree(t, state))
	run(t, "/", nil, "git", "--git-dir", storeDir(t, before, state), "fsck", "--no-progress")
}

// debVersion is a semantic version as nfpm writes it into a .deb: the
// pre-release after ~ (sorting before the release).
func debVersion(v string) string { return strings.Replace(v, "-", "~", 1) }

// tree maps every file under dir (relative path) to its mode and content hash.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		v := fi.Mode().String()
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			v += fmt.Sprintf(" %x", sha256.Sum256(b))
		}
		m[filepath.ToSlash(rel)] = v
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", dir, err)
	}
	return m
}

func same(t *testing.T, after string, before, now map[string]string) {
	t.Helper()
	for k, v := range before {
		if now[k] != v {
			t.Errorf("after %s, %s changed: %q → %q", after, k, v, now[k])
		}
	}
	for k := range now {
		if _, ok := before[k]; !ok {
			t.Errorf("after %s, %s appeared", after, k)
		}
	}
}

func hasSuffix(m map[string]string, suffix string) bool {
	for k := range m {
		if strings.HasSuffix(k, suffix) {
			return true
		}
	}
	return false
}

func keys(m map[string]string) []string {
	var v []string
	for k := range m {
		v = append(v, k)
	}
	return v
}

// storeDir is the git directory of the one store under state.
func storeDir(t *testing.T, files map[string]string, state string) string {
	t.Helper()
	for k := range files {
		if strings.HasSuffix(k, "/HEAD") && !strings.Contains(k, "/logs/") && !strings.Contains(k, "/refs/") {
			return filepath.Join(state, filepath.Dir(k))
		}
	}
	t.Fatalf("no git directory under %s", state)
	return ""
}
