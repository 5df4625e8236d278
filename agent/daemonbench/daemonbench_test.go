package daemonbench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/agent/daemonbench"
)

// TestRunTiny runs every part once on tiny trees, against a freshly built
// daemon. It checks that the benchmark works and that what it reports holds
// together, nothing about speed.
func TestRunTiny(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the cairn binary and runs daemons for about 15 s")
	}
	bin := filepath.Join(t.TempDir(), "cairn")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/cairn-dev/cairn/cmd/cairn").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cfg := daemonbench.Config{
		Bin: bin, Runs: 1, Dir: t.TempDir(), JSON: true,
		Files: 200, Samples: 3, Changed: 5,
		WatchFiles: 400, Idle: 200 * time.Millisecond,
		StormWrites: 400, StormFor: time.Second, StormQuiet: 200 * time.Millisecond, StormMaxWait: 400 * time.Millisecond,
	}
	var out, progress bytes.Buffer
	cfg.Progress = &progress
	if err := daemonbench.Run(context.Background(), cfg, &out); err != nil {
		t.Fatalf("Run: %v\nprogress:\n%s", err, progress.String())
	}
	var rep daemonbench.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("the JSON report does not decode: %v\n%s", err, out.String())
	}
	if rep.Latency == nil || rep.Watch == nil || rep.Storm == nil {
		t.Fatalf("a part is missing from the report:\n%s", out.String())
	}
	if l := rep.Latency; len(l.Runs) != 1 || len(l.Runs[0].SamplesMS) != 3 || l.Missing+l.Failed != 0 {
		t.Errorf("latency: want 1 run of 3 sealed samples, got %+v", l)
	}
	if w := rep.Watch; len(w.Runs) != 1 || w.Runs[0].Watches != w.Folders || w.Runs[0].BaselineState != "ok" {
		t.Errorf("watch: want every one of %d folders watched and an ok baseline, got %+v", w.Folders, w.Runs)
	}
	if s := rep.Storm; len(s.Runs) != 1 || !s.AllEqual {
		t.Errorf("storm: the final checkpoint does not equal the disk: %+v", s.Runs)
	}

	// The tables print too.
	cfg.JSON, cfg.Parts, cfg.Progress = false, []string{daemonbench.PartWatch}, nil
	out.Reset()
	if err := daemonbench.Run(context.Background(), cfg, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "== 2. watching 400 files") {
		t.Errorf("no watch table in:\n%s", out.String())
	}
}
