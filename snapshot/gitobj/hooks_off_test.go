//go:build !cairnfault

package gitobj

import (
	"os/exec"
	"runtime/debug"
	"strings"
	"testing"
)

// TestHooksUnderFaultTag runs the tests that set this package's test hooks
// in a build with -tags cairnfault, the only build that has the hooks
// (hooks_on.go; the shipped build compiles them to nothing), so a plain
// go test still runs them. It fails unless each of them passed there.
func TestHooksUnderFaultTag(t *testing.T) {
	tests := []string{"TestPackWithoutIndexRemoved", "TestPackWithoutIndexKeepsOneFoundThere"}
	args := []string{"test", "-tags", "cairnfault", "-count=1", "-v", "-run", "^(" + strings.Join(tests, "|") + ")$"}
	if raceBuild() {
		args = append(args, "-race")
	}
	out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	for _, name := range tests {
		if !strings.Contains(string(out), "--- PASS: "+name+" ") {
			t.Errorf("%s did not pass with -tags cairnfault:\n%s", name, out)
		}
	}
}

// raceBuild reports whether this test binary was built with -race; the
// tests under the tag are then built with it too.
func raceBuild() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}
