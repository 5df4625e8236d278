package agent

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/agent/workspace"
	"github.com/rs/zerolog"
)

// TestEventsRefusedWhileStopping: a daemon that is stopping still accepts
// connections until its listener closes; /v1/events then answers 503 at
// once instead of a stream that ends at once (a reconnecting client spun on
// those).
func TestEventsRefusedWhileStopping(t *testing.T) {
	d := &Daemon{log: zerolog.Nop(), bus: newBus(), workspaces: map[string]*workspace.Workspace{}}
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), peerKey{}, uint32(0)))
	cancel() // the daemon's base context: stopping
	req := httptest.NewRequest(http.MethodGet, "/v1/events", nil).WithContext(ctx)
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	go func() { d.handleEvents(rec, req); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("handler did not return")
	}
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want 503; body %s", rec.Code, rec.Body)
	}
}
