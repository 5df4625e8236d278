package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"

	"github.com/cairn-dev/cairn/agent/workerproto"
)

// The HTTP side of the supervisor and its workers: the supervisor forwards
// a request about a workspace a worker serves to that worker
// (workerproto.Forwarded), and a worker takes its workspaces on
// workerproto.PathAssign. docs/worker-protocol.md.

// route sends a request about a workspace a worker serves to that worker,
// after checking the path lexically and the peer's right to it.
func (d *Daemon) route(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !slices.Contains(workerproto.Forwarded, r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		dir, ok := requestWorkspace(w, r)
		if !ok {
			return
		}
		wk := d.workerFor(dir)
		if wk == nil {
			next.ServeHTTP(w, r)
			return
		}
		if err := checkPath(dir); err != nil {
			writeError(w, http.StatusBadRequest, "BAD_WORKSPACE", err.Error())
			return
		}
		uid, known := peerOf(r)
		if !known || !d.mayAct(uid, dir) {
			writeError(w, http.StatusForbidden, "FORBIDDEN", "not a workspace you may act on: "+dir)
			return
		}
		wk.client.Forward(w, r)
	})
}

// requestWorkspace reads the workspace a request names (query or body),
// leaving the body readable again. It answers an oversized body itself.
func requestWorkspace(w http.ResponseWriter, r *http.Request) (string, bool) {
	if r.Method == http.MethodGet {
		return r.URL.Query().Get("workspace"), true
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		writeError(w, http.StatusBadRequest, "BAD_REQUEST", "could not read the request body: "+err.Error())
		return "", false
	}
	if len(body) > maxBody {
		writeError(w, http.StatusRequestEntityTooLarge, "BODY_TOO_LARGE", fmt.Sprintf("request body is larger than %d bytes", maxBody))
		return "", false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	var v struct {
		Workspace string `json:"workspace"`
		Data      struct {
			Workspace string `json:"workspace"`
		} `json:"data"`
	}
	_ = json.Unmarshal(body, &v) // a malformed body gets its answer from the handler
	if v.Workspace == "" {
		v.Workspace = v.Data.Workspace
	}
	return v.Workspace, true
}

// peerOf is the uid the kernel gave for the request's connection.
func peerOf(r *http.Request) (uint32, bool) {
	uid, ok := r.Context().Value(peerKey{}).(uint32)
	return uid, ok
}

// handleAssign takes the supervisor's list of workspaces (worker mode only;
// only root can reach a worker's socket, and the peer is checked again).
func (d *Daemon) handleAssign(w http.ResponseWriter, r *http.Request) {
	if uid, ok := peerOf(r); !ok || uid != 0 {
		writeError(w, http.StatusForbidden, "FORBIDDEN", "only the supervisor assigns workspaces")
		return
	}
	var a assignment
	if !decode(w, r, &a) {
		return
	}
	for dir := range a.Workspaces {
		if err := checkPath(dir); err != nil {
			writeError(w, http.StatusBadRequest, "BAD_WORKSPACE", err.Error())
			return
		}
	}
	d.mu.Lock()
	d.assigned = a.Workspaces
	d.mu.Unlock()
	d.discover(d.ctx())
	writeJSON(w, http.StatusOK, map[string]int{"workspaces": len(a.Workspaces)})
}

// unanswered answers a forwarded request the worker did not answer.
func (wk *worker) unanswered(w http.ResponseWriter, r *http.Request, err error) {
	wk.log.Warn().Err(err).Str("path", r.URL.Path).Msg("worker did not answer")
	writeError(w, http.StatusServiceUnavailable, "WORKER_UNAVAILABLE",
		fmt.Sprintf("the worker process for uid %d did not answer (%v); see cairn status", wk.uid, err))
}
