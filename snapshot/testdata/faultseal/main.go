// Command faultseal seals one checkpoint of the workspace named by its first
// argument (state in the second), or restores it (FAULTSEAL_RESTORE), for
// TestCrashAtEveryStep and TestRestoreKilledWhileWriting: they build
// it with -tags cairnfault, so CAIRN_FAULT_AFTER stops it mid-seal. It lives
// in testdata so that ./... never builds it into anything.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/cairn-dev/cairn/snapshot"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: faultseal WORKSPACE STATEDIR [CHANGED-PATH...]")
		os.Exit(2)
	}
	ctx := context.Background()
	// FAULTSEAL_ENGINE=git seals a full reconcile the git way (its steps).
	engine := snapshot.EngineInproc
	if e := os.Getenv("FAULTSEAL_ENGINE"); e != "" {
		engine = e
	}
	st, err := snapshot.Open(ctx, os.Args[1], snapshot.Options{Layout: snapshot.LayoutPlain, StateDir: os.Args[2], Engine: engine})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Paths after the state directory make the seal incremental (the
	// in-process engine's steps); none, a full reconcile (the in-process
	// engine's too, or git's with FAULTSEAL_ENGINE=git).
	var changed []string
	if len(os.Args) > 3 {
		changed = os.Args[3:]
	}
	// FAULTSEAL_RESTORE=<checkpoint> restores the work tree to it instead
	// (its pre-restore checkpoint a full reconcile).
	if target := os.Getenv("FAULTSEAL_RESTORE"); target != "" {
		if _, err := st.Restore(ctx, ckpt.Request{Target: target}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if _, err := st.Seal(ctx, snapshot.SealRequest{Kind: ckpt.KindManual, Label: "child", Changed: changed}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
