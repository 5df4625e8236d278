package agent

import (
	"errors"
	"net/http"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/autodev"
)

// autodevServed finds the workspace at dir for a request; for an autodev
// workspace it runs fn and reports true (having answered), else false. A
// refusal is answered here and reported true.
func (d *Daemon) autodevServed(w http.ResponseWriter, r *http.Request, dir string, fn func(ws *workspace, repo *autodev.Repo)) bool {
	ws, ok := d.servedFor(w, r, dir)
	if !ok {
		return true
	}
	repo := ws.autodevOf()
	if repo == nil {
		if ws.set.Layout != layoutAutodev {
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
	return d.autodevServed(w, r, r.URL.Query().Get("workspace"), func(ws *workspace, repo *autodev.Repo) {
		l, err := repo.List(r.Context())
		if err != nil {
			writeError(w, http.StatusInternalServerError, "LIST_FAILED", err.Error())
			return
		}
		out := api.List{Workspace: ws.dir, Head: l.Head, Layout: layoutAutodev, Off: l.Off, Records: []api.Record{}}
		for _, e := range l.Entries {
			out.Records = append(out.Records, e.Record())
		}
		writeJSON(w, http.StatusOK, out)
	})
}

// autodevRestore answers POST /v1/restore and /v1/undo (target empty) for an
// autodev workspace, on the workspace's goroutine.
func (d *Daemon) autodevRestore(w http.ResponseWriter, r *http.Request, dir, target string, dry bool) bool {
	return d.autodevServed(w, r, dir, func(ws *workspace, repo *autodev.Repo) {
		if dry {
			writeError(w, http.StatusBadRequest, "BAD_REQUEST", "the autodev layout has no dry run: a restore is git reset --hard, after parking a dirty tree")
			return
		}
		out, err := d.restoreAutodev(ws, repo, target)
		if err != nil {
			answerError(w, err, codeRestoreFailed)
			return
		}
		writeJSON(w, http.StatusOK, out)
	})
}

// autodevStatus maps the autodev layout's errors to a status and code.
func autodevStatus(err error) (int, string, bool) {
	var re *autodev.RestoreError
	var blocked *autodev.BlockedError
	switch {
	case errors.As(err, &re) && re.Unknown:
		return http.StatusNotFound, "UNKNOWN_CHECKPOINT", true
	case errors.As(err, &re) && re.Live:
		return http.StatusConflict, "RUN_LIVE", true
	case errors.Is(err, autodev.ErrNotRepo):
		return http.StatusConflict, "CHECKPOINTS_OFF", true
	case errors.As(err, &blocked):
		return http.StatusConflict, "REPOSITORY_BUSY", true
	case errors.As(err, new(*autodev.UntrustedError)):
		return http.StatusConflict, "REPOSITORY_UNTRUSTED", true
	case errors.Is(err, errAutodevLayout):
		return http.StatusConflict, "AUTODEV_LAYOUT", true
	}
	return 0, "", false
}
