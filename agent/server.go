package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/cairn-dev/cairn/agent/workspace"
)

// server is the daemon's HTTP API on its Unix socket.
type server struct {
	http *http.Server
	ln   net.Listener
	path string
	keep bool // the socket file is not ours to remove
	done chan struct{}
}

// listen creates the socket safely: a live daemon on the path is refused, a
// stale socket file replaced, the folder and modes set deliberately.
func (d *Daemon) listen(ctx context.Context) (*server, error) {
	path := d.SocketPath()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("socket folder: %w", err)
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return nil, fmt.Errorf("a daemon already answers on %s", path)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("%s exists and is not a socket; not replacing it", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove stale socket: %w", err)
		}
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	// Every local user may connect; each request is authorised on its own.
	if err := os.Chmod(path, 0o666); err != nil {
		ln.Close()
		return nil, err
	}
	return d.serve(ctx, ln, path)
}

// maxConnsPerUser caps the connections one uid other than root holds open at
// once, so one user cannot take the descriptors every other user needs.
var maxConnsPerUser = 64

// serve answers the API on ln.
func (d *Daemon) serve(ctx context.Context, ln net.Listener, path string) (*server, error) {
	mux := http.NewServeMux()
	d.routes(mux)
	capped := newCapListener(ln, maxConnsPerUser, d.log)
	s := &server{ln: capped, path: path, done: make(chan struct{}),
		http: &http.Server{
			Handler:           versioned(d.route(mux)),
			ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout:       30 * time.Second,
			IdleTimeout:       60 * time.Second,
			BaseContext:       func(net.Listener) context.Context { return ctx },
			// Who is asking is decided once per connection, from the kernel.
			ConnContext: func(ctx context.Context, c net.Conn) context.Context {
				if pc, ok := c.(*peerConn); ok && pc.known {
					return context.WithValue(ctx, peerKey{}, pc.uid)
				}
				return ctx
			},
		}}
	go func() {
		defer close(s.done)
		if err := s.http.Serve(capped); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.log.Error().Err(err).Msg("socket server stopped")
		}
	}()
	return s, nil
}

func (s *server) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = s.http.Shutdown(ctx)
	<-s.done
	if !s.keep {
		_ = os.Remove(s.path)
	}
}

// lookup finds a workspace this process serves by its exact path.
func (d *Daemon) lookup(dir string) *workspace.Workspace {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.workspaces[dir]
}
