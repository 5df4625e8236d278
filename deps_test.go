package cairn_test

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/cairn-dev/cairn"

// allowed says which of our packages each room may import: imports run one way,
// cmd → agent → {watcher, snapshot, restore} → platform; restore/ckpt (the
// shared checkpoint types) depends on nothing of ours, and agent/api on it alone.
var allowed = map[string][]string{
	"platform":     {},
	"restore/ckpt": {},
	"agent/api":    {"restore/ckpt"},
	"watcher":      {"platform"},
	"snapshot":     {"platform", "restore/ckpt"},
	"restore":      {"platform", "restore/ckpt"},
	"agent/client": {"agent/api", "platform", "restore/ckpt"},
	"agent":        {"agent/api", "agent/client", "watcher", "snapshot", "restore", "restore/ckpt", "platform"},
	"cmd":          {"agent", "agent/api", "agent/client", "watcher", "snapshot", "restore", "restore/ckpt", "platform"},
	"packaging":    {}, // tests only: they import agent from _test.go files
}

// room is the top folder (or agent/api, agent/client, restore/ckpt) a package belongs to.
func room(pkg string) string {
	rel := strings.TrimPrefix(strings.TrimPrefix(pkg, module), "/")
	for _, r := range []string{"agent/api", "agent/client", "restore/ckpt"} {
		if rel == r || strings.HasPrefix(rel, r+"/") {
			return r
		}
	}
	top, _, _ := strings.Cut(rel, "/")
	return top
}

func TestImportsRunOneWay(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		from := room(f[0])
		if f[0] == module {
			continue // this test's own package
		}
		ok, known := allowed[from]
		if !known {
			t.Errorf("package %s is in no known room; add it to the layout", f[0])
			continue
		}
		for _, imp := range f[1:] {
			if !strings.HasPrefix(imp, module+"/") {
				continue
			}
			to := room(imp)
			if to == from {
				continue
			}
			if !contains(ok, to) {
				t.Errorf("%s imports %s: %s may not depend on %s", f[0], imp, from, to)
			}
		}
	}
}

// shipped is the package built into the binary we ship.
const shipped = "./cmd/cairn"

// TestShippedBinaryLinksNoTestCode lists every package the shipped binary
// links (as tailscale's depaware does) and fails on package testing or
// testing/...: test rigs (hwsimtest, testing.TB helpers) stay in tests, and
// the simulator, fault points and benchmarks the binary carries return errors.
func TestShippedBinaryLinksNoTestCode(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, shipped).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", shipped, err)
	}
	imports := map[string][]string{}
	var root string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		imports[f[0]] = f[1:]
		root = f[0] // -deps lists the named package last
	}
	if len(imports) < 2 || root != module+"/cmd/cairn" {
		t.Fatalf("go list -deps %s listed %d packages ending with %q", shipped, len(imports), root)
	}
	for pkg := range imports {
		if pkg == "testing" || strings.HasPrefix(pkg, "testing/") {
			t.Errorf("%s links %s: %s", shipped, pkg, strings.Join(importPath(imports, root, pkg), " → "))
		}
	}
}

// importPath is a shortest chain of imports from one package to another.
func importPath(imports map[string][]string, from, to string) []string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p == to {
			var chain []string
			for ; p != ""; p = prev[p] {
				chain = append([]string{p}, chain...)
			}
			return chain
		}
		for _, imp := range imports[p] {
			if _, seen := prev[imp]; !seen {
				prev[imp] = p
				queue = append(queue, imp)
			}
		}
	}
	return []string{from, "…", to}
}

func contains(v []string, s string) bool {
	for _, x := range v {
		if x == s {
			return true
		}
	}
	return false
}
