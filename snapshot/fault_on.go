//go:build cairnfault

package snapshot

import "os"

// faultPoint exits the process right after step when FaultEnv names it.
func faultPoint(step string) {
	if os.Getenv(FaultEnv) == step {
		os.Exit(FaultExitCode)
	}
}
