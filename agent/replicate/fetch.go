package replicate

// Fetching one replicated workspace into a local store (docs/cairn-formats.md,
// "Fleet replication").

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/cairn-dev/cairn/snapshot"
)

// FindWorkspace picks the workspace from names among list: "<host>/<key>",
// "<host>/<path>" (the original path, its leading '/' optional) or
// "<host>/<base name>" when only one of the host's workspaces has it.
func FindWorkspace(list []FleetWorkspace, from string) (FleetWorkspace, error) {
	host, ws, ok := strings.Cut(from, "/")
	if !ok || host == "" || ws == "" {
		return FleetWorkspace{}, fmt.Errorf("%q: want <host>/<workspace key or path>", from)
	}
	var mine []FleetWorkspace
	hosts := map[string]bool{}
	for _, w := range list {
		hosts[w.Host] = true
		if w.Host == host {
			mine = append(mine, w)
		}
	}
	if len(mine) == 0 {
		if len(hosts) == 0 {
			return FleetWorkspace{}, fmt.Errorf("no host %q has replicated workspaces there", host)
		}
		return FleetWorkspace{}, fmt.Errorf("no host %q has replicated workspaces there (hosts: %s)", host, strings.Join(keys(hosts), ", "))
	}
	clean := path.Clean("/" + ws)
	var byKey, byPath, byBase []FleetWorkspace
	for _, w := range mine {
		switch {
		case w.Key == ws:
			byKey = append(byKey, w)
		case w.Manifest != nil && w.Manifest.Workspace != "" && path.Clean(w.Manifest.Workspace) == clean:
			byPath = append(byPath, w)
		case !strings.Contains(ws, "/") && (baseOfKey(w.Key) == ws || w.Manifest != nil && path.Base(w.Manifest.Workspace) == ws):
			byBase = append(byBase, w)
		}
	}
	for _, found := range [][]FleetWorkspace{byKey, byPath, byBase} {
		switch len(found) {
		case 0:
			continue
		case 1:
			return found[0], nil
		}
		var names []string
		for _, w := range found {
			names = append(names, describe(w))
		}
		return FleetWorkspace{}, fmt.Errorf("%q names %d workspaces on %s: %s; give the key", from, len(found), host, strings.Join(names, ", "))
	}
	var names []string
	for _, w := range mine {
		names = append(names, describe(w))
	}
	return FleetWorkspace{}, fmt.Errorf("host %s has no workspace %q there (its workspaces: %s)", host, ws, strings.Join(names, ", "))
}

// baseOfKey is a key without its hash: the folder's base name made safe.
func baseOfKey(key string) string {
	if i := strings.LastIndexByte(key, '-'); i > 0 {
		return key[:i]
	}
	return key
}

func describe(w FleetWorkspace) string {
	if w.Manifest != nil && w.Manifest.Workspace != "" {
		return w.Key + " (" + w.Manifest.Workspace + ")"
	}
	return w.Key
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// FetchRefspecs bring host/key's refs to their local names. Forced: they
// fill a store that has no checkpoints, whose own main (an empty setup
// commit) the remote's replaces.
func FetchRefspecs(host, key string) []string {
	base := Base(host, key)
	return []string{"+" + base + "heads/*:refs/heads/*", "+" + base + "cairn/*:refs/cairn/*"}
}

// FetchWorkspace fills st, a store without checkpoints, with w's refs from
// remote; the ledger is rebuilt from the commits' trailers and the position
// set to the manifest's. It returns how many checkpoints st then holds. A
// store with checkpoints is refused with snapshot.ErrNotEmpty.
func FetchWorkspace(ctx context.Context, st *snapshot.Store, remote string, w FleetWorkspace, as ReadAs) (int, error) {
	pos := ""
	if w.Manifest != nil {
		pos = w.Manifest.Position
	}
	acc, err := accessOf(remote)
	if err != nil {
		return 0, &Error{Op: "fetch " + w.Name() + " from", Remote: Redact(remote), Msg: err.Error()}
	}
	n, err := st.FetchRefs(ctx, snapshot.FetchOptions{Remote: acc.url, Refspecs: FetchRefspecs(w.Host, w.Key),
		Home: as.Home, Env: as.Env, Config: acc.config, Secret: acc.secret, Position: pos})
	var ge *snapshot.GitError
	if errors.As(err, &ge) {
		return 0, remoteErr("fetch "+w.Name()+" from", remote, err)
	}
	return n, err
}
