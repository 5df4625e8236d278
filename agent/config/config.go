// Package config reads cairn's configuration file (TOML): the daemon's keys,
// [defaults] and each [[watch]] root's Settings for the workspaces it finds
// (README, "Configuration").
package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/bmatcuk/doublestar/v4"

	"github.com/cairn-dev/cairn/snapshot"
	"github.com/cairn-dev/cairn/snapshot/retain"
)

// Config is the daemon's configuration (TOML).
type Config struct {
	StateDir string `toml:"state_dir"`
	Socket   string `toml:"socket"`
	LogLevel string `toml:"log_level"`
	// ReconcileInterval is how often a degraded workspace (watch limit hit)
	// reconciles its whole tree; default 10s. Workspaces get it through
	// Settings.ReconcileInterval.
	ReconcileInterval Duration `toml:"reconcile_interval"`
	// MaxRuntimeFile caps what cairn reads of a runtime file (state.json, its
	// .bak, runtime.lock, the archive manifest); default 64 MiB. Read at start.
	MaxRuntimeFile Size `toml:"max_runtime_file"`
	// Maintenance (docs/operating.md, "Maintenance"): at most once per
	// maintenance_interval (default 1h), after maintenance_idle without a
	// seal (default 60s); unreachable objects are pruned after
	// gc_prune_grace (default 2 weeks). Carried to workspaces in Settings.
	MaintenanceInterval Duration `toml:"maintenance_interval"`
	MaintenanceIdle     Duration `toml:"maintenance_idle"`
	GCPruneGrace        Duration `toml:"gc_prune_grace"`
	// Budgets (docs/operating.md, "Budgets and disk space"): max_total_size for all the
	// stores one daemon process serves (a root daemon: per owner's worker),
	// and disk_floor, the free space under which autosaves pause ("5%" or
	// "1GiB"; default the smaller of 5 % and 1 GiB). Carried in Settings.
	MaxTotalSize Size      `toml:"max_total_size"`
	DiskFloor    DiskFloor `toml:"disk_floor"`
	// Metrics (docs/operating.md, "Metrics"): GET /metrics also on metrics_listen
	// (host:port, read at start), a loopback address unless
	// metrics_allow_remote; per_workspace_metrics adds series labelled with
	// each workspace's folder.
	MetricsListen       string      `toml:"metrics_listen"`
	MetricsAllowRemote  bool        `toml:"metrics_allow_remote"`
	PerWorkspaceMetrics bool        `toml:"per_workspace_metrics"`
	Defaults            Settings    `toml:"defaults"`
	Watch               []WatchRoot `toml:"watch"`

	path string // the file it came from, if any
}

// LayoutAutodev is the in-repository layout: opted into by a [[watch]]
// entry, never chosen by auto.
const LayoutAutodev = "autodev"

// DefaultMaxWorkspaces is a [[watch]] root's max_workspaces when none is set.
const DefaultMaxWorkspaces = 1000

// Settings apply to a workspace; [defaults] sets them for all, a [[watch]]
// entry overrides them for the workspaces it finds.
type Settings struct {
	Layout      string   `toml:"layout"`   // auto, hankweave, plain, or autodev (opt-in only: the user's own repository)
	Patterns    []string `toml:"patterns"` // plain layout: what a checkpoint holds
	Excludes    []string `toml:"excludes"` // never checkpointed nor watched; .gitignore lines (snapshot.ExcludeGlob)
	MaxFileSize Size     `toml:"max_file_size"`
	// Engine seals incremental checkpoints: "inproc" (default) or "git"
	// (docs/cairn-formats.md, "The in-process engine").
	Engine          string   `toml:"engine"`
	Autosave        *bool    `toml:"autosave"`
	AutosaveQuiet   Duration `toml:"autosave_quiet"`
	AutosaveMaxWait Duration `toml:"autosave_max_wait"`
	// User, for a daemon running as root, names who git runs as and who owns
	// what cairn writes; empty: the owner of the workspace folder.
	User string `toml:"user"`
	// ReconcileInterval is the config's top-level reconcile_interval, carried
	// to each workspace (and worker) with the rest of its settings.
	ReconcileInterval Duration `toml:"-"`
	// MaintenanceInterval, MaintenanceIdle and GCPruneGrace are the config's
	// top-level keys of the same names, carried like ReconcileInterval.
	MaintenanceInterval Duration `toml:"-"`
	MaintenanceIdle     Duration `toml:"-"`
	GCPruneGrace        Duration `toml:"-"`
	// Retention is [retention] (autosaves), [retention.pre_restore] and
	// [retention.checkpoints]; a group left out takes [defaults]' (or
	// retain.Defaults()).
	Retention Retention `toml:"retention"`
	// MaxStoreSize is this workspace's store budget (0: none).
	MaxStoreSize Size `toml:"max_store_size"`
	// Replicate is [replicate]: the fleet remote (config_replicate.go).
	Replicate Replicate `toml:"replicate"`
	// MaxTotalSize and DiskFloor are the config's top-level keys, carried
	// like ReconcileInterval.
	MaxTotalSize Size      `toml:"-"`
	DiskFloor    DiskFloor `toml:"-"`
}

// WatchRoot is a glob of execution directories, with per-root settings.
type WatchRoot struct {
	Path string `toml:"path"`
	// CrossMounts lets discovery enter other file systems below the root's
	// fixed part (never /proc, /sys or /dev).
	CrossMounts bool `toml:"cross_mounts"`
	// MaxWorkspaces is the most workspaces this root watches, shared among
	// their owners (0: 1000; README, "Security").
	MaxWorkspaces int `toml:"max_workspaces"`
	Settings
}

// Duration is a time.Duration written as "2s", "1m30s".
type Duration struct{ time.Duration }

func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("bad duration %q (want e.g. 2s, 1m30s)", b)
	}
	if v < 0 {
		return fmt.Errorf("negative duration %q", b)
	}
	d.Duration = v
	return nil
}

// MarshalText writes d back as UnmarshalText reads it (the supervisor hands
// settings to its workers as JSON).
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.Duration.String()), nil }

// Size is a byte count written as 1048576, "100MiB", "2GiB" or "500KB".
type Size int64

func (s *Size) UnmarshalText(b []byte) error {
	if strings.TrimSpace(string(b)) == "0" {
		*s = 0 // unset: MarshalText writes an unset size so
		return nil
	}
	v, err := parseSize(string(b))
	if err != nil {
		return err
	}
	*s = Size(v)
	return nil
}

// MarshalText writes s as a plain byte count.
func (s Size) MarshalText() ([]byte, error) { return []byte(strconv.FormatInt(int64(s), 10)), nil }

func parseSize(str string) (int64, error) {
	t := strings.TrimSpace(str)
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(t, u.suffix) {
			mult, t = u.mult, strings.TrimSpace(strings.TrimSuffix(t, u.suffix))
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("bad size %q (want e.g. 104857600 or 100MiB)", str)
	}
	return n * mult, nil
}

// DefaultSettings are what a workspace gets when nothing is configured.
func DefaultSettings() Settings {
	on := true
	return Settings{
		Layout:            string(snapshot.LayoutAuto),
		Patterns:          []string{"**"},
		MaxFileSize:       100 << 20,
		Autosave:          &on,
		AutosaveQuiet:     Duration{2 * time.Second},
		AutosaveMaxWait:   Duration{60 * time.Second},
		ReconcileInterval: Duration{DefaultReconcileInterval},
		Retention:         Retention(retain.Defaults()),
	}
}

// DefaultReconcileInterval is how often a degraded workspace reconciles
// when reconcile_interval is not set.
const DefaultReconcileInterval = 10 * time.Second

// Equal reports whether s and o are the same settings.
func (s Settings) Equal(o Settings) bool { return reflect.DeepEqual(s, o) }

// Merge fills what s leaves unset from d (a [[watch]] entry's settings
// over [defaults], [defaults] over DefaultSettings).
func (s Settings) Merge(d Settings) Settings {
	if s.Layout == "" {
		s.Layout = d.Layout
	}
	if s.Patterns == nil {
		s.Patterns = d.Patterns
	}
	if s.Excludes == nil {
		s.Excludes = d.Excludes
	}
	if s.MaxFileSize == 0 {
		s.MaxFileSize = d.MaxFileSize
	}
	if s.Engine == "" {
		s.Engine = d.Engine
	}
	if s.Autosave == nil {
		s.Autosave = d.Autosave
	}
	if s.AutosaveQuiet.Duration == 0 {
		s.AutosaveQuiet = d.AutosaveQuiet
	}
	if s.AutosaveMaxWait.Duration == 0 {
		s.AutosaveMaxWait = d.AutosaveMaxWait
	}
	if s.User == "" {
		s.User = d.User
	}
	if s.ReconcileInterval.Duration == 0 {
		s.ReconcileInterval = d.ReconcileInterval
	}
	if s.MaintenanceInterval.Duration == 0 {
		s.MaintenanceInterval = d.MaintenanceInterval
	}
	if s.MaintenanceIdle.Duration == 0 {
		s.MaintenanceIdle = d.MaintenanceIdle
	}
	if s.GCPruneGrace.Duration == 0 {
		s.GCPruneGrace = d.GCPruneGrace
	}
	s.Retention = s.Retention.Merge(d.Retention)
	s.Replicate = s.Replicate.merge(d.Replicate)
	if s.MaxStoreSize == 0 {
		s.MaxStoreSize = d.MaxStoreSize
	}
	if s.MaxTotalSize == 0 {
		s.MaxTotalSize = d.MaxTotalSize
	}
	if s.DiskFloor.zero() {
		s.DiskFloor = d.DiskFloor
	}
	return s
}

// Error is a configuration refused at load: the file, the line and why.
type Error struct {
	File   string
	Line   int
	Reason string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Reason)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Reason)
}

// Load reads and validates a config file.
func Load(path string) (*Config, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{File: path, Reason: err.Error()}
	}
	return Parse(path, string(src))
}

// Parse parses and validates config text; name is used in errors.
func Parse(name, src string) (*Config, error) {
	var c Config
	md, err := toml.Decode(src, &c)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) && strings.HasPrefix(pe.Message, retentionErrPrefix) {
			// A [retention] table refused (config_retention.go): the message
			// quotes the key first; its line is at or below the table's.
			reason := strings.TrimPrefix(pe.Message, retentionErrPrefix)
			key := ""
			if i := strings.Index(reason, "\""); i >= 0 {
				if j := strings.Index(reason[i+1:], "\""); j > 0 {
					key = reason[i+1 : i+1+j]
				}
			}
			return nil, &Error{File: name, Line: lineFrom(src, key, pe.Position.Line), Reason: reason}
		}
		if errors.As(err, &pe) {
			return nil, &Error{File: name, Line: pe.Position.Line, Reason: pe.Message}
		}
		// A type error from a field's decoder: find the key's line.
		return nil, &Error{File: name, Line: lineOfError(src, err.Error()), Reason: err.Error()}
	}
	if und := md.Undecoded(); len(und) > 0 {
		k := und[0]
		return nil, &Error{File: name, Line: lineOf(src, k[len(k)-1]), Reason: fmt.Sprintf("unknown key %q", k.String())}
	}
	c.path = name
	if err := c.validate(src); err != nil {
		return nil, err
	}
	// [defaults] carries it to every workspace (merge fills [[watch]] entries).
	c.Defaults.ReconcileInterval = c.ReconcileInterval
	c.Defaults.MaintenanceInterval, c.Defaults.MaintenanceIdle, c.Defaults.GCPruneGrace =
		c.MaintenanceInterval, c.MaintenanceIdle, c.GCPruneGrace
	c.Defaults.MaxTotalSize, c.Defaults.DiskFloor = c.MaxTotalSize, c.DiskFloor
	return &c, nil
}

func (c *Config) validate(src string) error {
	bad := func(key, format string, a ...any) error {
		return &Error{File: c.path, Line: lineOf(src, key), Reason: fmt.Sprintf(format, a...)}
	}
	check := func(s Settings) error {
		switch snapshot.Layout(s.Layout) {
		case "", snapshot.LayoutAuto, snapshot.LayoutHankweave, snapshot.LayoutPlain, LayoutAutodev:
		default:
			return bad("layout", "layout %q: want auto, hankweave, plain or autodev", s.Layout)
		}
		switch s.Engine {
		case "", snapshot.EngineInproc, snapshot.EngineGit:
		default:
			return bad("engine", "engine %q: want %s or %s", s.Engine, snapshot.EngineInproc, snapshot.EngineGit)
		}
		if _, err := snapshot.NewSelector(s.Patterns); err != nil {
			return bad("patterns", "patterns: %v", err)
		}
		for _, e := range s.Excludes {
			if strings.HasPrefix(strings.TrimSpace(e), "!") {
				return bad("excludes", "excludes: %q: excludes cannot re-include (a leading ! in .gitignore); drop the ! to exclude the name, or write \\! for a name that starts with !", e)
			}
			if !doublestar.ValidatePattern(snapshot.ExcludeGlob(e)) {
				return bad("excludes", "excludes: invalid pattern %q", e)
			}
		}
		if key, reason := s.Replicate.merge(c.Defaults.Replicate).check(); key != "" {
			return &Error{File: c.path, Line: lineFrom(src, key, lineOf(src, "replicate")), Reason: reason}
		}
		if s.AutosaveMaxWait.Duration > 0 && s.AutosaveQuiet.Duration > s.AutosaveMaxWait.Duration {
			return bad("autosave_quiet", "autosave_quiet (%s) is longer than autosave_max_wait (%s)", s.AutosaveQuiet, s.AutosaveMaxWait)
		}
		return nil
	}
	if err := check(c.Defaults); err != nil {
		return err
	}
	for _, w := range c.Watch {
		if w.Path == "" {
			return bad("[[watch]]", "a [[watch]] entry needs a path")
		}
		if !filepath.IsAbs(w.Path) {
			return bad(w.Path, "watch path %q must be absolute", w.Path)
		}
		if w.MaxWorkspaces < 0 {
			return bad("max_workspaces", "max_workspaces %d: want a positive count (0 or none: %d)", w.MaxWorkspaces, DefaultMaxWorkspaces)
		}
		if !doublestar.ValidatePattern(filepath.ToSlash(w.Path)) {
			return bad(w.Path, "watch path %q is not a valid glob", w.Path)
		}
		if err := check(w.Settings); err != nil {
			return err
		}
	}
	if d := c.ReconcileInterval.Duration; d != 0 && d < 100*time.Millisecond {
		return bad("reconcile_interval", "reconcile_interval %s is too short (at least 100ms)", d)
	}
	if d := c.MaintenanceInterval.Duration; d != 0 && d < 100*time.Millisecond {
		return bad("maintenance_interval", "maintenance_interval %s is too short (at least 100ms)", d)
	}
	if d := c.GCPruneGrace.Duration; d != 0 && d < time.Minute {
		return bad("gc_prune_grace", "gc_prune_grace %s is too short (at least 1m: a seal's fresh objects must not be pruned)", d)
	}
	if c.MetricsListen != "" {
		if err := CheckMetricsListen(c.MetricsListen, c.MetricsAllowRemote); err != nil {
			return bad("metrics_listen", "%v", err)
		}
	}
	switch strings.ToLower(c.LogLevel) {
	case "", "debug", "info", "warn", "error":
	default:
		return bad("log_level", "log_level %q: want debug, info, warn or error", c.LogLevel)
	}
	return nil
}

// lineOf is the first line of src that sets key (or mentions it), 0 if none.
func lineOf(src, key string) int {
	for i, l := range strings.Split(src, "\n") {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, key) && strings.HasPrefix(strings.TrimSpace(t[len(key):]), "=") {
			return i + 1
		}
	}
	for i, l := range strings.Split(src, "\n") {
		if strings.Contains(l, key) {
			return i + 1
		}
	}
	return 0
}

// lineFrom is the first line at or after line from (1-based; 0: anywhere)
// that sets or mentions key, else from.
func lineFrom(src, key string, from int) int {
	lines := strings.Split(src, "\n")
	if from < 1 {
		from = 1
	}
	if from <= len(lines) {
		if n := lineOf(strings.Join(lines[from-1:], "\n"), key); n > 0 {
			return from - 1 + n
		}
	}
	if n := lineOf(src, key); n > 0 {
		return n
	}
	return from
}

// lineOfError finds the line of a value quoted in a decode error.
func lineOfError(src, msg string) int {
	if i := strings.Index(msg, "\""); i >= 0 {
		if j := strings.Index(msg[i+1:], "\""); j > 0 {
			return lineOf(src, msg[i+1:i+1+j])
		}
	}
	return 0
}
