//go:build !cairnfault

package workspace

import (
	"context"
	"time"
)

// testMaxWatches is 0 (the machine's own limit) in a build without the
// cairnfault tag: the shipped daemon reads no test variable (testhooks_on.go).
func testMaxWatches() int { return 0 }

// testStartupGate returns at once in a build without the cairnfault tag.
func testStartupGate(context.Context) {}

// testWatchLag is 0 (events handled at once) in a build without the cairnfault tag.
func testWatchLag() time.Duration { return 0 }
