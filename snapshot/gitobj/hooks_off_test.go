//go:build !cairnfault

package gitobj

import (
	"testing"

	"github.com/cairn-dev/cairn/platform/testsupport"
)

// TestHooksUnderFaultTag runs the tests that set this package's test hooks
// in a build with -tags cairnfault, the only build that has them
// (hooks_on.go), so a plain go test still runs them.
func TestHooksUnderFaultTag(t *testing.T) {
	testsupport.RunTagged(t, "cairnfault", "TestPackWithoutIndexRemoved", "TestPackWithoutIndexKeepsOneFoundThere")
}
