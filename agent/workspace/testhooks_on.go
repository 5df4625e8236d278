//go:build cairnfault

package workspace

import (
	"context"
	"os"
	"strconv"
	"time"
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

// testStartupGateEnv is for tests only (testhooks_off.go): set to a path,
// each watch waits after its first seal, before its first lifecycle pass,
// until that path exists (at most a minute), so a test can write a marker
// between the two.
const testStartupGateEnv = "CAIRN_TEST_STARTUP_GATE"

func testStartupGate(ctx context.Context) {
	gate := os.Getenv(testStartupGateEnv)
	if gate == "" {
		return
	}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if _, err := os.Stat(gate); err == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// testWatchLagEnv is for tests only (testhooks_off.go): set to a duration,
// every workspace's watch handles each event that much late (watcher.Options.Lag),
// so a test can have the daemon read a marker before the changes made before it.
const testWatchLagEnv = "CAIRN_TEST_WATCH_LAG"

func testWatchLag() time.Duration {
	d, _ := time.ParseDuration(os.Getenv(testWatchLagEnv))
	return max(d, 0)
}
