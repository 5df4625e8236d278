package client

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/cairn-dev/cairn/agent/api"
)

// Command sends one of the runtime's commands ({id, type, data}) and decodes
// the reply's data into out.
func (c *Client) Command(ctx context.Context, cmd api.Command, out any) error {
	var reply struct {
		ID   string          `json:"id"`
		Type string          `json:"type"`
		Data json.RawMessage `json:"data"`
	}
	if err := c.do(ctx, http.MethodPost, "command", cmd, &reply); err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(reply.Data, out)
}

// Restore asks the daemon to restore a workspace (or plan it: DryRun).
func (c *Client) Restore(ctx context.Context, req api.RestoreRequest) (api.RestoreResult, error) {
	var res api.RestoreResult
	return res, c.do(ctx, http.MethodPost, "restore", req, &res)
}

// Undo returns a workspace to its newest pre-restore checkpoint.
func (c *Client) Undo(ctx context.Context, workspace string) (api.RestoreResult, error) {
	return c.UndoWith(ctx, api.UndoRequest{Workspace: workspace})
}

// UndoWith is Undo with paths or a dry run.
func (c *Client) UndoWith(ctx context.Context, req api.UndoRequest) (api.RestoreResult, error) {
	var res api.RestoreResult
	return res, c.do(ctx, http.MethodPost, "undo", req, &res)
}

// List is a workspace's ledger, newest first, with the position.
func (c *Client) List(ctx context.Context, workspace string) (api.List, error) {
	var l api.List
	return l, c.get(ctx, "list?workspace="+url.QueryEscape(workspace), &l)
}

// Diff compares two checkpoints (b empty: the work tree).
func (c *Client) Diff(ctx context.Context, workspace, a, b string, patch bool) (api.Diff, error) {
	q := url.Values{"workspace": {workspace}, "a": {a}}
	if b != "" {
		q.Set("b", b)
	}
	if patch {
		q.Set("patch", "1")
	}
	var d api.Diff
	return d, c.get(ctx, "diff?"+q.Encode(), &d)
}

// Show is one checkpoint and the files it changed.
func (c *Client) Show(ctx context.Context, workspace, id string) (api.Diff, error) {
	var d api.Diff
	return d, c.get(ctx, "show?"+url.Values{"workspace": {workspace}, "id": {id}}.Encode(), &d)
}

// Watch adds (or, unwatch, removes) a watch root.
func (c *Client) Watch(ctx context.Context, workspace string, unwatch bool) error {
	path := "watch"
	if unwatch {
		path = "unwatch"
	}
	var out map[string]any
	return c.do(ctx, http.MethodPost, path, api.WorkspaceRequest{Workspace: workspace}, &out)
}

// Events streams events until ctx ends or the daemon closes the stream,
// calling fn for each.
func (c *Client) Events(ctx context.Context, workspace string, fn func(api.Event)) error {
	path := "http://cairn" + api.PathPrefix + "events"
	if workspace != "" {
		path += "?workspace=" + url.QueryEscape(workspace)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	req.Header.Set(api.VersionHeader, api.Version)
	hc := *c.http
	hc.Timeout = 0
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("daemon answered %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var ev api.Event
		if json.Unmarshal(sc.Bytes(), &ev) == nil {
			fn(ev)
		}
	}
	return sc.Err()
}
