package cli

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/agent/config"
	"github.com/cairn-dev/cairn/agent/workerproto"
	"github.com/cairn-dev/cairn/platform/service"
	"github.com/cairn-dev/cairn/snapshot"
)

func init() {
	register("daemon", "run the checkpoint daemon in the foreground", runDaemon)
}

func runDaemon(ctx context.Context, e *env, args []string) error {
	fs := newFlags("daemon", "daemon [--config FILE] [--watch DIR]... [--state-dir DIR] [--socket PATH]", e)
	cfgPath := fs.String("config", "", "TOML config file (default: none, per-user defaults)")
	var watch stringList
	fs.Var(&watch, "watch", "watch this execution directory or glob (repeatable)")
	var df daemonFlags
	df.register(fs)
	asService := fs.Bool("service", false, "internal: run under the service manager (set by the unit `cairn service install` writes)")
	worker := fs.Bool("worker", false, "internal: run as a root daemon's worker for one user (started by the daemon itself)")
	maxRuntime := fs.Int64("max-runtime-file", 0, "internal (workers): cap on a runtime file read, in bytes")
	var ids workerIDs
	fs.StringVar(&ids.uid, "uid", "", "internal (workers): the uid a worker takes")
	fs.StringVar(&ids.gid, "gid", "", "internal (workers): the gid a worker takes")
	fs.StringVar(&ids.groups, "groups", "", "internal (workers): the groups a worker takes, comma-separated")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErr("daemon takes no arguments; use --watch DIR")
	}
	// No git the daemon started outlives it.
	defer snapshot.KillChildren()
	if *worker {
		return runWorker(ctx, e, df.stateDir, df.sock, *maxRuntime, ids)
	}
	var cfg *config.Config
	if *cfgPath != "" {
		if cfg, err = config.Load(*cfgPath); err != nil {
			return &exitError{ExitUsage, err}
		}
	}
	log := e.log
	if cfg != nil && cfg.LogLevel != "" {
		log = log.Level(parseLevel(cfg.LogLevel))
	} else if os.Getenv("CAIRN_LOG_LEVEL") == "" {
		log = log.Level(parseLevel("info"))
	}
	d := agent.New(cfg, agent.Options{ConfigPath: *cfgPath, Watch: watch, StateDir: df.stateDir, Socket: df.sock, Version: Version,
		Ready: func() {
			if err := service.NotifyReady(); err != nil {
				log.Warn().Err(err).Msg("systemd readiness not reported")
			}
		}}, log)

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		for {
			select {
			case <-runCtx.Done():
				return
			case <-hup:
				d.Reload(runCtx)
			}
		}
	}()
	if *asService {
		// kardianos's Run/Stop wrap the daemon: the manager's stop cancels it and waits.
		return service.Run(runCtx, "cairn", d.Run)
	}
	return d.Run(runCtx)
}

// workerIDs are the ids a worker started as root takes (--uid, --gid, --groups).
type workerIDs struct{ uid, gid, groups string }

// become makes the worker its owner (workerproto.BecomeWorker) when its
// supervisor started it as root, or else only not dumpable.
func (w workerIDs) become() error {
	if w.uid == "" {
		return workerproto.HardenWorker()
	}
	uid, err1 := strconv.ParseUint(w.uid, 10, 32)
	gid, err2 := strconv.ParseUint(w.gid, 10, 32)
	if err1 != nil || err2 != nil {
		return usageErr("--uid and --gid take numbers")
	}
	var groups []uint32
	for _, s := range strings.Split(w.groups, ",") {
		if s == "" {
			continue
		}
		g, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			return usageErr("--groups takes numbers, comma-separated")
		}
		groups = append(groups, uint32(g))
	}
	return workerproto.BecomeWorker(uint32(uid), uint32(gid), groups)
}

// runWorker serves one user's workspaces for a root daemon: the private
// socket's listener arrives as fd 3, the executable it was started from as fd 4.
// Before it touches either, it becomes its owner and not dumpable.
func runWorker(ctx context.Context, e *env, stateDir, socket string, maxRuntime int64, ids workerIDs) error {
	if err := ids.become(); err != nil {
		return err
	}
	if os.Geteuid() == 0 {
		return usageErr("a worker never runs as root")
	}
	_ = os.NewFile(4, "executable").Close()
	lf := os.NewFile(3, "worker-socket")
	if lf == nil {
		return usageErr("--worker is started by the daemon, with its socket as fd 3")
	}
	ln, err := net.FileListener(lf)
	lf.Close()
	if err != nil {
		return fmt.Errorf("worker socket: %w", err)
	}
	log := e.log.With().Int("worker_uid", os.Geteuid()).Logger()
	if os.Getenv("CAIRN_LOG_LEVEL") == "" {
		log = log.Level(parseLevel("info"))
	}
	d := agent.New(nil, agent.Options{Worker: true, Listener: ln, StateDir: stateDir, Socket: socket, Version: Version,
		MaxRuntimeFile: maxRuntime}, log)
	return d.Run(ctx)
}
