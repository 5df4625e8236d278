// Package testsupport holds the few helpers the tests of several packages
// share: the one wait for a condition, and the small file systems some tests
// need (a tmpfs for a real ENOSPC, an ext4 with whole-second timestamps).
//
// Only _test.go files import it. It imports package testing, so the shipped
// binary linking it fails TestShippedBinaryLinksNoTestCode (deps_test.go).
package testsupport

import (
	"testing"
	"time"
)

// Poll calls cond until it returns true or within has passed, and reports
// whether it did. It is for waits whose timeout is not a plain failure (a
// failure with more to say, or an Errorf that lets the test go on); WaitFor
// is the usual form. The pause between calls grows from 1 ms to 100 ms, so a
// quick condition is seen at once and a slow one (a process to run) is not
// called in a busy loop.
func Poll(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	pause := time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pause)
		pause = min(2*pause, 100*time.Millisecond)
	}
	return true
}

// WaitFor polls cond (see Poll) and fails the test if it does not hold
// within the given time; what names the condition in the failure.
func WaitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Poll(within, cond) {
		t.Fatalf("timed out after %s waiting for: %s", within, what)
	}
}
