package agent

import (
	"net/http"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/autodev"
	"github.com/cairn-dev/cairn/agent/config"
	"github.com/cairn-dev/cairn/agent/workspace"
)

// autodevServed finds the workspace at dir for a request; for an autodev
// workspace it runs fn and reports true (having answered), else false. A
// refusal is answered here and reported true.
func (d *Daemon) autodevServed(w http.ResponseWriter, r *http.Request, dir string, fn func(ws *workspace.Workspace, repo *autodev.Repo)) bool {
	ws, ok := d.servedFor(w, r, dir)
	if !ok {
		return true
	}
	repo := ws.Autodev()
	if repo == nil {
		if ws.Settings().Layout != config.LayoutAutodev {
			return false
		}
		writeError(w, http.StatusServiceUnavailable, "NOT_READY", "the workspace is not open yet; see cairn status")
		return true
	}
	fn(ws, repo)
	return true
}

// autodevList answers GET /v1/list for an autodev workspace.
func (d *Daemon) autodevList(w http.ResponseWriter, r *http.Request) bool {
	return d.autodevServed(w, r, r.URL.Query().Get("workspace"), func(ws *workspace.Workspace, repo *autodev.Repo) {
		l, err := repo.List(r.Context())
		if err != nil {
			writeError(w, http.StatusInternalServerError, "LIST_FAILED", err.Error())
			return
		}
		out := api.List{Workspace: ws.Dir(), Head: l.Head, Layout: config.LayoutAutodev, Off: l.Off, Records: []api.Record{}}
		for _, e := range l.Entries {
			out.Records = append(out.Records, e.Record())
		}
		writeJSON(w, http.StatusOK, out)
	})
}
