package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/mattn/go-isatty"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/platform/printable"
)

// progressLines draws how far a long operation has come on stderr: one
// line redrawn in place on a terminal, a JSON line a report with --json,
// nothing on a pipe otherwise.
type progressLines struct {
	e          *env
	json, tty  bool
	mu         sync.Mutex
	drawn      bool
	last       time.Time
	lastDone   int
	lastOpText string
}

// newProgress is the progress drawer for a command (asJSON: --json given);
// nil when nothing would be drawn.
func newProgress(e *env, asJSON bool) *progressLines {
	p := &progressLines{e: e, json: asJSON}
	if f, ok := e.stderr.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
		p.tty = true
	}
	if !p.tty && !p.json {
		return nil
	}
	return p
}

// show reports pr: redrawn at most ten times a second on a terminal.
func (p *progressLines) show(pr api.Progress) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if pr.Done == p.lastDone && pr.Op == p.lastOpText || p.tty && !p.json && now.Sub(p.last) < 100*time.Millisecond && pr.Done < pr.Total {
		return
	}
	p.last, p.lastDone, p.lastOpText = now, pr.Done, pr.Op
	if p.json {
		b, _ := json.Marshal(struct {
			Progress api.Progress `json:"progress"`
		}{pr})
		fmt.Fprintln(p.e.stderr, string(b))
		return
	}
	fmt.Fprintf(p.e.stderr, "\r%s\x1b[K", progressLine(pr))
	p.drawn = true
}

// done clears the line a terminal shows.
func (p *progressLines) done() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn {
		fmt.Fprint(p.e.stderr, "\r\x1b[K")
		p.drawn = false
	}
}

// ticking shows op with the time it has taken, once a second, until the
// function it returns is called: for an operation that cannot say how far
// it has come (a fetch is one git process).
func (p *progressLines) ticking(ctx context.Context, op string) (stop func()) {
	if p == nil {
		return func() {}
	}
	began := time.Now()
	return p.every(ctx, time.Second, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.json {
			b, _ := json.Marshal(struct {
				Progress api.Progress `json:"progress"`
			}{api.Progress{Op: op, Since: began}})
			fmt.Fprintln(p.e.stderr, string(b))
			return
		}
		fmt.Fprintf(p.e.stderr, "\r%s… %s\x1b[K", printable.String(op), time.Since(began).Round(time.Second))
		p.drawn = true
	})
}

// every runs fn each interval on its own goroutine until ctx ends or the
// function it returns is called, which waits for it and clears the line.
func (p *progressLines) every(ctx context.Context, interval time.Duration, fn func()) (stop func()) {
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				fn()
			}
		}
	}()
	return func() { close(done); <-ended; p.done() }
}

type progressKey struct{}

// withProgress carries the command's progress drawer to its backend (a
// daemon backend reads the workspace's progress from status meanwhile).
func withProgress(ctx context.Context, p *progressLines) context.Context {
	if p == nil {
		return ctx
	}
	return context.WithValue(ctx, progressKey{}, p)
}

// progressOf is the drawer ctx carries, or nil.
func progressOf(ctx context.Context) *progressLines {
	p, _ := ctx.Value(progressKey{}).(*progressLines)
	return p
}
