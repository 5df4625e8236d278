package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"

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

// ShowPage is Show with the files it changed, limit of them from offset
// (limit 0: all), counted by top folder; Stat is then git's one-line
// summary (GET /v1/show?files=1&folders=1&offset=K&limit=N).
func (c *Client) ShowPage(ctx context.Context, workspace, id string, offset, limit int) (api.Diff, error) {
	q := url.Values{"workspace": {workspace}, "id": {id}, "files": {"1"}, "folders": {"1"},
		"offset": {strconv.Itoa(offset)}, "limit": {strconv.Itoa(limit)}}
	var d api.Diff
	return d, c.get(ctx, "show?"+q.Encode(), &d)
}

// Verify compares checkpoint id (empty: the newest with a commit) with the
// work tree as git would record it now, and looks up the objects it names.
func (c *Client) Verify(ctx context.Context, workspace, id string) (api.Verification, error) {
	q := url.Values{"workspace": {workspace}}
	if id != "" {
		q.Set("id", id)
	}
	var v api.Verification
	return v, c.get(ctx, "verify?"+q.Encode(), &v)
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
