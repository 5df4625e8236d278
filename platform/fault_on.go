//go:build cairnfault

package platform

import "os"

// faultPoint exits the process right after step when CAIRN_FAULT_AFTER
// names it (the variable and exit code of snapshot.FaultEnv): crash-safety
// tests stop a restore between making a temporary entry and renaming it.
// Only a binary built with -tags cairnfault reads it.
func faultPoint(step string) {
	if os.Getenv("CAIRN_FAULT_AFTER") == step {
		os.Exit(86)
	}
}
