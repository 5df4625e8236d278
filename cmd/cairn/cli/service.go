package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/cairn-dev/cairn/agent/config"
	"github.com/cairn-dev/cairn/platform"
	"github.com/cairn-dev/cairn/platform/service"
)

func init() {
	register("service", "install, start, stop or remove cairn as a system (or --user) service", runService)
}

const serviceUsage = "service install|uninstall|start|stop|restart|status [--user] [--config FILE]"

// starterConfig is written when install names a config file that does not exist yet.
const starterConfig = `# cairn daemon configuration (written by cairn service install).
# Add one [[watch]] entry per folder (or glob) of execution directories, then:
#   cairn service restart
#
# log_level = "info"
#
# [[watch]]
# path = "/srv/agents/*"
`

func runService(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintf(e.stderr, "usage: cairn %s\n", serviceUsage)
		if len(args) == 0 {
			return usageErr("service needs an action")
		}
		return nil
	}
	action := args[0]
	fs := newFlags("service "+action, serviceUsage, e)
	user := fs.Bool("user", false, "a per-user service (default: the system service, as root)")
	cfgPath := fs.String("config", "", "config file the service reads (default: the mode's config path)")
	name := fs.String("name", "", "service name (default: "+service.DefaultName()+"; tests use their own)")
	pos, err := parse(fs, args[1:])
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErr("service %s takes no arguments", action)
	}
	mode := platform.ModeSystem
	if *user {
		mode = platform.ModeUser
	}
	if mode == platform.ModeSystem && os.Geteuid() != 0 && action != "status" {
		return &exitError{ExitRefused, errors.New("the system service needs root: run with sudo, or pass --user for a per-user service")}
	}
	if *cfgPath != "" {
		if *cfgPath, err = filepath.Abs(*cfgPath); err != nil {
			return err
		}
	}
	m, err := service.New(service.Config{Name: *name, Mode: mode, ConfigPath: *cfgPath})
	if err != nil {
		return err
	}
	u := m.Unit()
	switch action {
	case "install":
		if err := ensureConfig(u.ConfigPath); err != nil {
			return err
		}
		if err := m.Install(); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "installed %s at %s\nconfig %s\nstart it with: cairn service start%s\n", m, m.UnitPath(), u.ConfigPath, modeFlag(mode))
	case "uninstall":
		if err := m.Uninstall(); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "removed %s (%s); config, stores and logs are kept\n", m, m.UnitPath())
	case "start", "stop", "restart":
		op := map[string]func() error{"start": m.Start, "stop": m.Stop, "restart": m.Restart}[action]
		if err := op(); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "%s: %s done\n", m, action)
	case "status":
		return serviceStatus(e, m)
	default:
		return usageErr("unknown service action %q; want install, uninstall, start, stop, restart or status", action)
	}
	return nil
}

func modeFlag(m platform.Mode) string {
	if m == platform.ModeUser {
		return " --user"
	}
	return ""
}

// ensureConfig writes a starter config if there is none, so the service starts.
func ensureConfig(path string) error {
	if _, err := os.Stat(path); err == nil {
		if _, err := config.Load(path); err != nil {
			return &exitError{ExitUsage, err}
		}
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("config folder: %w", err)
	}
	return platform.WriteFileAtomic(path, []byte(starterConfig), 0o644)
}

// serviceStatus prints installed/running/stopped and the paths in use.
func serviceStatus(e *env, m *service.Manager) error {
	st, err := m.Status()
	u := m.Unit()
	fmt.Fprintf(e.stdout, "service   %s: %s\n", m, st)
	if err != nil {
		fmt.Fprintf(e.stdout, "          (%v)\n", err)
	}
	fmt.Fprintf(e.stdout, "unit      %s\nbinary    %s\nconfig    %s\n", m.UnitPath(), u.Executable, u.ConfigPath)
	// State and socket: the config's, else the mode's defaults.
	paths := platform.PathsFor(runtime.GOOS, u.Mode)
	if cfg, cerr := config.Load(u.ConfigPath); cerr == nil {
		if cfg.StateDir != "" {
			paths.State = cfg.StateDir
		}
		if cfg.Socket != "" {
			paths.Socket = cfg.Socket
		} else if cfg.StateDir != "" && u.Mode == platform.ModeUser && os.Getenv("XDG_RUNTIME_DIR") == "" {
			paths.Socket = filepath.Join(cfg.StateDir, "cairn.sock")
		}
	} else if _, serr := os.Stat(u.ConfigPath); serr == nil {
		fmt.Fprintf(e.stdout, "          config does not load: %v\n", cerr)
	}
	fmt.Fprintf(e.stdout, "state     %s\nsocket    %s\nlogs      %s\n", paths.State, paths.Socket, m.LogsTo())
	return nil
}
