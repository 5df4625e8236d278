package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/config"
	"github.com/cairn-dev/cairn/agent/workerproto"
	"github.com/cairn-dev/cairn/agent/workspace"
	"github.com/cairn-dev/cairn/platform"
)

// A root daemon is a supervisor: every file operation on a user's workspace
// runs in a worker process with that user's uid, gid and groups (one worker
// per owner). The supervisor talks to a worker over a private socket only
// root can reach, with the same /v1 API the workers serve; see README
// "Security".

// Worker timings.
var (
	workerStatusTimeout = 500 * time.Millisecond // a status never waits longer on a worker
	workerStatusFetch   = 5 * time.Second        // one status request to a worker ends by then
	workerCheckEvery    = 10 * time.Second       // liveness probe of each worker
	workerStopGrace     = workspace.SealGrace + 3*time.Second
	workerMaxBackoff    = time.Minute
)

// Worker states in status.
const (
	workerStarting   = "starting"
	workerRunning    = "running"
	workerRestarting = "restarting"
)

// assignment is the supervisor's list of workspaces for one worker.
type assignment struct {
	Workspaces map[string]config.Settings `json:"workspaces"`
}

// worker is one owner's worker process, owned by the supervisor: it starts
// it, hands it its workspaces, restarts it with backoff when it dies or
// stops answering, and relays its events.
type worker struct {
	d      *Daemon
	uid    uint32
	gid    uint32
	groups []uint32
	name   string
	home   string
	state  string // the worker's state directory (its plain-layout stores), private to the owner
	sock   string // the private socket, in a folder only root may enter
	log    zerolog.Logger
	client *workerproto.Client

	mu       sync.Mutex
	want     map[string]config.Settings // the workspaces it should serve
	pushed   bool                       // want reached the running process
	status   string
	err      string
	pid      int
	restarts int

	// What the supervisor refused from it (worker_guard.go).
	dropped    map[string]int64
	dropWhy    string
	dropLogged time.Time
	// statusCall is the status request under way, shared by every caller
	// meanwhile: one reply per worker in memory, however many ask.
	statusCall *statusCall

	kick   chan struct{} // want changed
	cancel context.CancelFunc
	done   chan struct{}
}

func (d *Daemon) newWorker(uid, gid uint32, state string) *worker {
	wk := &worker{d: d, uid: uid, gid: gid, state: filepath.Join(state, "users", strconv.FormatUint(uint64(uid), 10)),
		sock:   filepath.Join(state, "workers", strconv.FormatUint(uint64(uid), 10)+".sock"),
		log:    d.log.With().Uint32("worker_uid", uid).Logger(),
		status: workerStarting, kick: make(chan struct{}, 1), home: "/"}
	wk.client = workerproto.NewClient(wk.sock, wk.unanswered)
	return wk
}

// identify reads the owner's name, home, primary group and groups. It is an
// NSS lookup (maybe LDAP, maybe slow), so it runs in the worker's own
// goroutine, never under the daemon's lock.
func (wk *worker) identify() {
	if u, err := user.LookupId(strconv.FormatUint(uint64(wk.uid), 10)); err == nil {
		wk.mu.Lock()
		wk.name = u.Username
		wk.mu.Unlock()
		wk.home = u.HomeDir
		// The user's own primary group, as a login would have: never a group
		// the folder happens to carry.
		if g, err := strconv.ParseUint(u.Gid, 10, 32); err == nil {
			wk.gid = uint32(g)
		}
		if ids, err := u.GroupIds(); err == nil {
			for _, s := range ids {
				if g, err := strconv.ParseUint(s, 10, 32); err == nil {
					wk.groups = append(wk.groups, uint32(g))
				}
			}
		}
	}
	if len(wk.groups) == 0 {
		wk.groups = []uint32{wk.gid}
	}
}

// assign sets the workspaces the worker serves.
func (wk *worker) assign(want map[string]config.Settings) {
	wk.mu.Lock()
	if maps.EqualFunc(wk.want, want, config.Settings.Equal) && wk.want != nil {
		wk.mu.Unlock()
		return
	}
	wk.want, wk.pushed = want, false
	wk.mu.Unlock()
	select {
	case wk.kick <- struct{}{}:
	default:
	}
}

func (wk *worker) start(ctx context.Context) {
	ctx, wk.cancel = context.WithCancel(ctx)
	wk.done = make(chan struct{})
	go func() {
		defer close(wk.done)
		wk.run(ctx)
	}()
}

// stop ends the worker process (SIGTERM, then SIGKILL after its grace) and waits.
func (wk *worker) Stop() {
	wk.cancel()
	<-wk.done
}

func (wk *worker) setState(state, errText string, pid int) {
	wk.mu.Lock()
	wk.status, wk.err, wk.pid = state, errText, pid
	wk.mu.Unlock()
}

func (wk *worker) snapshot() api.WorkerStatus {
	wk.mu.Lock()
	defer wk.mu.Unlock()
	return api.WorkerStatus{UID: wk.uid, User: wk.name, PID: wk.pid, State: wk.status, Error: wk.err,
		Restarts: wk.restarts, Workspaces: len(wk.want), Dropped: maps.Clone(wk.dropped), DroppedWhy: wk.dropWhy}
}

func (wk *worker) dirs() []string {
	wk.mu.Lock()
	defer wk.mu.Unlock()
	return sortedKeys(wk.want)
}

// run keeps one worker process alive until ctx ends.
func (wk *worker) run(ctx context.Context) {
	wk.identify()
	backoff := time.Second
	migrated := false
	for ctx.Err() == nil {
		began := time.Now()
		err := wk.life(ctx, !migrated)
		migrated = true
		if ctx.Err() != nil {
			return
		}
		if time.Since(began) > 5*time.Minute {
			backoff = time.Second // it ran well for a while: not a crash loop
		}
		wk.mu.Lock()
		wk.restarts++
		wk.mu.Unlock()
		wk.setState(workerRestarting, fmt.Sprintf("%v; restarting in %s", err, backoff), 0)
		wk.log.Error().Err(err).Dur("backoff", backoff).Msg("worker stopped; restarting")
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, workerMaxBackoff)
	}
}

// life starts one worker process and serves it until it exits or ctx ends.
// The first life hands the owner the stores an earlier cairn kept in the
// shared folder before the process starts (migrateStores).
func (wk *worker) life(ctx context.Context, first bool) error {
	if err := wk.prepare(); err != nil {
		return err
	}
	if first {
		wk.migrateStores()
	}
	cmd, logs, err := wk.spawn()
	if err != nil {
		return err
	}
	pumped := make(chan struct{})
	go func() { defer close(pumped); wk.pumpLog(logs) }()
	exited := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		// Nothing the worker started outlives it: a git it left (killed
		// with it, by Pdeathsig, is the rule) would hold its store's lock.
		workerproto.KillSession(cmd.Process.Pid)
		// Its last lines are read; then the pipe is closed, even if
		// something still holds its other end.
		select {
		case <-pumped:
		case <-time.After(2 * time.Second):
		}
		logs.Close()
		<-pumped
		close(exited)
	}()
	wk.setState(workerRunning, "", cmd.Process.Pid)
	wk.log.Info().Int("pid", cmd.Process.Pid).Str("user", wk.name).Msg("worker started")
	wk.mu.Lock()
	wk.pushed = false
	wk.mu.Unlock()

	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var relay sync.WaitGroup
	relay.Add(1)
	go func() { defer relay.Done(); wk.relayEvents(lctx) }()
	defer relay.Wait()

	check := time.NewTicker(workerCheckEvery)
	defer check.Stop()
	retry := time.NewTimer(0)
	defer retry.Stop()
	misses := 0
	for {
		select {
		case <-ctx.Done():
			cancel()
			wk.terminate(cmd, exited)
			return ctx.Err()
		case <-exited:
			cancel()
			return fmt.Errorf("worker exited: %v", waitErr)
		case <-wk.kick:
			if err := wk.push(ctx); err != nil {
				retry.Reset(500 * time.Millisecond)
			}
		case <-retry.C:
			if err := wk.push(ctx); err != nil {
				retry.Reset(500 * time.Millisecond)
			}
		case <-check.C:
			if err := wk.ping(ctx); err != nil {
				misses++
				wk.log.Warn().Err(err).Int("misses", misses).Msg("worker did not answer its liveness probe")
				if misses >= 3 {
					cancel()
					_ = cmd.Process.Kill()
					<-exited
					return fmt.Errorf("worker hung (3 liveness probes unanswered); killed")
				}
				continue
			}
			misses = 0
			if err := wk.push(ctx); err != nil {
				retry.Reset(500 * time.Millisecond)
			}
		}
	}
}

// terminate asks the worker to stop, then kills it after its grace.
func (wk *worker) terminate(cmd *exec.Cmd, exited <-chan struct{}) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(workerStopGrace):
		wk.log.Warn().Msg("worker ignored SIGTERM; killing it")
		_ = cmd.Process.Kill()
		<-exited
	}
	wk.setState(workerStarting, "", 0)
}

// push hands the worker its workspaces unless it already has them.
func (wk *worker) push(ctx context.Context) error {
	wk.mu.Lock()
	if wk.pushed {
		wk.mu.Unlock()
		return nil
	}
	body, err := json.Marshal(assignment{Workspaces: wk.want})
	wk.mu.Unlock()
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := wk.client.Assign(rctx, body); err != nil {
		return err
	}
	wk.mu.Lock()
	// Only what was sent counts as pushed; a newer want is pushed next.
	if sent, _ := json.Marshal(assignment{Workspaces: wk.want}); bytes.Equal(sent, body) {
		wk.pushed = true
	}
	wk.mu.Unlock()
	return nil
}

func (wk *worker) ping(ctx context.Context) error {
	_, err := wk.workspaces(ctx, 5*time.Second)
	return err
}

// statusCall is one status request to a worker, its answer shared.
type statusCall struct {
	done chan struct{}
	rows []api.WorkspaceStatus
	err  error
}

// workspaces is the status of the worker's workspaces, checked
// (workerproto.CheckStatusRows), waiting at most timeout. Callers at the same time
// share one request to the worker.
func (wk *worker) workspaces(ctx context.Context, timeout time.Duration) ([]api.WorkspaceStatus, error) {
	wk.mu.Lock()
	c := wk.statusCall
	if c == nil {
		c = &statusCall{done: make(chan struct{})}
		wk.statusCall = c
		go func() {
			c.rows, c.err = wk.fetchStatus()
			wk.mu.Lock()
			wk.statusCall = nil
			wk.mu.Unlock()
			close(c.done)
		}()
	}
	wk.mu.Unlock()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-c.done:
		return slices.Clone(c.rows), c.err
	case <-t.C:
		return nil, fmt.Errorf("not answering (nothing within %s)", timeout)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// fetchStatus asks the worker for its status: a reply over its bound is
// refused whole; a row the worker has no right to is dropped, and an
// assigned workspace whose row was refused is shown failed, saying why.
func (wk *worker) fetchStatus() ([]api.WorkspaceStatus, error) {
	ctx, cancel := context.WithTimeout(context.Background(), workerStatusFetch)
	defer cancel()
	rows, err := wk.client.Status(ctx, workerproto.MaxStatusReply(wk.nAssigned()))
	if err != nil {
		var big *workerproto.ReplyTooBig
		if errors.As(err, &big) {
			wk.drop(workerproto.DropStatus, 1, err.Error())
		}
		return nil, err
	}
	kept, refused, dropped := workerproto.CheckStatusRows(rows, wk.assigned)
	if len(dropped) > 0 {
		wk.drop(workerproto.DropStatus, len(dropped), dropped[len(dropped)-1])
	}
	for _, dir := range sortedKeys(refused) {
		kept = append(kept, api.WorkspaceStatus{Dir: dir, State: workspace.StateFailed,
			Error: fmt.Sprintf("the worker for uid %d sent a status row the supervisor refused: %s", wk.uid, refused[dir])})
	}
	return kept, nil
}

// relayEvents copies the worker's events onto the supervisor's bus until
// ctx ends: each one checked (workerproto.CheckEvent) and bounded in size and rate.
func (wk *worker) relayEvents(ctx context.Context) {
	rate := workerproto.NewBucket(workerproto.EventRate, workerproto.EventBurst)
	for ctx.Err() == nil {
		if body, err := wk.client.Events(ctx); err == nil {
			wk.relayStream(body, &rate)
			body.Close()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// relayStream publishes the events of one stream from the worker until it ends.
func (wk *worker) relayStream(body io.Reader, rate *workerproto.Bucket) {
	br := bufio.NewReaderSize(body, 64<<10)
	for {
		line, cut, err := workerproto.ReadLine(br, workerproto.MaxEvent)
		if len(line)+cut > 0 {
			ev, why := workerproto.CheckEvent(line, cut, wk.assigned)
			switch {
			case why != "":
				wk.drop(workerproto.DropEvent, 1, why)
			case ev.Workspace == "":
			case !rate.Allow(time.Now(), 1):
				wk.drop(workerproto.DropEvent, 1, fmt.Sprintf("events over %d a second", workerproto.EventRate))
			default:
				wk.d.bus.publish(ev)
			}
		}
		if err != nil {
			return
		}
	}
}

// prepare makes the worker's folders: its state directory (0700, the
// owner's) under root's users/ folder, and root's private socket folder. Every
// parent is root's, so the owner cannot swap them for links.
func (wk *worker) prepare() error {
	if err := mkdirExact(filepath.Dir(wk.sock), 0o700, 0, 0); err != nil {
		return err
	}
	if err := mkdirExact(filepath.Dir(wk.state), 0o711, 0, 0); err != nil {
		return err
	}
	return mkdirExact(wk.state, 0o700, int(wk.uid), int(wk.gid))
}

// mkdirExact makes dir (its parent must exist) or checks the existing one is a
// real folder, then sets its mode and owner.
func mkdirExact(dir string, mode os.FileMode, uid, gid int) error {
	if err := os.Mkdir(dir, mode); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	// Owner and mode are set through a descriptor opened without following a
	// link (and never blocking on a FIFO: O_DIRECTORY), not by path.
	parent, err := os.Open(filepath.Dir(dir))
	if err != nil {
		return err
	}
	defer parent.Close()
	f, err := platform.OpenDirAt(parent, filepath.Base(dir))
	if err != nil {
		return fmt.Errorf("%s is not a folder; not using it: %w", dir, err)
	}
	defer f.Close()
	if err := f.Chown(uid, gid); err != nil {
		return fmt.Errorf("chown %s: %w", dir, err)
	}
	return f.Chmod(mode)
}

// spawn starts the worker process for the owner (on Linux as root: it
// takes the owner's ids itself, BecomeWorker). It inherits a listener on
// the private socket (fd 3), the executable (fd 4, run through
// /proc/self/fd so a binary in a folder the owner cannot enter still runs),
// and, as stdout and stderr, a pipe the supervisor reads (pumpLog): no
// descriptor of root's. logs is the pipe's end to read.
func (wk *worker) spawn() (cmd *exec.Cmd, logs *os.File, err error) {
	_ = os.Remove(wk.sock)
	ln, err := net.Listen("unix", wk.sock)
	if err != nil {
		return nil, nil, fmt.Errorf("worker socket: %w", err)
	}
	ul := ln.(*net.UnixListener)
	ul.SetUnlinkOnClose(false)
	lf, err := ul.File()
	ul.Close()
	if err != nil {
		return nil, nil, err
	}
	defer lf.Close()
	if err := os.Chmod(wk.sock, 0o600); err != nil {
		return nil, nil, err
	}
	exe := wk.d.opts.WorkerExe
	if exe == "" {
		if exe, err = os.Executable(); err != nil {
			return nil, nil, fmt.Errorf("find cairn's executable: %w", err)
		}
	}
	ef, err := os.Open(exe)
	if err != nil {
		return nil, nil, fmt.Errorf("open cairn's executable: %w", err)
	}
	defer ef.Close()
	workerproto.KeepInherited()
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("worker's log pipe: %w", err)
	}
	defer pw.Close()
	args := workerproto.StartArgs(wk.state, wk.sock, platform.MaxRuntimeFile, wk.uid, wk.gid, wk.groups)
	cmd = exec.Command(workerproto.ExePath(exe), args...)
	cmd.Args[0] = "cairn-worker"
	cmd.ExtraFiles = []*os.File{lf, ef}
	cmd.Dir = "/"
	cmd.Env = wk.env()
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.SysProcAttr = workerproto.Attr(wk.uid, wk.gid, wk.groups)
	if err := cmd.Start(); err != nil {
		pr.Close()
		return nil, nil, fmt.Errorf("start worker for uid %d: %w", wk.uid, err)
	}
	return cmd, pr, nil
}

// env is the worker's environment, built from scratch: nothing of root's
// but PATH and cairn's own settings.
func (wk *worker) env() []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + wk.home, "LC_ALL=C"}
	if wk.name != "" {
		env = append(env, "USER="+wk.name, "LOGNAME="+wk.name)
	}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "CAIRN_") || strings.HasPrefix(kv, "GORACE=") {
			env = append(env, kv)
		}
	}
	return env
}
