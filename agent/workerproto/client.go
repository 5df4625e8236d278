package workerproto

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/cairn-dev/cairn/agent/api"
)

// Client is the supervisor's end of one worker's private socket: the
// requests of protocol.go, each read within its bound.
type Client struct {
	http  *http.Client
	proxy *httputil.ReverseProxy
}

// NewClient talks to the worker listening on sock. A forwarded request the
// worker does not answer is handed to unanswered, which answers its asker.
func NewClient(sock string, unanswered func(w http.ResponseWriter, r *http.Request, err error)) *Client {
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		var dd net.Dialer
		return dd.DialContext(ctx, "unix", sock)
	}
	target := &url.URL{Scheme: "http", Host: "worker"}
	return &Client{
		http: &http.Client{Transport: &http.Transport{DialContext: dial, MaxIdleConnsPerHost: 4}},
		proxy: &httputil.ReverseProxy{
			Rewrite: func(r *httputil.ProxyRequest) {
				r.SetURL(target)
				r.Out.Host = "worker"
			},
			Transport:     &http.Transport{DialContext: dial, MaxIdleConnsPerHost: 16},
			FlushInterval: -1,
			ErrorHandler:  unanswered,
		},
	}
}

// Assign hands the worker its workspaces (body: the JSON of PathAssign).
// Only the status code of the answer counts; at most MaxAssignReply of it is read.
func (c *Client) Assign(ctx context.Context, body []byte) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://worker"+PathAssign, bytes.NewReader(body))
	req.Header.Set(api.VersionHeader, api.Version)
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, MaxAssignReply))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("worker refused its workspaces: %s", resp.Status)
	}
	return nil
}

// Status asks for the worker's status rows, reading at most limit bytes
// (ReadStatus). The rows are still to be checked (CheckStatusRows).
func (c *Client) Status(ctx context.Context, limit int64) ([]api.WorkspaceStatus, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://worker"+PathStatus, nil)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("not answering: %w", err)
	}
	defer resp.Body.Close()
	return ReadStatus(resp.Body, limit)
}

// Events opens the worker's event stream, until ctx ends or the worker
// closes it. Its lines are still to be read (ReadLine, MaxEvent) and
// checked (CheckEvent).
func (c *Client) Events(ctx context.Context) (io.ReadCloser, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://worker"+PathEvents, nil)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// Metrics scrapes the worker's own registry (cairn_ families only), bounded
// for a worker serving n workspaces (ReadMetrics: what a refused reply
// held is counted in dropped, why says why). The series are still to be
// checked (SeriesRules.Check).
func (c *Client) Metrics(ctx context.Context, perWS bool, n int) (fams []*dto.MetricFamily, dropped int, why string, err error) {
	u := "http://worker" + PathMetrics
	if perWS {
		u += "?per_workspace=1"
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeProtoDelim)))
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, 0, "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, 0, "", fmt.Errorf("worker metrics: %s", resp.Status)
	}
	return ReadMetrics(resp.Body, expfmt.ResponseFormat(resp.Header), n)
}

// Forward sends a request about one of the worker's workspaces (one of
// Forwarded) to it and streams its answer back unchanged.
func (c *Client) Forward(w http.ResponseWriter, r *http.Request) {
	c.proxy.ServeHTTP(w, r)
}
