package agent

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/cairn-dev/cairn/agent/config"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
)

// handleMetrics is GET /metrics on the socket: anyone the socket lets in
// reads the totals; per-workspace series (when configured) only of the
// workspaces the peer may act on.
func (d *Daemon) handleMetrics(w http.ResponseWriter, r *http.Request) {
	uid, known := peerOf(r)
	d.serveMetrics(w, r, func(dir string) bool { return known && d.mayAct(uid, dir) })
}

// serveMetrics answers a scrape in the format the scraper asked for.
func (d *Daemon) serveMetrics(w http.ResponseWriter, r *http.Request, visible func(dir string) bool) {
	perWS := r.URL.Query().Get("per_workspace") == "1" // a worker: its supervisor's config decides
	if !d.opts.Worker {
		d.mu.Lock()
		perWS = d.cfg.PerWorkspaceMetrics
		d.mu.Unlock()
	}
	g := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		return d.gatherMetrics(r.Context(), perWS, visible)
	})
	promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}).ServeHTTP(w, r)
}

// listenMetrics serves GET /metrics on metrics_listen (read at start), if
// set, until ctx ends; the returned stop waits for it. A listener that
// cannot start is logged: checkpoints matter more than metrics.
func (d *Daemon) listenMetrics(ctx context.Context) (stop func()) {
	d.mu.Lock()
	addr, remote := d.cfg.MetricsListen, d.cfg.MetricsAllowRemote
	d.mu.Unlock()
	if addr == "" {
		return func() {}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		d.log.Error().Err(err).Str("metrics_listen", addr).Msg("metrics listener not started; /metrics answers on the socket only")
		return func() {}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		// A loopback listener answers loopback names only: a web page that
		// rebinds its own name to 127.0.0.1 reads nothing.
		if !remote && !config.LoopbackHost(r.Host) {
			writeError(w, http.StatusMisdirectedRequest, "NOT_LOOPBACK", "metrics answer loopback host names only (localhost, 127.0.0.1, [::1])")
			return
		}
		d.serveMetrics(w, r, func(string) bool { return true })
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second,
		IdleTimeout: 60 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.log.Error().Err(err).Msg("metrics listener stopped")
		}
	}()
	d.log.Info().Str("metrics_listen", ln.Addr().String()).Msg("metrics listening")
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-done
	}
}
