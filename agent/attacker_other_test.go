//go:build !linux

package agent_test

// attackerMain: the security tests run on Linux only.
func attackerMain() int { return 2 }
