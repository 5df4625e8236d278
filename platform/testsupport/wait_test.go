package testsupport

import (
	"testing"
	"time"
)

func TestPollSeesACondition(t *testing.T) {
	calls := 0
	if !Poll(10*time.Second, func() bool { calls++; return calls == 5 }) {
		t.Fatal("Poll gave up on a condition that held at the fifth call")
	}
	if calls != 5 {
		t.Errorf("cond called %d times after it held, want 5", calls)
	}
}

func TestPollGivesUp(t *testing.T) {
	start := time.Now()
	if Poll(50*time.Millisecond, func() bool { return false }) {
		t.Fatal("Poll said a condition that never holds held")
	}
	if time.Since(start) < 50*time.Millisecond {
		t.Errorf("Poll gave up after %s, before its %s", time.Since(start), 50*time.Millisecond)
	}
}
