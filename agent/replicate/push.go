package replicate

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/platform"
	"github.com/cairn-dev/cairn/snapshot"
)

// The push side (docs/cairn-formats.md, "Fleet replication"): a Pusher
// compares a store's refs with what it last pushed and sends the difference
// in `git push --atomic` calls with explicit refspecs. Run branches only
// fast-forward (no '+'); deletions and the manifest, rewritten at each push,
// are guarded by --force-with-lease with the value last pushed. Nothing is
// ever forced over a ref another writer moved: such a ref is left out and
// reported.

// ManifestLocalRef keeps the last manifest commit in the store. It is outside
// refs/heads/ and refs/cairn/, so it is never replicated nor listed.
const ManifestLocalRef = "refs/cairn-replicate/manifest"

// StateFile is the name of the last pushed state in the store's cairn/ folder.
const StateFile = "replicate.json"

// StateVersion is the version of State this code writes.
const StateVersion = 1

// Timeouts of the remote calls: a push may carry a whole store.
var (
	pushTimeout     = 30 * time.Minute
	lsRemoteTimeout = 2 * time.Minute
)

// maxArgBytes bounds the refspecs of one git push (the kernel caps argv).
const maxArgBytes = 512 << 10

// State is what a Pusher last pushed, kept in the store so that a restarted
// daemon pushes only what changed. It holds no secret: the remote's URL is
// kept without its credentials, and recognised by a hash of the whole URL.
type State struct {
	Version  int    `json:"version"`
	Remote   string `json:"remote"`   // without credentials
	RemoteID string `json:"remoteId"` // hex SHA-256 of the whole URL
	Base     string `json:"base"`
	// Refs are the remote refs as last pushed (or seen on the remote and
	// known to the store): remote ref → sha.
	Refs map[string]string `json:"refs"`
	// Manifest is the manifest commit on the remote; ManifestSum the
	// SHA-256 of its content without the push time.
	Manifest    string    `json:"manifest,omitempty"`
	ManifestSum string    `json:"manifestSum,omitempty"`
	Newest      *Newest   `json:"newest,omitempty"` // the newest checkpoint the last push carried
	Pushed      time.Time `json:"pushed,omitzero"`
}

// Pusher pushes one workspace's refs to its place on a remote. It is not
// safe for concurrent use: one goroutine per workspace owns it.
type Pusher struct {
	// Store runs git on the store with the store's own HOME: listing refs
	// and writing the manifest commit.
	Store *snapshot.Git
	// Remote is any URL git accepts; Host and Key place the workspace on it.
	Remote    string
	Host, Key string
	// Home is HOME for the calls that reach the remote: the push user's
	// home, so their ~/.gitconfig credential helpers and url rewrites apply
	// (ssh finds keys by the account's own home). SSHCommand, if set, is
	// GIT_SSH_COMMAND.
	Home       string
	SSHCommand string
	// StatePath is where State is kept (default: <store>/cairn/replicate.json).
	StatePath string

	state     *State
	conflicts map[string]Conflict // remote ref → why it is left out
}

// Conflict is a ref left out of pushes: another writer moved it on the
// remote, or the local history no longer descends from the remote's. It is
// tried again when the local ref moves.
type Conflict struct {
	Ref    string `json:"ref"`              // the remote ref
	Remote string `json:"remote,omitempty"` // its sha on the remote ("" : absent)
	Local  string `json:"local,omitempty"`  // the local sha it was refused for ("": a deletion)
	Reason string `json:"reason"`
}

func (c Conflict) String() string {
	return fmt.Sprintf("%s: %s (remote %s, local %s)", c.Ref, c.Reason, short(c.Remote), short(c.Local))
}

// Result is what one Sync did.
type Result struct {
	Updated   int        // refs created or moved
	Deleted   int        // refs deleted
	Refs      int        // the workspace's refs on the remote after it
	Pushes    int        // git push calls that succeeded
	Nothing   bool       // the remote was up to date: no push
	Manifest  string     // the manifest commit pushed ("" : none)
	Conflicts []Conflict // refs left out: another writer moved them
	Retried   bool       // a rejection was explained by a look at the remote, and pushed again
}

// Error is a push or ls-remote that failed: the remote (without
// credentials), and git's own words.
type Error struct {
	Op       string // push, ls-remote
	Remote   string
	Msg      string
	Rejected []string // refs the remote refused ("[remote rejected]" and the like)
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s %s: %s", e.Op, e.Remote, e.Msg)
}

// Base is the prefix of this workspace's refs on the remote.
func (p *Pusher) Base() string { return Base(p.Host, p.Key) }

// RemoteName is the remote without credentials, for messages and status.
func (p *Pusher) RemoteName() string { return Redact(p.Remote) }

// LastState is the state as last pushed (nil before the first Sync).
func (p *Pusher) LastState() *State {
	if p.state == nil {
		if st, ok := p.readState(); ok {
			p.state = st
		}
	}
	if p.state == nil {
		return nil
	}
	c := *p.state
	c.Refs = maps.Clone(p.state.Refs)
	return &c
}

// Conflicts are the refs left out of pushes now.
func (p *Pusher) Conflicts() []Conflict {
	out := slices.Collect(maps.Values(p.conflicts))
	slices.SortFunc(out, func(a, b Conflict) int { return strings.Compare(a.Ref, b.Ref) })
	return out
}

func (p *Pusher) statePath() string {
	if p.StatePath != "" {
		return p.StatePath
	}
	return filepath.Join(p.Store.Dir, "cairn", StateFile)
}

func (p *Pusher) remoteID() string {
	sum := sha256.Sum256([]byte(p.Remote))
	return hex.EncodeToString(sum[:])
}

// remoteGit runs the calls that reach the remote: the push user's HOME, the
// configured ssh command, and the daemon's ssh agent if it has one.
func (p *Pusher) remoteGit() *snapshot.Git {
	g := *p.Store
	g.WorkTree, g.Index = "", ""
	if p.Home != "" {
		g.Home = p.Home
	}
	g.Extra = slices.Clone(p.Store.Extra)
	if p.SSHCommand != "" {
		g.Extra = append(g.Extra, "GIT_SSH_COMMAND="+p.SSHCommand)
	}
	if sock := os.Getenv("SSH_AUTH_SOCK"); sock != "" {
		g.Extra = append(g.Extra, "SSH_AUTH_SOCK="+sock)
	}
	return &g
}

func (p *Pusher) readState() (*State, bool) {
	b, err := platform.ReadFileCapped(p.statePath(), 16<<20) // in the store: never followed, bounded
	if err != nil {
		return nil, false
	}
	var st State
	if json.Unmarshal(b, &st) != nil || st.Version != StateVersion || st.RemoteID != p.remoteID() || st.Base != p.Base() {
		return nil, false // another remote or place: what was pushed there says nothing here
	}
	if st.Refs == nil {
		st.Refs = map[string]string{}
	}
	return &st, true
}

func (p *Pusher) saveState() error {
	b, err := json.MarshalIndent(p.state, "", " ")
	if err != nil {
		return err
	}
	return platform.WriteFileAtomic(p.statePath(), append(b, '\n'), 0o600)
}

// Sync pushes what changed since the last push: new and moved refs, refs
// deleted locally (retention), and m as the workspace's manifest (Refs and
// Pushed filled in here). A rejection is explained by a look at the remote
// (ls-remote) before the one retry; a ref another writer moved is left out
// and reported in Result.Conflicts, never overwritten.
func (p *Pusher) Sync(ctx context.Context, m Manifest) (Result, error) {
	var res Result
	if p.conflicts == nil {
		p.conflicts = map[string]Conflict{}
	}
	if p.state != nil {
		if _, err := os.Stat(p.statePath()); errors.Is(err, fs.ErrNotExist) {
			// The store was recreated (or its state removed): what it
			// pushed must be learned from the remote again, never deleted
			// there for being unknown here.
			p.state = nil
		}
	}
	if p.state == nil {
		if st, ok := p.readState(); ok {
			p.state = st
		} else if err := p.resync(ctx, nil); err != nil {
			return res, err
		}
	}
	for attempt := 0; ; attempt++ {
		rejected, err := p.pushOnce(ctx, m, &res)
		if err != nil || len(rejected) == 0 {
			res.Conflicts = p.Conflicts()
			return res, err
		}
		if attempt > 0 {
			res.Conflicts = p.Conflicts()
			return res, &Error{Op: "push", Remote: p.RemoteName(), Rejected: rejected,
				Msg: "refused again after a look at the remote: " + strings.Join(rejected, ", ")}
		}
		// Another writer, or a state older than the remote (a push killed
		// after it landed): see what the remote holds before trying again.
		if err := p.resync(ctx, rejected); err != nil {
			return res, err
		}
		res.Retried = true
	}
}

// Learn rebuilds the state from the remote (see resync): what Sync does
// first when the state file is missing.
func (p *Pusher) Learn(ctx context.Context) error {
	if p.conflicts == nil {
		p.conflicts = map[string]Conflict{}
	}
	return p.resync(ctx, nil)
}

// localRefs are the store's replicated refs as remote ref → sha.
func (p *Pusher) localRefs(ctx context.Context) (map[string]string, error) {
	out, err := p.Store.Run(ctx, nil, "for-each-ref", "--format=%(objectname) %(refname)", "refs/heads/", "refs/cairn/")
	if err != nil {
		return nil, fmt.Errorf("list the store's refs: %w", err)
	}
	refs := map[string]string{}
	for _, l := range strings.Split(string(out), "\n") {
		sha, name, ok := strings.Cut(l, " ")
		if !ok {
			continue
		}
		if r, ok := RemoteRef(p.Host, p.Key, name); ok {
			refs[r] = strings.ToLower(sha)
		}
	}
	return refs, nil
}

// refspec is one ref of a push: sha "" deletes it; lease guards it.
type refspec struct {
	ref, sha string
	lease    *string
}

func (r refspec) arg() string { return r.sha + ":" + r.ref }

func (r refspec) size() int { return len(r.ref)*2 + len(r.sha) + 64 }

// pushOnce pushes the difference once. It returns the refs rejected for
// another writer's move (after which the state is unchanged for them).
func (p *Pusher) pushOnce(ctx context.Context, m Manifest, res *Result) ([]string, error) {
	local, err := p.localRefs(ctx)
	if err != nil {
		return nil, err
	}
	var specs []refspec
	for _, ref := range slices.Sorted(maps.Keys(local)) {
		sha := local[ref]
		if p.state.Refs[ref] == sha {
			delete(p.conflicts, ref)
			continue
		}
		if c, ok := p.conflicts[ref]; ok && c.Local == sha {
			continue // refused for this very commit: wait until it moves
		}
		specs = append(specs, refspec{ref: ref, sha: sha})
	}
	for _, ref := range slices.Sorted(maps.Keys(p.state.Refs)) {
		if _, ok := local[ref]; ok {
			continue
		}
		if c, ok := p.conflicts[ref]; ok && c.Local == "" {
			continue
		}
		old := p.state.Refs[ref]
		specs = append(specs, refspec{ref: ref, lease: &old})
	}
	// What the remote will hold: refs pushed and kept, minus deletions.
	after := len(p.state.Refs)
	for _, s := range specs {
		_, had := p.state.Refs[s.ref]
		switch {
		case s.sha == "":
			after--
		case !had:
			after++
		}
	}
	m.Host, m.Key, m.Version, m.Refs = p.Host, p.Key, ManifestVersion, after
	sum := manifestSum(m)
	manifestRef := ManifestRef(p.Host, p.Key)
	if len(specs) == 0 && sum == p.state.ManifestSum && p.state.Manifest != "" {
		res.Nothing = true
		res.Refs = after
		return nil, nil
	}
	if _, ok := p.conflicts[manifestRef]; !ok {
		m.Pushed = time.Now().UTC()
		commit, err := p.writeManifest(ctx, m)
		if err != nil {
			return nil, err
		}
		old := p.state.Manifest
		specs = append(specs, refspec{ref: manifestRef, sha: commit, lease: &old})
	}
	if len(specs) == 0 {
		res.Nothing, res.Refs = true, after
		return nil, nil
	}
	// Batches bounded in argv bytes; the manifest rides in the last one, so
	// it describes refs that have arrived.
	for len(specs) > 0 {
		n, size := 0, 0
		for n < len(specs) && (n == 0 || size+specs[n].size() <= maxArgBytes) {
			size += specs[n].size()
			n++
		}
		batch := specs[:n]
		specs = specs[n:]
		rejected, err := p.pushBatch(ctx, batch, res)
		if err != nil || len(rejected) > 0 {
			return rejected, err
		}
	}
	if m.Newest != nil {
		nw := *m.Newest
		p.state.Newest = &nw
	}
	p.state.ManifestSum, p.state.Pushed = sum, time.Now().UTC()
	res.Refs = after
	return nil, p.saveState()
}

// pushBatch runs one `git push --atomic` and records what it moved.
func (p *Pusher) pushBatch(ctx context.Context, batch []refspec, res *Result) ([]string, error) {
	g, acc, err := gitFor(p.remoteGit(), p.Remote)
	if err == nil {
		err = CheckLocalRemote(p.Remote, g.Home)
	}
	if err != nil {
		return nil, &Error{Op: "push", Remote: p.RemoteName(), Msg: err.Error()}
	}
	args := append(slices.Clone(acc.config), "-c", "push.gpgSign=false", "-c", "push.recurseSubmodules=no", "-c", "push.followTags=false",
		"push", "--atomic", "--porcelain", "--no-verify")
	for _, s := range batch {
		if s.lease != nil {
			args = append(args, "--force-with-lease="+s.ref+":"+*s.lease)
		}
	}
	args = append(args, "--", acc.url)
	for _, s := range batch {
		args = append(args, s.arg())
	}
	pctx, cancel := context.WithTimeout(ctx, pushTimeout)
	defer cancel()
	out, err := g.Run(pctx, nil, args...)
	lines := parsePorcelain(out)
	if err == nil {
		res.Pushes++
		for _, s := range batch {
			p.record(s, res)
		}
		return nil, p.saveState()
	}
	// The remote refused named refs: another writer's move (the caller
	// looks at the remote), or a refusal of its own (an error).
	var moved, refused []string
	for _, l := range lines {
		if l.flag != '!' || l.reason == "atomic push failed" {
			continue
		}
		switch l.reason {
		case "non-fast-forward", "fetch first", "stale info", "already exists", "needs force":
			moved = append(moved, l.ref)
		default:
			refused = append(refused, l.ref+": "+strings.TrimSpace(l.summary+" "+l.reason))
		}
	}
	if len(refused) == 0 && len(moved) > 0 {
		return moved, nil
	}
	e := &Error{Op: "push", Remote: p.RemoteName(), Msg: p.gitMessage(err)}
	if len(refused) > 0 {
		e.Rejected = refused
		e.Msg = "the remote refused " + strings.Join(refused, "; ") + " (" + e.Msg + ")"
	}
	return nil, e
}

// record notes a ref pushed.
func (p *Pusher) record(s refspec, res *Result) {
	delete(p.conflicts, s.ref)
	switch {
	case s.ref == ManifestRef(p.Host, p.Key):
		p.state.Manifest = s.sha
		res.Manifest = s.sha
	case s.sha == "":
		delete(p.state.Refs, s.ref)
		res.Deleted++
	default:
		p.state.Refs[s.ref] = s.sha
		res.Updated++
	}
}

// resync rebuilds the state from the remote (ls-remote of the workspace's
// prefix): a ref whose commit the store holds is ours, pushed earlier; one
// it does not hold was written by another writer and is never deleted nor
// overwritten. rejected are refs a push was just refused for: if the remote
// holds them at a commit the local ref does not descend from, they are left
// out (conflicts) until the local ref moves.
func (p *Pusher) resync(ctx context.Context, rejected []string) error {
	remote, err := p.LsRemote(ctx)
	if err != nil {
		return err
	}
	local, err := p.localRefs(ctx)
	if err != nil {
		return err
	}
	st := &State{Version: StateVersion, Remote: p.RemoteName(), RemoteID: p.remoteID(), Base: p.Base(), Refs: map[string]string{}}
	if p.state != nil {
		st.Newest, st.ManifestSum = p.state.Newest, p.state.ManifestSum
	}
	manifestRef := ManifestRef(p.Host, p.Key)
	known := map[string]bool{}
	have := func(sha string) bool {
		if v, ok := known[sha]; ok {
			return v
		}
		_, err := p.Store.Run(ctx, nil, "cat-file", "-e", sha+"^{commit}")
		known[sha] = err == nil
		return err == nil
	}
	for _, l := range local {
		known[l] = true
	}
	for ref, sha := range remote {
		if ref == manifestRef {
			if have(sha) {
				st.Manifest = sha
			} else {
				p.conflicts[ref] = Conflict{Ref: ref, Remote: sha, Reason: "the manifest was written by another writer (the same host name on another machine?)"}
			}
			continue
		}
		if have(sha) {
			st.Refs[ref] = sha
		} else if l, ok := local[ref]; ok {
			p.conflicts[ref] = Conflict{Ref: ref, Remote: sha, Local: l, Reason: "another writer moved it on the remote"}
		}
	}
	for _, ref := range rejected {
		r, onRemote := remote[ref]
		l, isLocal := local[ref]
		switch {
		case ref == manifestRef || !onRemote || !isLocal || r == l || !have(r):
			// Absent now, pushed already, or another writer's (above).
		case !p.ancestor(ctx, r, l):
			p.conflicts[ref] = Conflict{Ref: ref, Remote: r, Local: l, Reason: "the local history no longer descends from the remote's; not forced"}
		}
	}
	p.state = st
	return p.saveState()
}

// ancestor reports whether commit a is an ancestor of b in the store.
func (p *Pusher) ancestor(ctx context.Context, a, b string) bool {
	_, err := p.Store.Run(ctx, nil, "merge-base", "--is-ancestor", a, b)
	return err == nil
}

// LsRemote lists the workspace's refs on the remote: ref → sha.
func (p *Pusher) LsRemote(ctx context.Context) (map[string]string, error) {
	g, acc, err := gitFor(p.remoteGit(), p.Remote)
	if err == nil {
		err = CheckLocalRemote(p.Remote, g.Home)
	}
	if err != nil {
		return nil, &Error{Op: "ls-remote", Remote: p.RemoteName(), Msg: err.Error()}
	}
	lctx, cancel := context.WithTimeout(ctx, lsRemoteTimeout)
	defer cancel()
	out, err := g.Run(lctx, nil, append(slices.Clone(acc.config), "ls-remote", "--", acc.url, p.Base()+"*")...)
	if err != nil {
		return nil, &Error{Op: "ls-remote", Remote: p.RemoteName(), Msg: p.gitMessage(err)}
	}
	refs := map[string]string{}
	for _, l := range strings.Split(string(out), "\n") {
		sha, ref, ok := strings.Cut(l, "\t")
		if ok && strings.HasPrefix(ref, p.Base()) {
			refs[ref] = strings.ToLower(sha)
		}
	}
	return refs, nil
}

// writeManifest writes m as a parentless commit holding manifest.json and
// points ManifestLocalRef at it.
func (p *Pusher) writeManifest(ctx context.Context, m Manifest) (string, error) {
	body, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return "", err
	}
	blob, err := p.Store.Run(ctx, bytes.NewReader(append(body, '\n')), "hash-object", "-w", "--stdin")
	if err != nil {
		return "", fmt.Errorf("write the manifest: %w", err)
	}
	tree, err := p.Store.Run(ctx, strings.NewReader("100644 blob "+strings.TrimSpace(string(blob))+"\t"+ManifestFile+"\n"), "mktree")
	if err != nil {
		return "", fmt.Errorf("write the manifest: %w", err)
	}
	date := m.Pushed.Format(time.RFC3339)
	g := *p.Store
	g.Extra = append(slices.Clone(p.Store.Extra), "GIT_AUTHOR_NAME=cairn", "GIT_AUTHOR_EMAIL=cairn@localhost",
		"GIT_COMMITTER_NAME=cairn", "GIT_COMMITTER_EMAIL=cairn@localhost", "GIT_AUTHOR_DATE="+date, "GIT_COMMITTER_DATE="+date)
	commit, err := g.Run(ctx, nil, "commit-tree", strings.TrimSpace(string(tree)), "-m", "cairn manifest "+p.Host+"/"+p.Key)
	if err != nil {
		return "", fmt.Errorf("write the manifest: %w", err)
	}
	sha := strings.TrimSpace(string(commit))
	if _, err := p.Store.Run(ctx, nil, "update-ref", "-m", "cairn: replicate manifest", ManifestLocalRef, sha); err != nil {
		return "", fmt.Errorf("write the manifest: %w", err)
	}
	return sha, nil
}

// manifestSum is the SHA-256 of m without its push time: a manifest that
// would say the same is not pushed again for nothing.
func manifestSum(m Manifest) string {
	m.Pushed = time.Time{}
	b, _ := json.Marshal(m)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// porcelainLine is one ref of `git push --porcelain`.
type porcelainLine struct {
	flag            byte
	ref             string
	summary, reason string
}

func parsePorcelain(out []byte) []porcelainLine {
	var lines []porcelainLine
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.SplitN(l, "\t", 3)
		if len(f) != 3 || len(f[0]) != 1 {
			continue
		}
		pl := porcelainLine{flag: f[0][0], summary: f[2]}
		if i := strings.LastIndexByte(f[1], ':'); i >= 0 {
			pl.ref = f[1][i+1:]
		}
		if i := strings.Index(pl.summary, " ("); i >= 0 && strings.HasSuffix(pl.summary, ")") {
			pl.summary, pl.reason = pl.summary[:i], pl.summary[i+2:len(pl.summary)-1]
		}
		lines = append(lines, pl)
	}
	return lines
}

// gitMessage is what git said, without the refspecs of the command line
// nor any credential of the URL.
func (p *Pusher) gitMessage(err error) string {
	var ge *snapshot.GitError
	if !errors.As(err, &ge) {
		return RedactIn(err.Error(), p.Remote)
	}
	var keep []string
	for _, l := range strings.Split(ge.Stderr, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "To ") || strings.HasPrefix(l, "hint:") {
			continue
		}
		keep = append(keep, l)
	}
	msg := strings.Join(keep, "; ")
	if msg == "" {
		msg = ge.Err.Error()
	}
	if errors.Is(ge.Err, context.DeadlineExceeded) {
		msg = "timed out: " + msg
	}
	return RedactIn(msg, p.Remote)
}

// Redact is a remote URL without its user information (user, password,
// token): what cairn shows of a remote.
func Redact(remote string) string {
	u, err := url.Parse(remote)
	if err != nil || u.Scheme == "" || u.User == nil {
		return remote
	}
	u.User = nil
	return u.String()
}

// RedactIn removes remote's credentials from a message git printed.
func RedactIn(msg, remote string) string {
	u, err := url.Parse(remote)
	if err != nil || u.User == nil {
		return msg
	}
	msg = strings.ReplaceAll(msg, remote, Redact(remote))
	if pw, ok := u.User.Password(); ok && pw != "" {
		msg = strings.ReplaceAll(msg, pw, "***")
		if esc := url.QueryEscape(pw); esc != pw {
			msg = strings.ReplaceAll(msg, esc, "***")
		}
	}
	if name := u.User.Username(); name != "" {
		msg = strings.ReplaceAll(msg, name+"@", "")
	}
	return msg
}

func short(sha string) string {
	if sha == "" {
		return "none"
	}
	return sha[:min(len(sha), 12)]
}
