// Package client talks to the cairn daemon over its Unix socket.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/cairn-dev/cairn/agent/api"
)

// Client is a connection to one daemon socket.
type Client struct {
	Socket string
	http   *http.Client
}

// New makes a client for the socket at path.
func New(path string) *Client {
	return &Client{Socket: path, http: &http.Client{
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}},
		Timeout: 10 * time.Minute,
	}}
}

// Running reports whether a daemon answers on the socket.
func (c *Client) Running(ctx context.Context) bool {
	conn, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "unix", c.Socket)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}

// Status asks the daemon for its status.
func (c *Client) Status(ctx context.Context) (api.Status, error) {
	var st api.Status
	return st, c.get(ctx, "status", &st)
}

// Checkpoint asks the daemon to seal one checkpoint. A record can come back
// with an error (a seal recorded as failed).
func (c *Client) Checkpoint(ctx context.Context, req api.CheckpointRequest) (api.Record, error) {
	var rec api.Record
	err := c.do(ctx, http.MethodPost, "checkpoint", req, &rec)
	return rec, err
}

// Error is an error answer from the daemon.
type Error struct {
	Status  int
	Code    string
	Message string
	Lost    []api.LostObject // TARGET_DAMAGED: what the target lacks
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

func (c *Client) get(ctx context.Context, path string, out any) error {
	return c.do(ctx, http.MethodGet, path, nil, out)
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var reqBody io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		reqBody = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://cairn"+api.PathPrefix+path, reqBody)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set(api.VersionHeader, api.Version)
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("daemon at %s: %w", c.Socket, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			api.Error
			Record json.RawMessage `json:"record"`
		}
		if json.Unmarshal(body, &e) == nil && e.Message != "" {
			// A failed seal's answer carries its ledger record: kept for the caller.
			if len(e.Record) > 0 && out != nil {
				_ = json.Unmarshal(e.Record, out)
			}
			return &Error{Status: resp.StatusCode, Code: e.Code, Message: e.Message, Lost: e.Lost}
		}
		// An older daemon answered a failed seal with its bare record: its
		// error field is the reason.
		var rec struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(body, &rec) == nil && rec.Error != "" {
			_ = json.Unmarshal(body, out)
			return &Error{Status: resp.StatusCode, Code: "SEAL_FAILED", Message: rec.Error}
		}
		return fmt.Errorf("daemon answered %s", resp.Status)
	}
	return json.Unmarshal(body, out)
}

// Close drops idle connections to the daemon.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// GC asks the daemon to run maintenance on the workspace's store now.
func (c *Client) GC(ctx context.Context, req api.GCRequest) (api.MaintenanceResult, error) {
	var out api.MaintenanceResult
	return out, c.do(ctx, http.MethodPost, "gc", req, &out)
}
