package replicate

// Reading a fleet remote (docs/cairn-formats.md, "Fleet replication"): which
// hosts and workspaces it holds, from its refs and their manifests.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/cairn-dev/cairn/snapshot"
)

// ReadAs is who git is when a command reads a remote: the user's home
// (their ssh keys and config, ~/.gitconfig credential helpers and url
// rewrites) and the few variables of their environment that reaching a
// server needs. Nothing else of the caller's environment reaches git.
type ReadAs struct {
	Home string
	Env  []string
}

// passedEnv are the variables ReadAsUser hands on: an ssh agent, the
// user's ssh command, and proxies.
var passedEnv = []string{"SSH_AUTH_SOCK", "GIT_SSH_COMMAND", "GIT_SSH", "GIT_SSH_VARIANT",
	"http_proxy", "https_proxy", "no_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY"}

// ReadAsUser is the calling user: $HOME, their XDG config folder, and the
// variables of passedEnv that are set.
func ReadAsUser() ReadAs {
	home, _ := os.UserHomeDir()
	var env []string
	if home != "" {
		// The runner sets XDG_CONFIG_HOME to HOME; git's second config file
		// is ~/.config/git/config.
		xdg := os.Getenv("XDG_CONFIG_HOME")
		if xdg == "" {
			xdg = filepath.Join(home, ".config")
		}
		env = append(env, "XDG_CONFIG_HOME="+xdg)
	}
	for _, k := range passedEnv {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return ReadAs{Home: home, Env: env}
}

// FleetWorkspace is one workspace found on a remote.
type FleetWorkspace struct {
	Host string `json:"host"`
	Key  string `json:"key"`
	// Refs counts the workspace's refs on the remote, its manifest included.
	Refs     int       `json:"refs"`
	Manifest *Manifest `json:"manifest,omitempty"`
	// Note says what is wrong with the manifest: missing, unreadable, odd.
	Note string `json:"note,omitempty"`
}

// Name is host/key.
func (w FleetWorkspace) Name() string { return w.Host + "/" + w.Key }

// NormalizeRemote makes a local path absolute (git runs elsewhere) and
// keeps URLs and scp-like addresses (host:path) as they are.
func NormalizeRemote(remote string) (string, error) {
	if remote == "" {
		return "", errors.New("no remote given")
	}
	if strings.Contains(remote, "://") {
		return remote, nil
	}
	if c := strings.IndexByte(remote, ':'); c > 0 {
		if s := strings.IndexByte(remote, '/'); s < 0 || c < s {
			return remote, nil // [user@]host:path
		}
	}
	return filepath.Abs(remote)
}

// remoteErr is a failed git call on remote as an Error: git's own words,
// without the credentials of the URL.
func remoteErr(op, remote string, err error) error {
	msg := err.Error()
	var ge *snapshot.GitError
	if errors.As(err, &ge) {
		msg = gitWords(ge)
	}
	return &Error{Op: op, Remote: Redact(remote), Msg: RedactIn(msg, remote)}
}

// gitWords is what git said on one line: its fatal and error lines when
// there are some (the hints after them go), else all of it.
func gitWords(ge *snapshot.GitError) string {
	var all, fatal []string
	for _, l := range strings.Split(ge.Stderr, "\n") {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		all = append(all, l)
		for _, p := range []string{"fatal: ", "error: "} {
			if m, ok := strings.CutPrefix(l, p); ok {
				fatal = append(fatal, m)
			}
		}
	}
	switch {
	case len(fatal) > 0:
		return strings.Join(fatal, "; ")
	case len(all) > 0:
		return strings.Join(all, "; ")
	}
	return fmt.Sprintf("git exited %d (%v)", ge.ExitCode, ge.Err)
}

// scratch is a private bare repository the manifests are fetched into,
// removed by close.
type scratch struct {
	git    *snapshot.Git
	remote string
	tmp    string
	// acc is how git reaches the remote: the URL without credentials, and
	// the helper that hands them over (creds.go).
	acc access
	far *snapshot.Git // git for the calls that reach the remote
}

func newScratch(ctx context.Context, remote string, as ReadAs) (*scratch, error) {
	path, ver, err := snapshot.FindGit(ctx)
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "cairn-fleet-")
	if err != nil {
		return nil, err
	}
	home := as.Home
	if home == "" {
		home = tmp
	}
	g := snapshot.NewGit(path, ver, filepath.Join(tmp, "manifests.git"), home)
	g.Extra = as.Env
	if _, err := g.Run(ctx, nil, "init", "--quiet", "--bare"); err != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("create a scratch repository in %s: %w", tmp, err)
	}
	far, acc, err := gitFor(g, remote)
	if err != nil {
		os.RemoveAll(tmp)
		return nil, &Error{Op: "read", Remote: Redact(remote), Msg: err.Error()}
	}
	return &scratch{git: g, remote: remote, tmp: tmp, acc: acc, far: far}, nil
}

func (s *scratch) close() { os.RemoveAll(s.tmp) }

// lsRemote lists the remote's refs under prefix: name → sha.
func (s *scratch) lsRemote(ctx context.Context, prefix string) (map[string]string, error) {
	out, err := s.far.Run(ctx, nil, append(slices.Clone(s.acc.config), "ls-remote", "--end-of-options", s.acc.url, prefix+"*")...)
	if err != nil {
		return nil, remoteErr("read", s.remote, err)
	}
	refs := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		sha, name, ok := strings.Cut(line, "\t")
		if ok && strings.HasPrefix(name, prefix) {
			refs[name] = sha
		}
	}
	return refs, nil
}

// fetchBatch bounds the refspecs of one fetch: a command line stays short.
const fetchBatch = 200

// fetch fetches each remote ref into refs/m/<i>, i its index in refs; a
// ref that cannot be fetched has its error in errs.
func (s *scratch) fetch(ctx context.Context, refs []string) (errs map[int]error) {
	errs = map[int]error{}
	run := func(idx []int) error {
		args := append(slices.Clone(s.acc.config), "fetch", "--quiet", "--no-tags", "--no-recurse-submodules", "--end-of-options", s.acc.url)
		for _, i := range idx {
			args = append(args, "+"+refs[i]+":refs/m/"+strconv.Itoa(i))
		}
		_, err := s.far.Run(ctx, nil, args...)
		return err
	}
	for start := 0; start < len(refs); start += fetchBatch {
		var idx []int
		for i := start; i < min(start+fetchBatch, len(refs)); i++ {
			idx = append(idx, i)
		}
		if run(idx) == nil {
			continue
		}
		// One ref went away since ls-remote (or is broken): the others
		// still come, one by one.
		for _, i := range idx {
			if err := run([]int{i}); err != nil {
				errs[i] = remoteErr("fetch "+refs[i]+" from", s.remote, err)
			}
		}
	}
	return errs
}

// maxManifest bounds one manifest.json read.
const maxManifest = 1 << 20

// readManifests reads refs/m/<i>:manifest.json for each i in idx with one
// cat-file; a missing file has no entry.
func (s *scratch) readManifests(ctx context.Context, idx []int) (map[int][]byte, error) {
	var in bytes.Buffer
	for _, i := range idx {
		fmt.Fprintf(&in, "refs/m/%d:%s\n", i, ManifestFile)
	}
	var out bytes.Buffer
	if err := s.git.RunTo(ctx, &out, &in, "cat-file", "--batch"); err != nil {
		return nil, fmt.Errorf("read manifests: %w", err)
	}
	got := map[int][]byte{}
	r := bufio.NewReader(&out)
	for _, i := range idx {
		header, err := r.ReadString('\n')
		if err != nil {
			return nil, fmt.Errorf("read manifests: short output of git cat-file")
		}
		f := strings.Fields(header)
		if len(f) != 3 || f[1] != "blob" {
			continue // "<name> missing", or not a file
		}
		size, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil || size < 0 {
			return nil, fmt.Errorf("read manifests: bad cat-file header %q", strings.TrimSpace(header))
		}
		data := make([]byte, size+1) // and the newline after the object
		if _, err := io.ReadFull(r, data); err != nil {
			return nil, fmt.Errorf("read manifests: %w", err)
		}
		if size <= maxManifest {
			got[i] = data[:size]
		}
	}
	return got, nil
}

// ListFleet lists the workspaces on remote (of host only, when host is not
// empty) with their manifests, sorted by host and path. Workspaces whose
// manifest is missing or unreadable are listed with a note.
func ListFleet(ctx context.Context, remote, host string, as ReadAs) ([]FleetWorkspace, error) {
	if host != "" {
		if _, err := Host(host); err != nil {
			return nil, err
		}
	}
	s, err := newScratch(ctx, remote, as)
	if err != nil {
		return nil, err
	}
	defer s.close()
	prefix := Prefix
	if host != "" {
		prefix = Prefix + host + "/"
	}
	refs, err := s.lsRemote(ctx, prefix)
	if err != nil {
		return nil, err
	}
	byName := map[string]*FleetWorkspace{}
	var manifestRefs []string
	var owners []*FleetWorkspace
	for ref := range refs {
		f := strings.SplitN(strings.TrimPrefix(ref, Prefix), "/", 3)
		if len(f) != 3 || f[0] == "" || f[1] == "" {
			continue
		}
		w := byName[f[0]+"/"+f[1]]
		if w == nil {
			w = &FleetWorkspace{Host: f[0], Key: f[1]}
			byName[f[0]+"/"+f[1]] = w
		}
		w.Refs++
		if f[2] == ManifestName {
			manifestRefs = append(manifestRefs, ref)
			owners = append(owners, w)
		}
	}
	errs := s.fetch(ctx, manifestRefs)
	var fetched []int
	for i := range manifestRefs {
		if errs[i] == nil {
			fetched = append(fetched, i)
		}
	}
	var data map[int][]byte
	if len(fetched) > 0 {
		if data, err = s.readManifests(ctx, fetched); err != nil {
			return nil, err
		}
	}
	for i, w := range owners {
		switch {
		case errs[i] != nil:
			w.Note = "manifest not fetched: " + errs[i].Error()
		case data[i] == nil:
			w.Note = "manifest commit has no readable " + ManifestFile
		default:
			w.Manifest, w.Note = parseManifest(data[i], w.Host, w.Key)
		}
	}
	out := make([]FleetWorkspace, 0, len(byName))
	for _, w := range byName {
		if w.Manifest == nil && w.Note == "" {
			w.Note = "no manifest"
		}
		out = append(out, *w)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Host != out[j].Host {
			return out[i].Host < out[j].Host
		}
		return out[i].sortPath() < out[j].sortPath()
	})
	return out, nil
}

func (w FleetWorkspace) sortPath() string {
	if w.Manifest != nil && w.Manifest.Workspace != "" {
		return w.Manifest.Workspace
	}
	return "\xff" + w.Key // after those with a path
}

// parseManifest reads a manifest found at host/key; the note says what is
// odd about it.
func parseManifest(b []byte, host, key string) (*Manifest, string) {
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, "manifest unreadable: " + err.Error()
	}
	var notes []string
	if m.Version > ManifestVersion {
		notes = append(notes, fmt.Sprintf("manifest version %d (this cairn reads %d)", m.Version, ManifestVersion))
	}
	if m.Host != host || m.Key != key {
		notes = append(notes, fmt.Sprintf("manifest names %s/%s", m.Host, m.Key))
	}
	return &m, strings.Join(notes, "; ")
}
