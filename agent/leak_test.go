package agent

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/client"
	"github.com/cairn-dev/cairn/platform/testsupport"
)

// TestDaemonStopsEveryGoroutine runs a daemon in this process over a plain
// and a Hankweave workspace, stops it, and checks it leaves no goroutine behind.
func TestDaemonStopsEveryGoroutine(t *testing.T) {
	before := runtime.NumGoroutine()
	plain, exec, state := t.TempDir(), t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(plain, "a.txt"), []byte("a"), 0o644)
	os.MkdirAll(filepath.Join(exec, ".hankweave"), 0o755)
	os.MkdirAll(filepath.Join(exec, "agentRoot"), 0o755)
	sock := filepath.Join(state, "cairn.sock")
	d := New(nil, Options{Watch: []string{plain, exec}, StateDir: state, Socket: sock}, zerolog.Nop())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()

	c := client.New(sock)
	var st api.Status
	var err error
	if !testsupport.Poll(20*time.Second, func() bool {
		st, err = c.Status(context.Background())
		return err == nil && len(st.Workspaces) == 2 && st.Workspaces[0].Last != "" && st.Workspaces[1].Last != ""
	}) {
		t.Fatalf("workspaces not sealed: %+v %v", st, err)
	}
	os.WriteFile(filepath.Join(plain, "b.txt"), []byte("b"), 0o644)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	c.Close()
	if !testsupport.Poll(10*time.Second, func() bool { return runtime.NumGoroutine() <= before }) {
		buf := make([]byte, 1<<20)
		n := runtime.Stack(buf, true)
		t.Fatalf("%d goroutines before, %d after stopping:\n%s", before, runtime.NumGoroutine(), leaked(string(buf[:n])))
	}
}

// leaked keeps the stacks that are not the test runner's own.
func leaked(all string) string {
	var out []string
	for _, g := range strings.Split(all, "\n\n") {
		if !strings.Contains(g, "testing.tRunner") && !strings.Contains(g, "testing.(*T).Run") && !strings.Contains(g, "testing.runTests") {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}
