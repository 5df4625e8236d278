package testsupport

import (
	"os/exec"
	"runtime/debug"
	"strings"
	"testing"
)

// RunTagged runs the named tests of the package in the current folder in a
// build with -tags tag (and -race when this test binary has it), so a plain
// go test still runs tests that only such a build has. It fails unless each
// of them passed there.
func RunTagged(t testing.TB, tag string, tests ...string) {
	t.Helper()
	args := []string{"test", "-tags", tag, "-count=1", "-v", "-run", "^(" + strings.Join(tests, "|") + ")$"}
	if raceBuild() {
		args = append(args, "-race")
	}
	out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	for _, name := range tests {
		if !strings.Contains(string(out), "--- PASS: "+name+" ") {
			t.Errorf("%s did not pass with -tags %s:\n%s", name, tag, out)
		}
	}
}

// raceBuild reports whether this test binary was built with -race.
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
