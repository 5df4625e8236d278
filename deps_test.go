package cairn_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/cairn-dev/cairn"

// allowed is the architecture, written down: for each of our packages, the
// packages of ours its non-test files may import (tests may import more).
// Each package is its own room: a subpackage is not folded into its parent,
// so agent/storebench → agent or agent/autodev → snapshot/gitobj is a row
// here, not an accident. Imports run one way, cmd → agent → {watcher,
// snapshot, restore} → platform; docs/architecture.md ("Every package, file by file") says what
// each package holds. A new package, or a new import of ours, is a change to
// this table, made on purpose.
var allowed = map[string][]string{
	// the shared types and OS pieces everything stands on
	"platform":           {},
	"platform/printable": {},
	"platform/service":   {"platform"},
	"restore/ckpt":       {},
	"restore/timeline":   {"restore/ckpt"},
	"restore":            {"platform/printable", "restore/ckpt"},
	"watcher":            {"platform"}, // ProcessRunning: a dead process's leftover marks

	// the store and its engines
	"snapshot/gitobj": {"platform"},
	"snapshot/retain": {"restore/ckpt"},
	"snapshot":        {"platform", "restore/ckpt", "snapshot/gitobj", "snapshot/retain"},

	// the daemon
	"agent/api":         {"restore/ckpt"},
	"agent/client":      {"agent/api"},
	"agent/hankweave":   {"platform", "restore/ckpt"},
	"agent/autodev":     {"agent/hankweave", "platform", "restore", "restore/ckpt", "snapshot", "snapshot/gitobj"},
	"agent/replicate":   {"platform", "snapshot"},
	"agent/ui":          {"agent/api", "restore/ckpt", "restore/timeline"},
	"agent/workerproto": {"agent/api"}, // the supervisor/worker protocol: every message, its bound, its check
	"agent/checkpoints": {"agent/api", "agent/autodev", "agent/hankweave", "restore", "restore/ckpt", "snapshot",
		"snapshot/retain"}, // a workspace's checkpoints as the daemon and the offline CLI act on them
	"agent/config": {"agent/replicate", "snapshot", "snapshot/retain"}, // the configuration file
	"agent/workspace": {"agent/api", "agent/autodev", "agent/checkpoints", "agent/config", "agent/hankweave", "agent/replicate",
		"platform", "restore", "restore/ckpt", "snapshot", "snapshot/retain", "watcher"}, // one workspace: watch, seal, restore, maintain
	"agent": {"agent/api", "agent/autodev", "agent/checkpoints", "agent/config", "agent/ui", "agent/workerproto", "agent/workspace",
		"platform", "restore", "restore/ckpt", "snapshot"}, // the daemon: supervisor, workers, HTTP

	// the shipped command
	"cmd/cairn": {"cmd/cairn/cli"},
	"cmd/cairn/cli": {"agent", "agent/api", "agent/autodev", "agent/checkpoints", "agent/client", "agent/config", "agent/hankweave",
		"agent/workerproto", "agent/workspace", "agent/replicate", "agent/ui", "platform", "platform/printable",
		"platform/service", "restore", "restore/ckpt", "restore/timeline", "snapshot", "snapshot/retain"},

	// the simulator, test rigs, the benchmarks and the demo: never in the
	// shipped binary (TestShippedBinaryLinksNoTestCode)
	"agent/hankweave/hwsim":           {}, // the simulated runtime: standard library only, a writer independent of agent/hankweave
	"agent/hankweave/hwsim/hwsimtest": {"agent/hankweave/hwsim"},
	"platform/testsupport":            {}, // the one wait for a condition, small file systems
	"snapshot/sealbench":              {"restore/ckpt", "snapshot"},
	"agent/storebench":                {"agent/workspace", "restore/ckpt", "snapshot"},
	"agent/replbench":                 {"agent/api", "agent/client", "agent/replicate", "restore/ckpt", "snapshot"},
	"agent/daemonbench": {"agent/api", "agent/client", "agent/hankweave/hwsim", "restore/ckpt", "snapshot",
		"snapshot/sealbench"},
	"cmd/cairn-bench": {"agent/daemonbench", "agent/replbench", "agent/storebench", "snapshot/sealbench"},
	"cmd/cairn-demo":  {"agent", "agent/config", "agent/hankweave/hwsim", "cmd/cairn/cli", "snapshot"}, // the daemon on a scripted codon run

	"packaging": {}, // tests only: they import agent from _test.go files
}

// notShipped are packages of ours the shipped binary must not link: the
// simulated runtime, the test rigs, the benchmarks and the two development
// commands. Besides these, no package of ours whose name holds "bench" may
// be linked (isBench), so a new benchmark needs no row here.
var notShipped = []string{"agent/hankweave/hwsim", "agent/hankweave/hwsim/hwsimtest", "platform/testsupport",
	"snapshot/sealbench", "agent/storebench", "agent/replbench", "agent/daemonbench", "cmd/cairn-bench", "cmd/cairn-demo"}

// isBench reports whether pkg, one of ours, is a benchmark: a path element
// holds "bench" (snapshot/sealbench, cmd/cairn-bench, …).
func isBench(pkg string) bool {
	return strings.HasPrefix(pkg, module+"/") && strings.Contains(rel(pkg), "bench")
}

// rel is pkg's path inside the module ("" for the module's root).
func rel(pkg string) string {
	return strings.TrimPrefix(strings.TrimPrefix(pkg, module), "/")
}

// TestImportsFollowTheTable fails on any import of ours a package's non-test
// files make that the table does not allow, on a package missing from the
// table, and on a row for a package that no longer exists.
func TestImportsFollowTheTable(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if f[0] == module {
			continue // this test's own package
		}
		from := rel(f[0])
		seen[from] = true
		ok, known := allowed[from]
		if !known {
			t.Errorf("package %s is not in the table; add it (and to docs/architecture.md, \"Every package, file by file\")", from)
			continue
		}
		for _, imp := range f[1:] {
			if !strings.HasPrefix(imp, module+"/") {
				continue
			}
			if to := rel(imp); !slices.Contains(ok, to) {
				t.Errorf("%s imports %s, which the table does not allow", from, to)
			}
		}
	}
	for pkg := range allowed {
		if !seen[pkg] {
			t.Errorf("the table names %s, which is not a package any more", pkg)
		}
	}
}

// shipped is the package built into the binary we ship.
const shipped = "./cmd/cairn"

// TestShippedBinaryLinksNoTestCode lists every package the shipped binary
// links (as tailscale's depaware does) and fails on package testing or
// testing/... and on the packages of notShipped: test rigs (hwsimtest,
// testing.TB helpers) stay in tests, the benchmarks in cmd/cairn-bench, the
// simulated runtime in the tests, the benchmarks and cmd/cairn-demo, and test
// hooks and fault points in a -tags cairnfault build.
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
		if pkg == "testing" || strings.HasPrefix(pkg, "testing/") || isBench(pkg) || slices.Contains(notShipped, rel(pkg)) {
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
