package client

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/cairn-dev/cairn/agent/api"
)

// EventStream is an open GET /v1/events: one JSON event a line.
type EventStream struct {
	body io.ReadCloser
	sc   *bufio.Scanner
}

// OpenEvents opens the daemon's event stream, only workspace's events when
// one is given. The daemon has subscribed this client when it returns. An
// error answer is an *Error.
func (c *Client) OpenEvents(ctx context.Context, workspace string) (*EventStream, error) {
	path := "http://cairn" + api.PathPrefix + "events"
	if workspace != "" {
		path += "?workspace=" + url.QueryEscape(workspace)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set(api.VersionHeader, api.Version)
	req.Close = true // never back to the idle pool: a later stream must reach whichever daemon now listens
	hc := *c.http
	hc.Timeout = 0 // a stream lasts as long as ctx
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("daemon at %s: %w", c.Socket, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		var e api.Error
		if json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&e) == nil && e.Message != "" {
			return nil, &Error{Status: resp.StatusCode, Code: e.Code, Message: e.Message}
		}
		return nil, fmt.Errorf("daemon answered %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	return &EventStream{body: resp.Body, sc: sc}, nil
}

// Next returns the next event's line as the daemon sent it, without its
// newline; io.EOF when the daemon ended the stream.
func (s *EventStream) Next() ([]byte, error) {
	if s.sc.Scan() {
		return s.sc.Bytes(), nil
	}
	if err := s.sc.Err(); err != nil {
		return nil, err
	}
	return nil, io.EOF
}

// Close ends the stream.
func (s *EventStream) Close() error { return s.body.Close() }

// Events streams events until ctx ends or the daemon closes the stream,
// calling fn for each.
func (c *Client) Events(ctx context.Context, workspace string, fn func(api.Event)) error {
	s, err := c.OpenEvents(ctx, workspace)
	if err != nil {
		return err
	}
	defer s.Close()
	for {
		line, err := s.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		var ev api.Event
		if json.Unmarshal(line, &ev) == nil {
			fn(ev)
		}
	}
}
