package agent

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/config"
	"github.com/cairn-dev/cairn/agent/workspace"
	"github.com/cairn-dev/cairn/platform"
	"github.com/cairn-dev/cairn/snapshot"
)

// placement is where one discovered workspace is served and for whom.
type placement struct {
	set    config.Settings
	owner  uint32 // uid owning the workspace folder (read from an open descriptor)
	act    uint32 // uid its work runs as: the owner, or the configured user
	actGID uint32
}

// discoveryLimits bound every root's walk (MaxMatches: a [[watch]] entry's
// max_workspaces replaces it).
var discoveryLimits = discoverLimits{MaxMatches: defaultMaxMatches, MaxDirs: defaultMaxDirs}

// findings are what one discovery pass decided: the workspaces served, the
// folders refused (and why, root's view), and the same refusals by the uid
// owning the folders, for that user's own status.
type findings struct {
	want    map[string]placement
	refused []api.RefusedWorkspace
	byOwner map[uint32][]api.RefusedWorkspace
}

// refuse records a refusal; owned ones are shown to the folder's owner too.
func (fd *findings) refuse(rf api.RefusedWorkspace, owner uint32, owned bool) {
	fd.refused = append(fd.refused, rf)
	if owned {
		fd.byOwner[owner] = append(fd.byOwner[owner], rf)
	}
}

// find lists the workspaces the roots name, with their owners, and the
// folders it refused (and why). watched are the workspaces served now:
// each root's matches are shared among their owners (choose), and a walk
// cut short looks again at the watched ones it missed (recheck), so
// another user's folders never release them.
func (d *Daemon) find(ctx context.Context, roots []config.WatchRoot, watched map[string]bool) findings {
	fd := findings{want: map[string]placement{}, byOwner: map[uint32][]api.RefusedWorkspace{}}
	noted := map[string]bool{}
	defer func() { d.noted = noted }()
	// note logs a cap's note when it is new (or changed) since the last pass.
	note := func(root, msg string, uid uint32, owned bool, n string) {
		noted[n] = true
		if d.noted[n] {
			return
		}
		ev := d.log.Warn().Str("root", root).Str("reason", n)
		if owned {
			ev = ev.Uint32("uid", uid)
		}
		ev.Msg(msg)
	}
	users := map[string]actUser{} // one NSS lookup per configured user, not per workspace
	chk := &rootCheck{above: map[string]string{}}
	for _, r := range roots {
		if err := wholeDisk(r.Path); err != nil {
			d.log.Warn().Err(err).Str("root", r.Path).Msg("watch root refused")
			fd.refuse(api.RefusedWorkspace{Dir: r.Path, Reason: err.Error()}, 0, false)
			continue
		}
		lim := discoveryLimits
		lim.CrossMounts, lim.Watched = r.CrossMounts, watched
		if r.MaxWorkspaces > 0 {
			lim.MaxMatches = r.MaxWorkspaces
		}
		res, err := walkRoot(ctx, r.Path, lim)
		if err != nil {
			if ctx.Err() != nil {
				return fd
			}
			d.log.Warn().Err(err).Str("root", r.Path).Msg("watch root refused")
			fd.refuse(api.RefusedWorkspace{Dir: r.Path, Reason: err.Error()}, 0, false)
			continue
		}
		recheck(r.Path, res, lim)
		if len(res.dirs) == 0 && !strings.ContainsAny(r.Path, "*?[{\\") {
			// A root naming one folder that is not there: say so for as long as it is named.
			fd.refuse(api.RefusedWorkspace{Dir: r.Path, Reason: "no such folder: it is gone, or not created yet"}, 0, false)
		}
		for _, n := range res.notes {
			note(r.Path, "watch root discovery capped", 0, false, n)
			fd.refuse(api.RefusedWorkspace{Dir: r.Path, Reason: n}, 0, false)
		}
		for _, uid := range slices.Sorted(maps.Keys(res.ownerNotes)) {
			n := res.ownerNotes[uid]
			note(r.Path, "watch root discovery capped for one owner", uid, true, n)
			fd.refuse(api.RefusedWorkspace{Dir: r.Path, Reason: n}, uid, true)
		}
		placed := map[string]placement{}
		var cands []found
		for _, f := range res.dirs {
			if _, ok := fd.want[f.Path]; ok {
				continue // an earlier root's
			}
			u, ok := users[r.Settings.User]
			if !ok && r.Settings.User != "" && platform.SelfUID() == 0 {
				u = lookupActUser(r.Settings.User)
				users[r.Settings.User] = u
			}
			p, why := place(f, r.Settings, u, chk)
			if why != "" {
				fd.refuse(api.RefusedWorkspace{Dir: f.Path, Reason: why}, f.UID, true)
				continue
			}
			placed[f.Path] = p
			cands = append(cands, f)
		}
		ch := choose(cands, func(f found) uint32 { return placed[f.Path].act }, watched, lim.MaxMatches)
		for _, f := range ch.keep {
			fd.want[f.Path] = placed[f.Path]
		}
		capped := map[uint32]bool{}
		for uid := range ch.left {
			capped[uid] = true
		}
		for uid := range res.over {
			capped[uid] = true
		}
		for _, uid := range slices.Sorted(maps.Keys(capped)) {
			released := 0
			for _, f := range ch.left[uid] {
				if watched[f.Path] {
					released++
				}
			}
			n := capNote(r.Path, uid, len(ch.left[uid])+res.over[uid], released, ch, lim.MaxMatches)
			note(r.Path, "watch root capped for one owner", uid, true, n)
			fd.refuse(api.RefusedWorkspace{Dir: r.Path, Reason: n}, uid, true)
		}
	}
	return fd
}

// wholeDisk refuses a root that is "/" or globs directly below it (`/*`,
// `/**`): it would make every system folder a workspace.
func wholeDisk(pattern string) error {
	first, _, _ := strings.Cut(strings.TrimPrefix(filepath.ToSlash(pattern), "/"), "/")
	if first == "" || strings.ContainsAny(first, "*?[{\\") {
		return fmt.Errorf("watch root %q would watch the whole disk; name a folder below /", pattern)
	}
	return nil
}

// actUser is the user a `user = "name"` setting names, or why it is refused.
type actUser struct {
	uid, gid uint32
	why      string
}

func lookupActUser(name string) actUser {
	u, err := user.Lookup(name)
	if err != nil {
		return actUser{why: fmt.Sprintf("user %q: %v", name, err)}
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return actUser{why: fmt.Sprintf("user %q has no numeric uid", name)}
	}
	return actUser{uid: uint32(uid), gid: uint32(gid)}
}

// place decides who a workspace's work runs as. A daemon that is not root
// does everything itself; a root daemon acts as the owner (or the
// configured user, u: lookupActUser(set.User)), and serves in its own
// process only what root owns.
func place(f found, set config.Settings, u actUser, chk *rootCheck) (placement, string) {
	p := placement{set: set, owner: f.UID, act: f.UID, actGID: f.GID}
	self := platform.SelfUID()
	if self != 0 {
		p.act, p.actGID = self, uint32(os.Getegid())
		return p, ""
	}
	if set.User != "" {
		if u.why != "" {
			return p, u.why
		}
		p.act, p.actGID = u.uid, u.gid
	}
	if p.act == 0 {
		if chk.acct == nil {
			chk.acct = platform.ReadAccounts()
		}
		if why := rootRefusal(f, chk.acct, chk.above); why != "" {
			return p, why
		}
	}
	return p, ""
}

// rootCheck is what one discovery pass learnt checking workspaces served
// as root: group membership, and the answer for each folder above one.
type rootCheck struct {
	acct  *platform.Accounts
	above map[string]string
}

// apply makes the served workspaces what want says: the ones that run as
// this process's uid here, the others in their owner's worker.
func (d *Daemon) apply(fd findings) {
	want := fd.want
	self := platform.SelfUID()
	d.mu.Lock()
	var stop []*workspace.Workspace
	for dir, ws := range d.workspaces {
		if p, ok := want[dir]; !ok || p.act != self || !p.set.Equal(ws.Settings()) {
			stop = append(stop, ws)
			delete(d.workspaces, dir)
			d.log.Info().Str("workspace", dir).Msg("workspace released")
		}
	}
	d.mu.Unlock()
	// Stopping waits for a seal in progress: never under the daemon's lock.
	stopEach(stop)

	d.mu.Lock()
	byUID := map[uint32]map[string]config.Settings{}
	gids := map[uint32]uint32{}
	for dir, p := range want {
		if p.act != self {
			if byUID[p.act] == nil {
				byUID[p.act] = map[string]config.Settings{}
			}
			byUID[p.act][dir] = p.set
			gids[p.act] = p.actGID
			continue
		}
		if _, ok := d.workspaces[dir]; ok {
			continue
		}
		ws := workspace.New(dir, p.set, d.stateDirLocked(), d.log)
		ws.SetHooks(d.bus.publish, d.met)
		d.workspaces[dir] = ws
		ws.Start(d.runCtx)
		d.log.Info().Str("workspace", dir).Msg("workspace watched")
	}
	d.owners, d.refused, d.refusedBy = want, fd.refused, fd.byOwner
	var stopW []*worker
	for uid, wk := range d.workers {
		if _, ok := byUID[uid]; !ok {
			stopW = append(stopW, wk)
			delete(d.workers, uid)
		}
	}
	state := d.stateDirLocked()
	for uid, m := range byUID {
		wk := d.workers[uid]
		isNew := wk == nil
		if isNew {
			wk = d.newWorker(uid, gids[uid], state)
			d.workers[uid] = wk
		}
		wk.assign(m)
		if isNew {
			// Its owner's lookup and store hand-over run in its own
			// goroutine: no I/O or NSS lookup under the daemon's lock.
			wk.start(d.runCtx)
		}
	}
	d.mu.Unlock()
	stopEach(stopW)
}

// stopEach stops every workspace or worker at once and waits for them all.
func stopEach[T interface{ Stop() }](xs []T) {
	var wg sync.WaitGroup
	for _, x := range xs {
		wg.Add(1)
		go func() { defer wg.Done(); x.Stop() }()
	}
	wg.Wait()
}

// migrateStores hands plain-layout stores an earlier cairn kept in the shared
// stores folder to their owner: each is renamed, relative to both open
// folders, into the owner's folder, whose parent is root's, so no link the
// owner plants can redirect it. The worker, as the owner, finishes the move.
// It runs in the worker's goroutine after prepare, before the process starts.
func (wk *worker) migrateStores() {
	if platform.SelfUID() != 0 {
		return
	}
	// wk.state is <state>/users/<uid>.
	old, err := os.Open(filepath.Join(filepath.Dir(filepath.Dir(wk.state)), "stores"))
	if err != nil {
		return
	}
	defer old.Close()
	own, err := platform.OpenDirNoFollow(wk.state)
	if err != nil {
		return
	}
	defer own.Close()
	for _, dir := range wk.dirs() {
		name := snapshot.PlainStoreName(dir)
		if fi, err := os.Lstat(filepath.Join(old.Name(), name)); err != nil || !fi.IsDir() {
			continue
		}
		if err := platform.RenameAt(old, name, own, workspace.MigratePrefix+name); err != nil {
			wk.log.Warn().Err(err).Str("store", name).Msg("could not hand a store to its owner")
			continue
		}
		wk.log.Info().Str("store", name).Uint32("uid", wk.uid).Msg("store handed to its owner's private folder")
	}
}

// mayAct answers whether uid may see and act on the workspace at dir: root,
// the workspace's owner, or the user its work runs as.
func (d *Daemon) mayAct(uid uint32, dir string) bool {
	if uid == 0 || uid == platform.SelfUID() {
		return true
	}
	d.mu.Lock()
	p, ok := d.owners[dir]
	d.mu.Unlock()
	return ok && (p.owner == uid || p.act == uid)
}

// workerFor is the worker serving dir, nil when this process serves it (or nobody does).
func (d *Daemon) workerFor(dir string) *worker {
	d.mu.Lock()
	defer d.mu.Unlock()
	p, ok := d.owners[dir]
	if !ok || p.act == platform.SelfUID() {
		return nil
	}
	return d.workers[p.act]
}

// statusFor is the daemon's status as uid may see it: root everything, a
// user only their own workspaces (and nothing of the config or other users).
func (d *Daemon) statusFor(ctx context.Context, uid uint32) api.Status {
	st := d.Status()
	d.mu.Lock()
	workers := make([]*worker, 0, len(d.workers))
	for _, wk := range d.workers {
		workers = append(workers, wk)
	}
	d.mu.Unlock()
	// Each worker answers within its own timeout, all at once: a hung
	// worker costs status at most that timeout and stalls no one else.
	res := make([][]api.WorkspaceStatus, len(workers))
	var wg sync.WaitGroup
	for i, wk := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := wk.workspaces(ctx, workerStatusTimeout)
			if err != nil {
				ws := wk.snapshot()
				why := fmt.Sprintf("worker for uid %d (%s): %v", wk.uid, ws.State, err)
				if ws.Error != "" {
					why += "; " + ws.Error
				}
				for _, dir := range wk.dirs() {
					got = append(got, api.WorkspaceStatus{Dir: dir, State: workspace.StateFailed, Error: why})
				}
			}
			res[i] = got
		}()
	}
	wg.Wait()
	for i, wk := range workers {
		st.Workspaces = append(st.Workspaces, res[i]...)
		st.Workers = append(st.Workers, wk.snapshot())
	}
	sort.Slice(st.Workspaces, func(i, j int) bool { return st.Workspaces[i].Dir < st.Workspaces[j].Dir })
	sort.Slice(st.Workers, func(i, j int) bool { return st.Workers[i].UID < st.Workers[j].UID })
	if uid == 0 || uid == platform.SelfUID() {
		return st
	}
	own := st.Workspaces[:0:0]
	for _, ws := range st.Workspaces {
		if d.mayAct(uid, ws.Dir) {
			own = append(own, ws)
		}
	}
	d.mu.Lock()
	mine := slices.Clone(d.refusedBy[uid])
	d.mu.Unlock()
	return api.Status{PID: st.PID, Version: st.Version, Started: st.Started, Socket: st.Socket, Workspaces: own, Roots: []string{},
		NotWatched: mine}
}

// Worker mode: the process a root daemon starts for one owner.

// watchParent ends a worker whose supervisor is gone.
func watchParent(ctx context.Context, cancel context.CancelFunc) {
	ppid := os.Getppid()
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if os.Getppid() != ppid {
				cancel()
				return
			}
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// errForeignAbove refuses a workspace served as root below a folder others
// can write and rename in (not sticky), as sshd's StrictModes would.
var errForeignAbove = errors.New("a folder above it is writable by others (and not sticky)")

// rootRefusal is why a root-owned workspace at f may not be served as
// root: the folder itself, or a folder above it that is not sticky, is
// writable by someone else. above caches the ancestors' answers for one
// discovery pass.
func rootRefusal(f found, acct *platform.Accounts, above map[string]string) string {
	if why := platform.ForeignWhyOf(f.UID, f.GID, f.Mode, 0, false, acct); why != "" {
		return fmt.Sprintf("the folder is %s: never served as root; give it to its user, or run: chown root %s; chmod go-w %s", why, f.Path, f.Path)
	}
	parent := filepath.Dir(f.Path)
	why, ok := above[parent]
	if !ok {
		anc, err := platform.StatAncestors(f.Path)
		if err != nil {
			why = "its folders above could not be checked: " + err.Error()
		}
		for _, a := range anc {
			if y := platform.ForeignWhy(a.Info, 0, true, acct); y != "" {
				why = fmt.Sprintf("%v: %s is %s; run: chmod go-w (or +t) %s, or chown root %s", errForeignAbove, a.Path, y, a.Path, a.Path)
				break
			}
		}
		above[parent] = why
	}
	if why != "" {
		return "never served as root: " + why
	}
	return ""
}
