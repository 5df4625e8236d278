// Package replicate pushes a workspace's checkpoints to a git remote shared
// by many hosts and reads them back (docs/cairn-formats.md, "Fleet
// replication"). This file is the layout on the remote: where each host's
// workspaces live and the manifest that names them.
package replicate

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"
)

// Prefix holds every replicated ref on a remote:
// refs/cairn/fleet/<host>/<key>/<local ref without "refs/">, and
// refs/cairn/fleet/<host>/<key>/manifest.
const Prefix = "refs/cairn/fleet/"

// ManifestName is the last component of a workspace's manifest ref. No local
// ref maps onto it: local refs all start with heads/ or cairn/ there.
const ManifestName = "manifest"

// ManifestFile is the file in the manifest commit's tree.
const ManifestFile = "manifest.json"

// ManifestVersion is the version of Manifest this code writes.
const ManifestVersion = 1

// Manifest describes one replicated workspace. It is the only file of the
// commit its manifest ref names, rewritten (a new parentless commit) at each
// push, so a reader finds every workspace from the refs alone.
type Manifest struct {
	Version   int    `json:"version"`
	Host      string `json:"host"`
	Key       string `json:"key"`
	Workspace string `json:"workspace"` // the real path on the host
	Layout    string `json:"layout"`    // plain or hankweave
	Owner     string `json:"owner,omitempty"`
	UID       int    `json:"uid"`
	// Checkpoints is how many ledger records have a commit; Newest the
	// newest of them.
	Checkpoints int       `json:"checkpoints"`
	Newest      *Newest   `json:"newest,omitempty"`
	Pushed      time.Time `json:"pushed"`
	Refs        int       `json:"refs"`
	Position    string    `json:"position,omitempty"` // the checkpoint the work tree was at
}

// Newest is the newest checkpoint of a manifest.
type Newest struct {
	ID    string    `json:"id"`
	SHA   string    `json:"sha"`
	Kind  string    `json:"kind"`
	Label string    `json:"label,omitempty"`
	Time  time.Time `json:"time"`
}

// Key names a workspace on the remote: its folder's base name made safe for
// a ref name, a dash, and 16 hex digits of the SHA-256 of its real path (the
// same hash as a plain store's folder).
func Key(realPath string) string {
	sum := sha256.Sum256([]byte(realPath))
	base := realPath
	if i := strings.LastIndexByte(base, '/'); i >= 0 {
		base = base[i+1:]
	}
	return safeComponent(base, 40) + "-" + hex.EncodeToString(sum[:8])
}

// Host checks a host name for use as one ref component: letters, digits,
// '.', '_' and '-', not starting with '.' or '-', at most 63 characters.
func Host(h string) (string, error) {
	if h == "" || len(h) > 63 || h[0] == '.' || h[0] == '-' || strings.Contains(h, "..") || strings.HasSuffix(h, ".lock") {
		return "", fmt.Errorf("host %q cannot name a ref: use letters, digits, '.', '_' and '-', at most 63 characters", h)
	}
	for _, c := range h {
		if !refSafe(c) {
			return "", fmt.Errorf("host %q cannot name a ref: %q is not allowed (letters, digits, '.', '_' and '-')", h, c)
		}
	}
	return h, nil
}

// SafeHost turns a machine's hostname into a valid Host: unsafe characters
// become '_'.
func SafeHost(h string) string { return safeComponent(h, 63) }

// Base is the prefix of one workspace's refs on the remote, ending in '/'.
func Base(host, key string) string { return Prefix + host + "/" + key + "/" }

// RemoteRef maps a local ref (refs/heads/…, refs/cairn/…) to its name on
// the remote; ok is false for refs that are not replicated.
func RemoteRef(host, key, local string) (string, bool) {
	rest, ok := strings.CutPrefix(local, "refs/")
	if !ok || !(strings.HasPrefix(rest, "heads/") || strings.HasPrefix(rest, "cairn/")) || strings.HasPrefix(rest, "cairn/fleet/") {
		return "", false
	}
	return Base(host, key) + rest, true
}

// LocalRef maps a remote ref of host/key back to the local ref; ok is false
// for the manifest and refs of other workspaces.
func LocalRef(host, key, remote string) (string, bool) {
	rest, ok := strings.CutPrefix(remote, Base(host, key))
	if !ok || rest == ManifestName || !(strings.HasPrefix(rest, "heads/") || strings.HasPrefix(rest, "cairn/")) {
		return "", false
	}
	return "refs/" + rest, true
}

// ManifestRef is the manifest ref of host/key.
func ManifestRef(host, key string) string { return Base(host, key) + ManifestName }

// SplitManifestRef returns host and key of a manifest ref.
func SplitManifestRef(ref string) (host, key string, ok bool) {
	rest, ok := strings.CutPrefix(ref, Prefix)
	if !ok {
		return "", "", false
	}
	f := strings.Split(rest, "/")
	if len(f) != 3 || f[2] != ManifestName || f[0] == "" || f[1] == "" {
		return "", "", false
	}
	return f[0], f[1], true
}

func refSafe(c rune) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-'
}

func safeComponent(s string, max int) string {
	b := []rune(s)
	for i, c := range b {
		if !refSafe(c) {
			b[i] = '_'
		}
	}
	out := strings.TrimLeft(string(b), ".-")
	for strings.Contains(out, "..") {
		out = strings.ReplaceAll(out, "..", "_.")
	}
	out = strings.TrimSuffix(out, ".lock")
	if len(out) > max {
		out = out[:max]
	}
	out = strings.TrimRight(out, ".")
	if out == "" {
		out = "_"
	}
	return out
}
