//go:build unix

package agent

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairn-dev/cairn/agent/workerproto"
)

// lockedBuffer is a log written from one goroutine and read from another.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestWorkerLogNestedAndBounded: what a worker writes on its stdout and
// stderr reaches root's log only nested under the worker's uid (a line
// forged as the supervisor's stays the worker's), cut to 16 KiB a line,
// and a flood is cut to the rate with the drop counted.
func TestWorkerLogNestedAndBounded(t *testing.T) {
	var out lockedBuffer
	d := New(nil, Options{StateDir: t.TempDir()}, zerolog.New(&out))
	wk := d.newWorker(4242, 4242, t.TempDir())
	pr, pw := io.Pipe()
	began := time.Now()
	done := make(chan struct{})
	go func() { defer close(done); wk.pumpLog(pr) }()

	forged := `{"level":"error","message":"cairn daemon started","worker_uid":0}`
	fmt.Fprintln(pw, forged)
	fmt.Fprintln(pw, "plain text \x1b[31m with an escape")
	fmt.Fprintln(pw, strings.Repeat("z", 100<<10))
	const flood = 20_000
	for i := range flood {
		fmt.Fprintf(pw, `{"level":"info","message":"line %d"}`+"\n", i)
	}
	fmt.Fprint(pw, "no newline at the end")
	pw.Close()
	<-done
	took := time.Since(began)

	lines := 0
	sc := bufio.NewScanner(strings.NewReader(out.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l map[string]any
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("root's log line is not JSON: %q", sc.Text())
		}
		if l["message"] == "refused what a worker sent" {
			continue
		}
		lines++
		if l["message"] != "worker log" || l["worker_uid"] != float64(4242) {
			t.Errorf("a worker's line not tagged as the worker's: %q", sc.Text())
		}
		if l["worker"] == nil && l["worker_text"] == nil {
			t.Errorf("a worker's line not nested: %q", sc.Text())
		}
		if s, ok := l["worker_text"].(string); ok && len(s) > workerproto.MaxLogLine {
			t.Errorf("a log line of %d bytes reached root's log", len(s))
		}
	}
	if !strings.Contains(out.String(), `"worker":`+forged) {
		t.Errorf("the forged line is not nested whole under worker")
	}
	if limit := workerproto.LogBurst + int(took.Seconds()*workerproto.LogRate) + 1; lines > limit || lines < 4 {
		t.Errorf("%d of %d lines logged in %s, want at most %d", lines, flood+4, took, limit)
	}
	if n := dropsOf(wk)["log"]; n != int64(flood+4-lines) {
		t.Errorf("log lines dropped: %d, want %d", n, flood+4-lines)
	}
}
