package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"

	"github.com/cairn-dev/cairn/agent/config"
	"github.com/cairn-dev/cairn/platform"
	"github.com/cairn-dev/cairn/platform/printable"
	"github.com/cairn-dev/cairn/platform/service"
)

func init() {
	register("service", "install, start, stop or remove cairn as a system (or --user) service", runService).subs = serviceActions
}

// serviceActions are what `cairn service` does.
var serviceActions = []string{"install", "uninstall", "start", "stop", "restart", "status"}

const serviceUsage = "service install|uninstall|start|stop|restart|status [--user] [--config FILE] [--json]"

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
	fs := newFlags("service", serviceUsage, e)
	user := fs.Bool("user", false, "a per-user service (default: the system service, as root)")
	cfgPath := fs.String("config", "", "config file the service reads (default: the mode's config path)")
	name := fs.String("name", "", "service name (default: "+service.DefaultName()+"; tests use their own)")
	asJSON := fs.Bool("json", false, "status: print the status as JSON")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		fs.Usage()
		return usageErr("service needs an action: install, uninstall, start, stop, restart or status")
	}
	action := pos[0]
	if !slices.Contains(serviceActions, action) {
		return usageErr("unknown service action %q; want install, uninstall, start, stop, restart or status", action)
	}
	if len(pos) > 1 {
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
		return serviceStatus(e, m, *asJSON)
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

// Exit codes of `cairn service status`, systemctl's (LSB's) own, so scripts
// written for `systemctl is-active`/`systemctl status` read them the same.
const (
	serviceRunning = 0 // running
	serviceStopped = 3 // installed, not running
	serviceUnknown = 4 // not installed, or the service manager could not be asked
)

// serviceState is `cairn service status --json`.
type serviceState struct {
	Name       string `json:"name"`
	State      string `json:"state"` // running, stopped, not installed
	Error      string `json:"error,omitempty"`
	Unit       string `json:"unit"`
	Binary     string `json:"binary"`
	Config     string `json:"config"`
	ConfigErr  string `json:"config_error,omitempty"`
	StateDir   string `json:"state_dir"`
	Socket     string `json:"socket"`
	Logs       string `json:"logs"`
	Mode       string `json:"mode"`
	ExitStatus int    `json:"exit_status"`
}

// statusCode is the systemctl-like exit code of a service state.
func statusCode(st service.State, err error) int {
	switch {
	case st == service.Running:
		return serviceRunning
	case st == service.Stopped && err == nil:
		return serviceStopped
	}
	return serviceUnknown
}

// serviceStatus prints installed/running/stopped and the paths in use, and
// exits as systemctl does: 0 running, 3 stopped, 4 not installed or unknown.
func serviceStatus(e *env, m *service.Manager, asJSON bool) error {
	st, err := m.Status()
	u := m.Unit()
	s := serviceState{Name: m.String(), State: string(st), Unit: m.UnitPath(), Binary: u.Executable, Config: u.ConfigPath,
		Logs: m.LogsTo(), Mode: map[bool]string{false: "system", true: "user"}[u.Mode == platform.ModeUser], ExitStatus: statusCode(st, err)}
	if err != nil {
		s.Error = err.Error()
	}
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
		s.ConfigErr = cerr.Error()
	}
	s.StateDir, s.Socket = paths.State, paths.Socket
	if asJSON {
		b, _ := json.MarshalIndent(s, "", "  ")
		fmt.Fprintln(e.stdout, string(printable.JSON(b)))
	} else {
		fmt.Fprintf(e.stdout, "service   %s: %s\n", s.Name, s.State)
		if s.Error != "" {
			fmt.Fprintf(e.stdout, "          (%s)\n", printable.String(s.Error))
		}
		fmt.Fprintf(e.stdout, "unit      %s\nbinary    %s\nconfig    %s\n", s.Unit, s.Binary, s.Config)
		if s.ConfigErr != "" {
			fmt.Fprintf(e.stdout, "          config does not load: %s\n", printable.String(s.ConfigErr))
		}
		fmt.Fprintf(e.stdout, "state     %s\nsocket    %s\nlogs      %s\n", s.StateDir, s.Socket, s.Logs)
	}
	if s.ExitStatus != serviceRunning {
		return &exitError{s.ExitStatus, errSilent}
	}
	return nil
}
