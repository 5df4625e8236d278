//go:build !cairnfault

package snapshot

import (
	"runtime"
	"testing"

	"github.com/cairn-dev/cairn/platform/testsupport"
)

// TestHooksUnderFaultTag runs the tests that set this package's test hooks
// in a build with -tags cairnfault, the only build that has the hooks
// (hooks_on.go; the shipped build compiles them to nothing), so a plain
// go test still runs them. It fails unless each of them passed there.
func TestHooksUnderFaultTag(t *testing.T) {
	tests := []string{"TestInprocRefCompareAndSwap", "TestForeignRefMoveNotOverwritten", "TestSealAfterRestoreStoppedPartWay"}
	if runtime.GOOS == "linux" {
		tests = append(tests, "TestInprocSealSwappedFolder") // beneath_linux_test.go
	}
	testsupport.RunTagged(t, "cairnfault", tests...)
}
