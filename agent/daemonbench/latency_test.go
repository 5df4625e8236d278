package daemonbench

import (
	"strings"
	"testing"
)

// A checkpoint the benchmark did not disturb must not come out racy: the
// run fails and says which paths were named.
func TestLatencyCheckRacy(t *testing.T) {
	ok := &LatencyResult{Runs: make([]LatencyRun, 2), SamplesPerRun: 50}
	if err := ok.check(); err != nil {
		t.Fatalf("no racy checkpoint: %v", err)
	}
	bad := &LatencyResult{Runs: make([]LatencyRun, 2), SamplesPerRun: 50, Racy: 12}
	for i := range 12 {
		bad.RacyIssues = append(bad.RacyIssues, "c0"+string(rune('a'+i))+": f.go (changed after the lifecycle marker)")
	}
	err := bad.check()
	if err == nil {
		t.Fatal("12 racy checkpoints passed the benchmark")
	}
	for _, want := range []string{"12 of 100 checkpoints recorded racy", "c0a: f.go", "… 2 more"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "c0k:") {
		t.Errorf("error names more than 10 issues: %q", err)
	}
}
