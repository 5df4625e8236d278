// Package service installs, starts, stops and runs cairn as an OS service
// (systemd, SysV init where systemd is absent, launchd). It is the one package
// that imports github.com/kardianos/service; the units it writes are cairn's
// own templates (see Render), never kardianos's defaults, and kardianos's
// logger is not used.
package service

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	ksvc "github.com/kardianos/service"

	"github.com/cairn-dev/cairn/platform"
)

// DefaultName is the service's name: the unit, script or launchd label.
func DefaultName() string {
	if runtime.GOOS == "darwin" {
		return "ai.cairn.daemon"
	}
	return "cairn"
}

// Config says which service to manage. Empty fields take the mode's defaults.
type Config struct {
	Name       string        // DefaultName() if empty; tests use their own
	Mode       platform.Mode // system (root) or user
	Executable string        // the cairn binary; this one if empty
	ConfigPath string        // platform.PathsFor(…).Config if empty
	LogPath    string        // SysV and launchd log file; the mode's default if empty
}

// State is what Status finds.
type State string

const (
	NotInstalled State = "not installed"
	Stopped      State = "stopped"
	Running      State = "running"
)

// Manager manages one service through the machine's service manager.
type Manager struct {
	unit Unit
	kind Kind
	svc  ksvc.Service
}

// Detect names the machine's service manager, or fails for one cairn has no template for.
func Detect() (Kind, error) {
	switch p := ksvc.Platform(); p {
	case "linux-systemd":
		return KindSystemd, nil
	case "unix-systemv":
		return KindSysV, nil
	case "darwin-launchd":
		return KindLaunchd, nil
	default:
		return "", fmt.Errorf("service manager %q is not supported: cairn installs under systemd, SysV init or launchd", p)
	}
}

// New prepares a Manager; it changes nothing on the machine.
func New(c Config) (*Manager, error) {
	kind, err := Detect()
	if err != nil {
		return nil, err
	}
	paths := platform.PathsFor(runtime.GOOS, c.Mode)
	u := Unit(c)
	if u.Name == "" {
		u.Name = DefaultName()
	}
	if u.Executable == "" {
		if u.Executable, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("find the cairn binary: %w", err)
		}
		if p, err := filepath.EvalSymlinks(u.Executable); err == nil {
			u.Executable = p
		}
	}
	if u.ConfigPath == "" {
		u.ConfigPath = paths.Config
	}
	if u.LogPath == "" {
		u.LogPath = paths.Log
		if u.Name != DefaultName() { // a second instance logs beside the first, not into it
			u.LogPath = filepath.Join(filepath.Dir(paths.Log), u.Name+".log")
		}
	}
	for _, p := range []*string{&u.Executable, &u.ConfigPath, &u.LogPath} {
		if *p, err = filepath.Abs(*p); err != nil {
			return nil, err
		}
	}
	if kind == KindSysV && c.Mode == platform.ModeUser {
		return nil, errors.New("this machine has no systemd, and SysV init has no per-user services: install without --user (as root)")
	}
	text, err := Render(kind, u)
	if err != nil {
		return nil, err
	}
	opt := ksvc.KeyValue{"UserService": c.Mode == platform.ModeUser}
	switch kind {
	case KindSystemd:
		opt["SystemdScript"] = string(text)
	case KindSysV:
		opt["SysvScript"] = string(text)
	case KindLaunchd:
		opt["LaunchdConfig"] = string(text)
	}
	svc, err := ksvc.New(noop{}, &ksvc.Config{
		Name:        u.Name,
		DisplayName: "cairn checkpoint daemon",
		Description: "Checkpoints agent workspaces into shadow git stores.",
		Executable:  u.Executable,
		Arguments:   []string{"daemon", "--config", u.ConfigPath, "--service"},
		Option:      opt,
	})
	if err != nil {
		return nil, fmt.Errorf("service %s: %w", u.Name, err)
	}
	return &Manager{unit: u, kind: kind, svc: svc}, nil
}

// Unit is what the manager installs: name, mode, binary, config and log paths.
func (m *Manager) Unit() Unit { return m.unit }

// Kind is the machine's service manager.
func (m *Manager) Kind() Kind { return m.kind }

// LogsTo says where the daemon's output goes.
func (m *Manager) LogsTo() string {
	if m.kind == KindSystemd {
		flag := ""
		if m.unit.Mode == platform.ModeUser {
			flag = "--user "
		}
		return "journald (journalctl " + flag + "-u " + m.unit.Name + ")"
	}
	return m.unit.LogPath
}

// UnitPath is the file Install writes.
func (m *Manager) UnitPath() string {
	home, _ := os.UserHomeDir()
	user := m.unit.Mode == platform.ModeUser
	switch m.kind {
	case KindSystemd:
		if user {
			return filepath.Join(home, ".config", "systemd", "user", m.unit.Name+".service")
		}
		return "/etc/systemd/system/" + m.unit.Name + ".service"
	case KindSysV:
		return "/etc/init.d/" + m.unit.Name
	case KindLaunchd:
		if user {
			return filepath.Join(home, "Library", "LaunchAgents", m.unit.Name+".plist")
		}
		return "/Library/LaunchDaemons/" + m.unit.Name + ".plist"
	}
	return ""
}

// Installed says whether the unit file exists.
func (m *Manager) Installed() bool {
	_, err := os.Stat(m.UnitPath())
	return err == nil
}

// Install writes the unit (enabling it where the manager has that notion); it
// does not start the service.
func (m *Manager) Install() error {
	if m.Installed() {
		return fmt.Errorf("service %s is already installed at %s; uninstall it first", m.unit.Name, m.UnitPath())
	}
	if m.kind != KindSystemd {
		if err := os.MkdirAll(filepath.Dir(m.unit.LogPath), 0o755); err != nil {
			return fmt.Errorf("log folder: %w", err)
		}
	}
	if err := m.svc.Install(); err != nil {
		return fmt.Errorf("install service %s: %w", m.unit.Name, err)
	}
	return nil
}

// Uninstall stops the service if it runs and removes every file Install wrote.
func (m *Manager) Uninstall() error {
	if !m.Installed() {
		return fmt.Errorf("service %s is not installed (no %s)", m.unit.Name, m.UnitPath())
	}
	if st, _ := m.Status(); st == Running {
		if err := m.Stop(); err != nil {
			return err
		}
	}
	if err := m.svc.Uninstall(); err != nil {
		return fmt.Errorf("uninstall service %s: %w", m.unit.Name, err)
	}
	if m.kind == KindSysV {
		// kardianos links the script into /etc/rc?.d but leaves the links behind.
		links, _ := filepath.Glob("/etc/rc?.d/[SK][0-9][0-9]" + m.unit.Name)
		for _, l := range links {
			if t, err := os.Readlink(l); err == nil && t == m.UnitPath() {
				if err := os.Remove(l); err != nil {
					return fmt.Errorf("uninstall service %s: %w", m.unit.Name, err)
				}
			}
		}
	}
	return nil
}

// Start starts the installed service.
func (m *Manager) Start() error { return m.wrap("start", m.svc.Start()) }

// Stop stops it; the daemon finishes a seal in progress first.
func (m *Manager) Stop() error { return m.wrap("stop", m.svc.Stop()) }

// Restart stops and starts it, e.g. after the binary was upgraded.
func (m *Manager) Restart() error { return m.wrap("restart", m.svc.Restart()) }

func (m *Manager) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if !m.Installed() {
		return fmt.Errorf("%s service %s: not installed (no %s)", op, m.unit.Name, m.UnitPath())
	}
	return fmt.Errorf("%s service %s: %w (logs: %s)", op, m.unit.Name, err, m.LogsTo())
}

// Status says whether the service is installed and running. A service manager
// that cannot be asked still yields NotInstalled or Stopped, with the error.
func (m *Manager) Status() (State, error) {
	if !m.Installed() {
		return NotInstalled, nil
	}
	st, err := m.svc.Status()
	if st == ksvc.StatusRunning {
		return Running, nil
	}
	// kardianos reports a stopped SysV service as an error (its status exits non-zero).
	if m.kind == KindSysV || errors.Is(err, ksvc.ErrNotInstalled) {
		err = nil
	}
	return Stopped, err
}

// Run runs fn as the service's main body: kardianos's Start launches it, and
// its Stop (on SIGTERM or Interrupt from the service manager, or ctx ending)
// cancels fn's context and waits for it. fn ending by itself ends Run with its error.
func Run(ctx context.Context, name string, fn func(context.Context) error) error {
	p := &program{fn: fn, done: make(chan struct{})}
	p.ctx, p.cancel = context.WithCancel(ctx)
	defer p.cancel()
	svc, err := ksvc.New(p, &ksvc.Config{Name: name, Option: ksvc.KeyValue{
		"RunWait": func() {
			select {
			case <-p.ctx.Done():
			case <-p.done:
			}
		},
	}})
	if err != nil {
		return fmt.Errorf("service %s: %w", name, err)
	}
	if err := svc.Run(); err != nil {
		return err
	}
	return p.err
}

type program struct {
	ctx    context.Context
	cancel context.CancelFunc
	fn     func(context.Context) error
	done   chan struct{}
	err    error
}

func (p *program) Start(ksvc.Service) error {
	go func() {
		defer close(p.done)
		p.err = p.fn(p.ctx)
	}()
	return nil
}

func (p *program) Stop(ksvc.Service) error {
	_ = NotifyStopping()
	p.cancel()
	<-p.done
	return nil
}

// noop is the program of a Manager, which installs and controls but never runs.
type noop struct{}

func (noop) Start(ksvc.Service) error { return nil }
func (noop) Stop(ksvc.Service) error  { return nil }

// String is for messages: "cairn (sysv, system)".
func (m *Manager) String() string {
	return fmt.Sprintf("%s (%s, %s)", m.unit.Name, m.kind, strings.ToLower(m.unit.Mode.String()))
}
