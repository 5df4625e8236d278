package client

import (
	"context"
	"net/http"

	"github.com/cairn-dev/cairn/agent/api"
)

// Pin pins (or, unpin, unpins) a checkpoint of the workspace.
func (c *Client) Pin(ctx context.Context, workspace, target string, unpin bool) (api.PinResult, error) {
	path := "pin"
	if unpin {
		path = "unpin"
	}
	var out api.PinResult
	return out, c.do(ctx, http.MethodPost, path, api.PinRequest{Workspace: workspace, Target: target}, &out)
}

// Prune applies the workspace's retention policies and size budget now.
func (c *Client) Prune(ctx context.Context, req api.PruneRequest) (api.PruneResult, error) {
	var out api.PruneResult
	return out, c.do(ctx, http.MethodPost, "prune", req, &out)
}
