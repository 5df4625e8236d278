package cli

import (
	"context"
	"errors"
	"fmt"
	"html"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/cairn-dev/cairn/agent/ui"
)

func init() {
	register("ui", "open the panel: browse checkpoints, see diffs, restore (a local web page)", runUI)
}

// runUI serves the panel on a free loopback port until interrupted
// (docs/operating.md, "The panel"): a Gate in front of a proxy to the socket, dialled
// as this user, so the daemon authorises the panel as it would this user's
// CLI.
func runUI(ctx context.Context, e *env, args []string) error {
	fs := newFlags("ui", "ui [--no-open] [--socket PATH]", e)
	var df daemonFlags
	df.register(fs)
	noOpen := fs.Bool("no-open", false, "print the URL only; do not open a browser")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		fs.Usage()
		return usageErr("ui takes no arguments")
	}
	c := df.client()
	if !c.Running(ctx) {
		return fmt.Errorf("no daemon answers on %s; start one with: cairn daemon --watch DIR", c.Socket)
	}
	// Loopback only, whatever the machine's names resolve to.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("panel: listen on 127.0.0.1: %w", err)
	}
	gate, err := ui.NewGate(ln.Addr().(*net.TCPAddr).Port, ui.SocketProxy(c.Socket))
	if err != nil {
		ln.Close()
		return err
	}
	srv := &http.Server{
		Handler:           gate,
		ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout:       2 * time.Minute,
		// No write timeout: the event stream stays open.
		BaseContext: func(net.Listener) context.Context { return ctx },
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()

	fmt.Fprintf(e.stdout, "cairn panel: %s\n(one-time link; Ctrl-C stops the panel)\n", gate.URL())
	if !*noOpen {
		cleanup, err := openBrowser(gate.URL())
		if err != nil {
			fmt.Fprintf(e.stderr, "cairn ui: could not open a browser (%v); open the URL above\n", err)
		}
		defer cleanup()
	}
	select {
	case <-ctx.Done():
	case err := <-done:
		return fmt.Errorf("panel stopped: %w", err)
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// openBrowser hands the browser a file only this user can read that moves
// on to the URL: the one-time token never shows in a process list, where
// another user could read it before the browser uses it.
func openBrowser(url string) (func(), error) {
	nothing := func() {}
	var opener string
	for _, name := range []string{"xdg-open", "open"} {
		if p, err := exec.LookPath(name); err == nil {
			opener = p
			break
		}
	}
	if opener == "" {
		return nothing, errors.New("neither xdg-open nor open is installed")
	}
	dir, err := os.MkdirTemp("", "cairn-ui-")
	if err != nil {
		return nothing, err
	}
	cleanup := func() { os.RemoveAll(dir) }
	page := filepath.Join(dir, "open.html")
	body := fmt.Sprintf(`<!doctype html><meta charset="utf-8"><meta http-equiv="refresh" content="0; url=%[1]s"><title>cairn</title><p><a href="%[1]s">Open the cairn panel</a></p>`, html.EscapeString(url))
	if err := os.WriteFile(page, []byte(body), 0o600); err != nil {
		cleanup()
		return nothing, err
	}
	cmd := exec.Command(opener, page)
	if err := cmd.Start(); err != nil {
		cleanup()
		return nothing, err
	}
	go func() { _ = cmd.Wait() }()
	return cleanup, nil
}
