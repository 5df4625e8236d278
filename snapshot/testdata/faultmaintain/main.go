// Command faultmaintain runs maintenance on the store of the workspace named
// by its first argument (state in the second), for
// TestMaintainCrashAtEveryStep: that test builds it with -tags cairnfault, so
// CAIRN_FAULT_AFTER stops it after a step (pack-refs, repack, prune), and
// also kills it (with its git) at random moments. Unreachable objects are
// pruned at once (the worst case for reachable ones). It lives in testdata so
// that ./... never builds it into anything.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/cairn-dev/cairn/snapshot"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: faultmaintain WORKSPACE STATEDIR")
		os.Exit(2)
	}
	ctx := context.Background()
	st, err := snapshot.Open(ctx, os.Args[1], snapshot.Options{Layout: snapshot.LayoutPlain, StateDir: os.Args[2], NoCreate: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	res, err := st.Maintain(ctx, snapshot.MaintainOptions{PruneGrace: snapshot.PruneNow})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(res.Steps, res.Skipped)
}
