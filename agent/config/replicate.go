package config

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/agent/replicate"
)

// Replicate is [replicate] under [defaults] or a [[watch]] entry (README.md,
// "Fleet replication"): the remote a workspace's checkpoints are pushed to.
// A key left out takes [defaults]'.
type Replicate struct {
	// Remote is any URL git accepts (ssh, https, file://).
	Remote string `toml:"remote"`
	// Host names this machine on the remote; default its hostname made safe
	// (replicate.SafeHost).
	Host string `toml:"host"`
	// Interval batches autosaves (and other kinds than lifecycle ones): at
	// most one push per interval; default 10s.
	Interval Duration `toml:"interval"`
	// Enabled defaults to true when Remote is set.
	Enabled *bool `toml:"enabled"`
	// PushUser, for a daemon running as root, names the account whose
	// credentials push; default the workspace's owner.
	PushUser string `toml:"push_user"`
	// SSHCommand is GIT_SSH_COMMAND for the push.
	SSHCommand string `toml:"ssh_command"`
}

// defaultReplicateInterval is how often autosaves are pushed at most.
const defaultReplicateInterval = 10 * time.Second

// merge fills the keys r leaves unset from d.
func (r Replicate) merge(d Replicate) Replicate {
	if r.Remote == "" {
		r.Remote = d.Remote
	}
	if r.Host == "" {
		r.Host = d.Host
	}
	if r.Interval.Duration == 0 {
		r.Interval = d.Interval
	}
	if r.Enabled == nil {
		r.Enabled = d.Enabled
	}
	if r.PushUser == "" {
		r.PushUser = d.PushUser
	}
	if r.SSHCommand == "" {
		r.SSHCommand = d.SSHCommand
	}
	return r
}

// On reports whether the workspace replicates: a remote, and not disabled.
func (r Replicate) On() bool {
	return r.Remote != "" && (r.Enabled == nil || *r.Enabled)
}

// HostName is Host, or this machine's hostname made safe.
func (r Replicate) HostName() string {
	if r.Host != "" {
		return r.Host
	}
	h, err := os.Hostname()
	if err != nil || h == "" {
		h = "localhost"
	}
	return replicate.SafeHost(h)
}

// Every is Interval, or its default.
func (r Replicate) Every() time.Duration {
	if r.Interval.Duration > 0 {
		return r.Interval.Duration
	}
	return defaultReplicateInterval
}

// check refuses a [replicate] table that cannot work, naming the key.
func (r Replicate) check() (key, reason string) {
	if r.Host != "" {
		if _, err := replicate.Host(r.Host); err != nil {
			return "host", "replicate: " + err.Error()
		}
	}
	if r.Remote != "" {
		switch {
		case strings.HasPrefix(r.Remote, "-"):
			return "remote", fmt.Sprintf("replicate: remote %q: a URL cannot start with '-'", replicate.Redact(r.Remote))
		case strings.ContainsAny(r.Remote, "\x00\n\r"):
			return "remote", "replicate: remote: a URL cannot hold a newline or NUL"
		case replicate.StrayPassword(r.Remote):
			return "remote", fmt.Sprintf("replicate: remote %q: a password in this kind of URL is never used by git and would show on a command line; use a key (ssh_command) instead", replicate.Redact(r.Remote))
		}
	}
	if r.Enabled != nil && *r.Enabled && r.Remote == "" {
		return "enabled", "replicate: enabled = true needs a remote"
	}
	if d := r.Interval.Duration; d != 0 && d < 100*time.Millisecond {
		return "interval", fmt.Sprintf("replicate: interval %s is too short (at least 100ms)", d)
	}
	if strings.ContainsAny(r.SSHCommand, "\x00\n\r") {
		return "ssh_command", "replicate: ssh_command cannot hold a newline or NUL"
	}
	return "", ""
}
