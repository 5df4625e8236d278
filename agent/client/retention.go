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
