//go:build cairnfault

package workspace

import (
	"os"
	"strconv"
)

// testMaxWatchesEnv is for tests only, and only a build with -tags
// cairnfault reads it (the tests' daemon, agent/harness_test.go; the shipped
// build has testhooks_off.go): set to N, every workspace's watch behaves as
// if the inotify watch limit were N folders, so degraded mode is reached
// without lowering the machine-wide sysctl.
const testMaxWatchesEnv = "CAIRN_TEST_MAX_WATCHES"

func testMaxWatches() int {
	n, _ := strconv.Atoi(os.Getenv(testMaxWatchesEnv))
	return max(n, 0)
}
