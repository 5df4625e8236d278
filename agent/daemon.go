package agent

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/config"
	"github.com/cairn-dev/cairn/agent/workspace"
	"github.com/cairn-dev/cairn/platform"
)

// discoverEvery is how often watched globs are re-evaluated to find
// execution directories created (or removed) since: the daemon's one
// periodic task while idle.
var discoverEvery = 2 * time.Second

// Options are what the command line adds to (or puts in place of) the config file.
type Options struct {
	ConfigPath string   // may be empty: run on defaults and Watch
	Watch      []string // extra roots (globs) from --watch
	StateDir   string   // overrides the config
	Socket     string   // overrides the config
	Version    string
	Ready      func() // called once the socket listens (systemd readiness)

	// Worker runs the process a root daemon starts for one owner: it serves
	// the workspaces its supervisor assigns on Listener, a private socket.
	Worker   bool
	Listener net.Listener
	// WorkerExe is the binary a root daemon starts its workers from
	// (default: this process's executable).
	WorkerExe string
	// MaxRuntimeFile is a worker's cap on runtime files (its supervisor's config).
	MaxRuntimeFile int64
}

// Daemon watches execution directories and seals their checkpoints.
type Daemon struct {
	opts    Options
	log     zerolog.Logger
	started time.Time

	mu         sync.Mutex
	cfg        *config.Config
	configErr  string
	workspaces map[string]*workspace.Workspace
	roots      []config.WatchRoot
	extra      []string // roots added over the socket (POST /v1/watch)

	runCtx   context.Context            // what workspaces and workers run under
	discMu   sync.Mutex                 // one discovery at a time
	owners   map[string]placement       // every workspace served, here or in a worker
	refused  []api.RefusedWorkspace     // folders matched and refused, with why
	workers  map[uint32]*worker         // root: one worker process per owner
	assigned map[string]config.Settings // worker: the workspaces its supervisor gave it

	// refusedBy are the refusals of each uid's folders, for their own status.
	refusedBy map[uint32][]api.RefusedWorkspace
	// noted are the discovery notes the last pass logged (under discMu):
	// a note standing pass after pass is logged once, not every 2 s.
	noted map[string]bool

	bus *bus     // events for GET /v1/events
	met *metrics // GET /metrics (metrics.go)
}

// New makes a daemon from a loaded config (nil: defaults).
func New(cfg *config.Config, opts Options, log zerolog.Logger) *Daemon {
	if cfg == nil {
		cfg = &config.Config{}
	}
	d := &Daemon{opts: opts, log: log, cfg: cfg, workspaces: map[string]*workspace.Workspace{}, started: time.Now(), bus: newBus(),
		runCtx: context.Background(), owners: map[string]placement{}, workers: map[uint32]*worker{}}
	d.met = newMetrics(d)
	return d
}

// ctx is what workspaces and workers started now run under.
func (d *Daemon) ctx() context.Context {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.runCtx
}

// StateDir is where the daemon keeps plain-layout stores and its lock.
func (d *Daemon) StateDir() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stateDirLocked()
}

func (d *Daemon) stateDirLocked() string {
	dir := platform.DefaultStateDir()
	switch {
	case d.opts.StateDir != "":
		dir = d.opts.StateDir
	case d.cfg.StateDir != "":
		dir = d.cfg.StateDir
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return dir
}

// SocketPath is where the daemon listens.
func (d *Daemon) SocketPath() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.opts.Socket != "":
		return d.opts.Socket
	case d.cfg.Socket != "":
		return d.cfg.Socket
	}
	return platform.DefaultSocket(d.stateDirLocked())
}

// rootsLocked are the config's watch roots plus --watch ones, with settings merged.
func (d *Daemon) rootsLocked() []config.WatchRoot {
	defaults := d.cfg.Defaults.Merge(config.DefaultSettings())
	var roots []config.WatchRoot
	for _, w := range d.cfg.Watch {
		roots = append(roots, config.WatchRoot{Path: filepath.Clean(w.Path), CrossMounts: w.CrossMounts, MaxWorkspaces: w.MaxWorkspaces, Settings: w.Settings.Merge(defaults)})
	}
	for _, p := range d.opts.Watch {
		abs, err := filepath.Abs(p)
		if err != nil {
			continue
		}
		roots = append(roots, config.WatchRoot{Path: abs, Settings: defaults})
	}
	for _, p := range d.extra {
		roots = append(roots, config.WatchRoot{Path: p, Settings: defaults})
	}
	return roots
}

// Run serves until ctx ends: discovers workspaces, watches them, reloads
// config on SIGHUP (via Reload) and stops every workspace before returning.
func (d *Daemon) Run(ctx context.Context) error {
	if d.opts.Worker {
		if d.opts.MaxRuntimeFile > 0 {
			platform.MaxRuntimeFile = d.opts.MaxRuntimeFile
		}
		return d.runWorker(ctx)
	}
	d.mu.Lock()
	if d.cfg.MaxRuntimeFile > 0 {
		platform.MaxRuntimeFile = int64(d.cfg.MaxRuntimeFile)
	}
	d.mu.Unlock()
	state := d.StateDir()
	if err := os.MkdirAll(state, 0o700); err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	// No one else may list it; a root daemon's workers (and clients, when the
	// socket is there) must be able to pass through it.
	if fi, err := os.Lstat(state); err == nil {
		perm := fi.Mode().Perm() &^ 0o066
		if platform.SelfUID() == 0 {
			perm |= 0o011
		}
		if perm != fi.Mode().Perm() {
			_ = os.Chmod(state, perm)
		}
	}
	if platform.SelfUID() == 0 {
		// Root's own workspaces keep their stores here: root's alone.
		if err := mkdirExact(filepath.Join(state, "stores"), 0o700, 0, 0); err != nil {
			return err
		}
	}
	lk, err := platform.TryLock(filepath.Join(state, "daemon.lock"))
	if err != nil {
		if errors.Is(err, platform.ErrLocked) {
			return fmt.Errorf("another cairn daemon runs on state directory %s: %w", state, err)
		}
		return err
	}
	defer lk.Unlock()

	d.mu.Lock()
	d.runCtx = ctx
	d.mu.Unlock()
	srv, err := d.listen(ctx)
	if err != nil {
		return err
	}
	defer srv.close()
	stopMetrics := d.listenMetrics(ctx)
	defer stopMetrics()
	if d.opts.Ready != nil {
		d.opts.Ready()
	}

	d.log.Info().Str("state_dir", state).Str("socket", d.SocketPath()).Msg("cairn daemon started")
	tick := time.NewTicker(discoverEvery)
	defer tick.Stop()
	cfgStamp, _ := configStamp(d.opts.ConfigPath, time.Now())
	for {
		d.discover(ctx)
		select {
		case <-ctx.Done():
			d.stopAll()
			d.log.Info().Msg("cairn daemon stopped")
			return nil
		case <-tick.C:
			// The config file changing is a reload, as SIGHUP is.
			if s, settled := configStamp(d.opts.ConfigPath, time.Now()); s != cfgStamp && settled {
				cfgStamp = s
				d.Reload(ctx)
			}
		}
	}
}

// runWorker serves the workspaces its supervisor assigns, on the private
// socket it inherited, until ctx ends or the supervisor is gone.
func (d *Daemon) runWorker(ctx context.Context) error {
	if d.opts.Listener == nil {
		return errors.New("worker mode needs the supervisor's socket")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go watchParent(ctx, cancel)
	d.mu.Lock()
	d.runCtx = ctx
	d.mu.Unlock()
	srv, err := d.serve(ctx, d.opts.Listener, d.opts.Socket)
	if err != nil {
		return err
	}
	srv.keep = true // the socket file is the supervisor's
	defer srv.close()
	d.log.Info().Str("state_dir", d.StateDir()).Int("uid", os.Geteuid()).Msg("cairn worker started")
	<-ctx.Done()
	d.stopAll()
	d.log.Info().Msg("cairn worker stopped")
	return nil
}

// fileStamp changes when a file is rewritten.
// configSettle is how long a changed config file must stay unwritten
// before it is loaded: a file rewritten in place is empty for a moment
// (truncated, then written), and an empty config is a valid one that
// releases every workspace.
const configSettle = 500 * time.Millisecond

// configStamp is the config file's stamp and whether its last write is
// configSettle old at now (a missing file is settled).
func configStamp(path string, now time.Time) (stamp string, settled bool) {
	if path == "" {
		return "", true
	}
	fi, err := os.Stat(path)
	if err != nil {
		return err.Error(), true
	}
	return fmt.Sprint(fi.Size(), fi.ModTime().UnixNano()), now.Sub(fi.ModTime()) >= configSettle
}

// discover starts workspaces that match a root and stops the ones that no
// longer exist or match. The walk runs outside the daemon's lock and stops
// with ctx.
func (d *Daemon) discover(ctx context.Context) {
	d.discMu.Lock()
	defer d.discMu.Unlock()
	d.mu.Lock()
	roots := d.rootsLocked()
	d.roots = roots
	assigned := d.assigned
	watched := make(map[string]bool, len(d.owners))
	for dir := range d.owners {
		watched[dir] = true
	}
	d.mu.Unlock()
	var fd findings
	if d.opts.Worker {
		self := platform.SelfUID()
		fd.want = map[string]placement{}
		for dir, set := range assigned {
			fd.want[dir] = placement{set: set, owner: self, act: self}
		}
	} else {
		fd = d.find(ctx, roots, watched)
	}
	if ctx.Err() != nil {
		return
	}
	d.apply(fd)
}

func (d *Daemon) stopAll() {
	d.mu.Lock()
	wss := slices.Collect(maps.Values(d.workspaces))
	clear(d.workspaces)
	wks := slices.Collect(maps.Values(d.workers))
	clear(d.workers)
	d.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); stopEach(wks) }()
	stopEach(wss)
	wg.Wait()
}

// Reload swaps in a new config. A config that fails to load keeps the old
// one running; the error is logged and shown by status.
func (d *Daemon) Reload(ctx context.Context) {
	if d.opts.ConfigPath == "" {
		return
	}
	cfg, err := config.Load(d.opts.ConfigPath)
	d.mu.Lock()
	if err != nil {
		d.configErr = err.Error()
		d.mu.Unlock()
		d.log.Error().Err(err).Msg("config reload refused; the previous config keeps running")
		return
	}
	d.cfg, d.configErr = cfg, ""
	d.mu.Unlock()
	d.log.Info().Str("config", d.opts.ConfigPath).Msg("config reloaded")
	d.discover(ctx)
}

// Status reports the daemon and every workspace.
func (d *Daemon) Status() api.Status {
	d.mu.Lock()
	st := api.Status{PID: os.Getpid(), Version: d.opts.Version, Started: d.started, StateDir: d.stateDirLocked(),
		Config: d.opts.ConfigPath, ConfigErr: d.configErr}
	for _, r := range d.roots {
		st.Roots = append(st.Roots, r.Path)
	}
	wss := make([]*workspace.Workspace, 0, len(d.workspaces))
	for _, ws := range d.workspaces {
		wss = append(wss, ws)
	}
	d.mu.Unlock()
	st.Socket = d.SocketPath()
	d.mu.Lock()
	st.Refused = append(st.Refused, d.refused...)
	d.mu.Unlock()
	for _, ws := range wss {
		st.Workspaces = append(st.Workspaces, ws.Status())
	}
	sort.Slice(st.Workspaces, func(i, j int) bool { return st.Workspaces[i].Dir < st.Workspaces[j].Dir })
	return st
}
