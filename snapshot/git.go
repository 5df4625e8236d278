package snapshot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/rs/zerolog"

	"github.com/cairn-dev/cairn/platform"
)

// MinGitVersion is the oldest git cairn runs with: 2.28 brought `init --initial-branch`.
var MinGitVersion = Version{2, 28, 0}

// ErrGitNotFound means no git executable is on PATH.
var ErrGitNotFound = errors.New("git not found; checkpoints disabled")

// ErrGitTooOld means the git on PATH is older than MinGitVersion.
var ErrGitTooOld = errors.New("git too old; checkpoints disabled")

// Version is a git release number.
type Version [3]int

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v[0], v[1], v[2]) }

// AtLeast reports whether v is o or newer.
func (v Version) AtLeast(o Version) bool {
	for i := range v {
		if v[i] != o[i] {
			return v[i] > o[i]
		}
	}
	return true
}

var versionRE = regexp.MustCompile(`git version (\d+)\.(\d+)(?:\.(\d+))?`)

// ParseVersion reads the output of `git version`.
func ParseVersion(out string) (Version, error) {
	m := versionRE.FindStringSubmatch(out)
	if m == nil {
		return Version{}, fmt.Errorf("cannot parse git version from %q", strings.TrimSpace(out))
	}
	var v Version
	for i := 0; i < 3; i++ {
		v[i], _ = strconv.Atoi(m[i+1])
	}
	return v, nil
}

var gitProbe struct {
	once    sync.Once
	path    string
	version Version
	err     error
}

// FindGit locates git on PATH once per process and checks its version.
func FindGit(ctx context.Context) (path string, v Version, err error) {
	gitProbe.once.Do(func() {
		p, err := exec.LookPath("git")
		if err != nil {
			gitProbe.err = ErrGitNotFound
			return
		}
		cmd := exec.CommandContext(ctx, p, "version")
		cmd.Env = []string{"LC_ALL=C", "PATH=" + filepath.Dir(p), "GIT_CONFIG_NOSYSTEM=1", "HOME=" + os.TempDir()}
		out, err := cmd.Output()
		if err != nil {
			gitProbe.err = fmt.Errorf("run %s version: %w", p, err)
			return
		}
		v, err := ParseVersion(string(out))
		if err != nil {
			gitProbe.err = err
			return
		}
		if !v.AtLeast(MinGitVersion) {
			gitProbe.err = fmt.Errorf("%w: git %s at %s, cairn needs git %s or newer", ErrGitTooOld, v, p, MinGitVersion)
			return
		}
		gitProbe.path, gitProbe.version = p, v
	})
	return gitProbe.path, gitProbe.version, gitProbe.err
}

// GitError is a git command that failed: its arguments, exit code and stderr.
type GitError struct {
	Args     []string
	ExitCode int
	Stderr   string
	Err      error
}

func (e *GitError) Error() string {
	msg := strings.TrimSpace(e.Stderr)
	if msg == "" && e.Err != nil {
		msg = e.Err.Error()
	}
	return fmt.Sprintf("git %s: exit %d: %s", strings.Join(e.Args, " "), e.ExitCode, msg)
}

func (e *GitError) Unwrap() error { return e.Err }

// NewGit is the runner for the repository at dir (GIT_DIR), with home as
// its HOME and XDG_CONFIG_HOME, and no work tree or index: the one way a
// Git is made. A caller that needs a work tree, an index or extra
// variables sets them on it.
func NewGit(path string, v Version, dir, home string) *Git {
	return &Git{Path: path, Version: v, Dir: dir, Home: home}
}

// ObjectsGit is a runner on the store's objects and refs alone: no work
// tree, no index, its HOME the store's folder (which holds its .gitconfig).
func (s *Store) ObjectsGit() *Git { return NewGit(s.git.Path, s.git.Version, s.gitDir, s.home) }

// Git runs git for one store. Every git call cairn makes goes through Run, with
// an environment built from scratch: nothing of the caller's GIT_*, config,
// hooks, pager or credentials reaches git.
type Git struct {
	Path     string // the git executable
	Version  Version
	Dir      string // GIT_DIR
	WorkTree string // GIT_WORK_TREE; empty for commands that need none
	Index    string // GIT_INDEX_FILE: cairn's own index, never the shared one
	Home     string // HOME and XDG_CONFIG_HOME: the folder holding the store's .gitconfig
	// Extra adds variables a call needs (commit dates); never GIT_DIR and the like.
	Extra []string
	// Secret, when set, is what git reads on descriptor SecretFD: a pipe
	// written whole, and closed on cairn's side, before git starts, so a
	// credential helper can hand a remote's password to git without it
	// ever being on a command line or in an environment (README.md,
	// "Security"). Each call has its own pipe; at most maxSecret bytes.
	Secret []byte
	// Background runs git at the lowest CPU and I/O priority (maintenance),
	// so a seal running meanwhile is not slowed by it.
	Background bool
	// held is the store's lock while a Store holds it: each git started
	// meanwhile inherits it (proc.go).
	held *lockHolder
	// ownIndex: Index is a temporary file of one call, which alone writes
	// it, one git at a time (verify's): its lock is that call's (runMapped).
	ownIndex bool
}

// env is the whole environment of a git process.
func (g *Git) env() []string {
	env := []string{
		"PATH=" + filepath.Dir(g.Path) + ":/usr/bin:/bin",
		"LC_ALL=C",
		"LANG=C",
		"GIT_DIR=" + g.Dir,
		"HOME=" + g.Home,
		"XDG_CONFIG_HOME=" + g.Home,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_PAGER=cat",
		"PAGER=cat",
		"GIT_OPTIONAL_LOCKS=0",
		"GIT_AUTO_GC=0",
		// Which cairn started it: a process left working on the store by a
		// cairn that is gone is killed before the next one touches it
		// (killOrphans).
		"CAIRN_OWNER=" + ownerTag,
		// update-index frees every file buffer it read; glibc then trims the heap
		// after each file. These keep the heap, halving system time on a first
		// seal of 100k files (measured: 13.6 s -> 7.2 s).
		"MALLOC_TOP_PAD_=67108864",
		"MALLOC_TRIM_THRESHOLD_=134217728",
		"MALLOC_MMAP_THRESHOLD_=134217728",
	}
	if g.WorkTree != "" {
		env = append(env, "GIT_WORK_TREE="+g.WorkTree)
	}
	if g.Index != "" {
		env = append(env, "GIT_INDEX_FILE="+g.Index)
	}
	return append(env, g.Extra...)
}

// baseArgs are prepended to every command: no hooks, no signing, no fsmonitor,
// and no git-side gc.
var baseArgs = []string{
	"-c", "core.hooksPath=/dev/null",
	"-c", "commit.gpgSign=false",
	"-c", "tag.gpgSign=false",
	"-c", "core.fsmonitor=false",
	"-c", "gc.auto=0",
	"-c", "maintenance.auto=false",
}

// Run runs git with args, feeding stdin (may be nil), and returns stdout.
func (g *Git) Run(ctx context.Context, stdin io.Reader, args ...string) ([]byte, error) {
	var out bytes.Buffer
	err := g.RunTo(ctx, &out, stdin, args...)
	return out.Bytes(), err
}

// RunTo is Run with stdout streamed to w.
func (g *Git) RunTo(ctx context.Context, w io.Writer, stdin io.Reader, args ...string) error {
	_, err := g.run(ctx, w, stdin, args)
	return err
}

// RunWarn is Run that also returns what git printed on stderr when it
// succeeded: some commands report unreadable paths only as warnings.
func (g *Git) RunWarn(ctx context.Context, stdin io.Reader, args ...string) ([]byte, string, error) {
	var out bytes.Buffer
	warn, err := g.run(ctx, &out, stdin, args)
	return out.Bytes(), warn, err
}

func (g *Git) run(ctx context.Context, w io.Writer, stdin io.Reader, args []string) (string, error) {
	full := append(append([]string(nil), baseArgs...), args...)
	cmd := exec.CommandContext(ctx, g.Path, full...)
	cmd.Env = g.env()
	// Paths are relative to the top of the work tree; commands without one
	// run beside the store (GIT_DIR may not exist yet, for init).
	cmd.Dir = g.Home
	if g.WorkTree != "" {
		cmd.Dir = g.WorkTree
	}
	cmd.Stdin = stdin
	cmd.Stdout = w
	var stderr bytes.Buffer
	cmd.Stderr = &limitedWriter{w: &stderr, n: 64 << 10}
	// A cancelled call kills git's whole process group, not git alone.
	cmd.Cancel = func() error {
		_ = killGroup(cmd.Process.Pid)
		return cmd.Process.Kill()
	}
	if g.Secret != nil {
		r, err := secretPipe(g.Secret)
		if err != nil {
			return "", &GitError{Args: args, ExitCode: -1, Err: err}
		}
		defer r.Close()
		cmd.ExtraFiles = append(cmd.ExtraFiles, r) // SecretFD: the first
	}
	lock, started := g.held.hold()
	if lock != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, lock) // the store lock lasts while git does (proc.go)
	}
	err := startChild(cmd)
	started()
	if err == nil {
		if g.Background {
			platform.Deprioritize(cmd.Process.Pid)
		}
		watch := watchFIFO(cmd.Process.Pid)
		err = waitChild(cmd)
		if why := watch.stop(); why != "" {
			err = &fifoBlockedError{why: why, err: err}
		}
	}
	if err != nil {
		code := -1
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return "", &GitError{Args: args, ExitCode: code, Stderr: stderr.String(), Err: err}
	}
	return stderr.String(), nil
}

// SecretFD is the descriptor on which git and what it starts read Git.Secret.
const SecretFD = 3

// maxSecret bounds Git.Secret: it must fit in a pipe's buffer on every
// system, so that writing it never waits for a reader.
const maxSecret = 4096

// secretPipe is the read end of a pipe holding secret, its write end closed.
func secretPipe(secret []byte) (*os.File, error) {
	if len(secret) > maxSecret {
		return nil, fmt.Errorf("a secret for git of %d bytes (at most %d)", len(secret), maxSecret)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("a pipe for git's secret: %w", err)
	}
	_, err = w.Write(secret)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("a pipe for git's secret: %w", err)
	}
	return r, nil
}

// signalOf is the signal that ended the git an error reports, if one did.
func signalOf(err error) (syscall.Signal, bool) {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return 0, false
	}
	ws, ok := ee.Sys().(interface {
		Signaled() bool
		Signal() syscall.Signal
	})
	if !ok || !ws.Signaled() {
		return 0, false
	}
	return ws.Signal(), true
}

// fifoBlockedError is a git the named-pipe watch killed (fifowatch_linux.go):
// the work tree stops it, not a file of the call's, so nothing is retried
// and no path is to blame.
type fifoBlockedError struct {
	why string
	err error
}

func (e *fifoBlockedError) Error() string { return e.why + " (" + e.err.Error() + ")" }
func (e *fifoBlockedError) Unwrap() error { return e.err }

// busRetries is how often runMapped makes again a call a bus error ended.
const busRetries = 5

// runMapped runs a git command that may hash work-tree files and write
// cairn's index, g.Index (update-index, write-tree, ls-files -m, checkout).
//
// git maps a file larger than 32 KiB to hash it, and one truncated
// meanwhile (rewritten in place, as most programs write a file) ends git
// with SIGBUS: when it stages the file, when it checks a racily clean entry
// (ls-files -m), or when it writes the index (racily clean entries are
// hashed again). git removes its lock files on the common signals only, not
// on SIGBUS, so a git ended so leaves cairn/index.lock behind, and every
// later write of the index fails ("File exists") until the next seal.
//
// The index lock such a git left is removed, and the call made again, up
// to busRetries times. The lock is provably a dead writer's: the
// caller holds the store lock (no other process writes g.Index, proc.go),
// makes no other write of g.Index meanwhile, and the git has been reaped.
// A call's own temporary index (ownIndex) needs no store lock: no one else
// writes it. Otherwise, without the store lock, the lock file is left alone
// and the error returned. A git the named-pipe watch killed (SIGKILL: no
// lock removed either) has its lock removed the same way, and is not made
// again: it would block again.
func (g *Git) runMapped(ctx context.Context, stdin []byte, args ...string) ([]byte, string, error) {
	for attempt := 0; ; attempt++ {
		var in io.Reader
		if stdin != nil {
			in = bytes.NewReader(stdin)
		}
		out, warn, err := g.RunWarn(ctx, in, args...)
		blocked := errors.As(err, new(*fifoBlockedError))
		if sig, ok := signalOf(err); !(blocked || ok && sig == syscall.SIGBUS) || !(g.ownIndex || g.storeLocked()) {
			return out, warn, err
		}
		if g.Index != "" {
			if rerr := os.Remove(g.Index + ".lock"); rerr == nil {
				zerologCtx(ctx).Debug().Str("index", g.Index).Bool("pipe", blocked).Msg("removed the index lock of a git a signal ended (a file changed while git read it, or a named pipe stopped it)")
			}
		}
		if blocked || ctx.Err() != nil || attempt == busRetries {
			return out, warn, err
		}
	}
}

// storeLocked reports whether the store lock is held for g's calls.
func (g *Git) storeLocked() bool {
	f, done := g.held.hold()
	done()
	return f != nil
}

// nulBytes is nulJoin's bytes, for a call that may be made again.
func nulBytes(paths []string) []byte {
	var b bytes.Buffer
	for _, p := range paths {
		b.WriteString(p)
		b.WriteByte(0)
	}
	return b.Bytes()
}

// limitedWriter keeps the first n bytes: enough to explain a failure, never
// unbounded memory for a chatty git.
type limitedWriter struct {
	w io.Writer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if l.n > 0 {
		k := min(len(p), l.n)
		l.w.Write(p[:k])
		l.n -= k
	}
	return len(p), nil
}

// splitNul splits -z output into fields, dropping the empty tail.
func splitNul(b []byte) []string {
	if len(b) == 0 {
		return nil
	}
	s := string(b)
	s = strings.TrimSuffix(s, "\x00")
	return strings.Split(s, "\x00")
}

// nulJoin is the stdin of a `-z --stdin` command.
func nulJoin(paths []string) io.Reader {
	var b bytes.Buffer
	for _, p := range paths {
		b.WriteString(p)
		b.WriteByte(0)
	}
	return &b
}

// zerologCtx is the logger the caller put in ctx, or a silent one.
func zerologCtx(ctx context.Context) *zerolog.Logger { return zerolog.Ctx(ctx) }
