// Package autodev is the in-repository layout (README.md, "AutoDev's
// in-repository mode"; docs/cairn-formats.md, "The autodev layout"): its
// checkpoints are commits on the branch the user's own repository is on,
// listed in .autodev/checkpoints.json. Unlike every other layout it writes to
// the user's .git: objects, the current branch (by compare-and-swap), the
// index (to follow the branch), and autodev/pre-restore-* branches. It never
// writes the repository's config or hooks, never runs them, and never moves a
// branch while git is in the middle of something.
package autodev

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/cairn-dev/cairn/platform"
	"github.com/cairn-dev/cairn/snapshot"
)

// Kinds of checkpoint (the list's "mode").
const (
	KindBaseline   = "baseline"    // the tree was dirty when watching began
	KindTask       = "task"        // asked for, or a codon the runtime completed
	KindPreRestore = "pre-restore" // the work a restore replaced
)

// LayoutName is the layout's name in the configuration and in answers.
const LayoutName = "autodev"

// The seed's words, exact.
const (
	MsgNotRepo    = "Not a git repository; checkpoints/rollback disabled (git init to enable recovery snapshots)"
	MsgRunLive    = "Stop the run before restoring — restore resets the project tree."
	BaselineLabel = "baseline before run"
	// SubjectPrefix begins the subject of every commit this layout makes.
	SubjectPrefix = "autodev: "
	// StateDir is the workspace's run state, never checkpointed.
	StateDir = ".autodev"
	// ParkPrefix names the branches a restore parks a dirty tree on.
	ParkPrefix = "autodev/pre-restore-"
)

// Identity is the author and committer of every checkpoint commit.
const (
	identityName  = "autodev"
	identityEmail = "autodev@localhost"
)

// ErrNotRepo means the workspace has no .git: checkpoints are off until it has.
//
//lint:ignore ST1005 the seed's exact words, printed as they are
var ErrNotRepo = errors.New(MsgNotRepo)

// BlockedError means the repository is in a state where cairn changes
// nothing: git is in the middle of an operation, HEAD is detached, or the
// index holds a conflict. Reason says which, and what to do.
type BlockedError struct{ Reason string }

func (e *BlockedError) Error() string { return "checkpoints paused: " + e.Reason }

// Repo is one workspace's repository. Its methods may be called from several
// goroutines and processes: an in-process mutex and a file lock in .autodev/
// keep them one at a time, and the branch moves only by compare-and-swap.
type Repo struct {
	dir   string // the top of the work tree; .git is directly inside it
	state string // private: cairn's own index, and HOME for git
	git   snapshot.Git
	// Now is the clock of entries and branch names (tests set it).
	Now func() time.Time
	mu  sync.Mutex
}

// Open prepares the repository at dir (which need not be one yet); state is
// a folder private to the caller where cairn keeps its own index.
func Open(ctx context.Context, dir, state string) (*Repo, error) {
	path, v, err := snapshot.FindGit(ctx)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(state, 0o700); err != nil {
		return nil, fmt.Errorf("autodev state %s: %w", state, err)
	}
	g := snapshot.NewGit(path, v, filepath.Join(dir, ".git"), state)
	g.WorkTree = dir
	g.Extra = []string{
		"GIT_AUTHOR_NAME=" + identityName, "GIT_AUTHOR_EMAIL=" + identityEmail,
		"GIT_COMMITTER_NAME=" + identityName, "GIT_COMMITTER_EMAIL=" + identityEmail,
	}
	return &Repo{dir: dir, state: state, Now: time.Now, git: *g}, nil
}

// Dir is the workspace.
func (r *Repo) Dir() string { return r.dir }

// ListPath is the workspace's checkpoints.json.
func (r *Repo) ListPath() string { return filepath.Join(r.dir, StateDir, "checkpoints.json") }

// run runs git on the repository with the user's index (index empty) or
// cairn's own.
func (r *Repo) run(ctx context.Context, index string, stdin []byte, extra []string, args ...string) (string, error) {
	g := r.git
	g.Index = index
	g.Extra = append(append([]string(nil), g.Extra...), extra...)
	var in io.Reader
	if stdin != nil {
		in = bytes.NewReader(stdin)
	}
	out, err := g.Run(ctx, in, args...)
	return strings.TrimSpace(string(out)), err
}

// exitCode is a failed git call's exit code, or -1.
func exitCode(err error) int {
	var ge *snapshot.GitError
	if errors.As(err, &ge) {
		return ge.ExitCode
	}
	return -1
}

// repoState is what a checkpoint or a restore needs to know first.
type repoState struct {
	branch string // refs/heads/…
	head   string // the branch's commit; empty on an unborn branch
}

// inProgress are the files git leaves in its folder while an operation waits
// for the user, and what to tell them.
var inProgress = []struct{ name, what string }{
	{"MERGE_HEAD", "a merge is in progress (finish it with git commit, or git merge --abort)"},
	{"rebase-merge", "a rebase is in progress (git rebase --continue or --abort)"},
	{"rebase-apply", "a rebase or git am is in progress (--continue or --abort)"},
	{"CHERRY_PICK_HEAD", "a cherry-pick is in progress (git cherry-pick --continue or --abort)"},
	{"REVERT_HEAD", "a revert is in progress (git revert --continue or --abort)"},
	{"BISECT_LOG", "a bisect is in progress (git bisect reset)"},
	{"index.lock", "another git command is running (index.lock exists)"},
}

// ownGitDir checks that .git is a folder (not a link, nor a file pointing
// elsewhere) that belongs to the user cairn runs as, and, as root, that no one
// else can change the repository (platform.CheckGitTrusted). git reads the
// repository's own config and attributes (filters, a fsmonitor) whoever
// runs it, and GIT_DIR set explicitly skips its safe.directory check: run by
// root on a .git another user controls, git would run that user's commands
// as root.
func (r *Repo) ownGitDir() error {
	f, err := platform.OpenDirNoFollow(filepath.Join(r.dir, ".git"))
	if errors.Is(err, fs.ErrNotExist) {
		return ErrNotRepo
	} else if err != nil {
		return &BlockedError{Reason: fmt.Sprintf("%s/.git is not a folder cairn can use (a link, or a file as in a linked worktree or submodule): %v", r.dir, err)}
	}
	uid, _, _, _, err := platform.DirInfo(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("look at %s/.git: %w", r.dir, err)
	}
	euid := os.Geteuid()
	if euid >= 0 && uid != uint32(euid) {
		return &BlockedError{Reason: fmt.Sprintf("%s/.git belongs to uid %d, not to uid %d that cairn runs as: git would run that user's config (filters, hooks) as this one", r.dir, uid, euid)}
	}
	if euid == 0 {
		// Root's own .git may still be another's to change: a group member
		// of a shared repository could set a filter that root would run.
		if err := platform.CheckGitTrusted(0, r.git.Dir, r.dir); err != nil {
			return &UntrustedError{Err: err}
		}
	}
	return nil
}

// UntrustedError refuses a repository in which git would run as root while
// someone else can change it (its config, hooks, info, objects, .git, the
// work tree's top or a folder above it): that someone could make root run
// their commands. Err names the path, why, and the fix.
type UntrustedError struct{ Err error }

func (e *UntrustedError) Error() string {
	return "refused: root runs git only in a repository no one else can change: " + e.Err.Error()
}

func (e *UntrustedError) Unwrap() error { return e.Err }

// probe says whether cairn may touch the repository now: ErrNotRepo, a
// *BlockedError, or its state.
func (r *Repo) probe(ctx context.Context) (repoState, error) {
	if err := r.ownGitDir(); err != nil {
		return repoState{}, err
	}
	// .git is a folder of the work tree (ownGitDir): no git needed to find it.
	for _, p := range inProgress {
		if _, err := os.Lstat(filepath.Join(r.git.Dir, p.name)); err == nil {
			return repoState{}, &BlockedError{Reason: p.what}
		}
	}
	branch, err := r.run(ctx, "", nil, nil, "symbolic-ref", "-q", "HEAD")
	if err != nil {
		if exitCode(err) == 1 {
			return repoState{}, &BlockedError{Reason: "HEAD is detached; checkpoints are commits on a branch (git switch <branch>)"}
		}
		return repoState{}, fmt.Errorf("read HEAD of %s: %w", r.dir, err)
	}
	if !strings.HasPrefix(branch, "refs/heads/") {
		return repoState{}, &BlockedError{Reason: "HEAD points at " + branch + ", not a branch"}
	}
	st := repoState{branch: branch}
	if head, err := r.run(ctx, "", nil, nil, "rev-parse", "-q", "--verify", branch+"^{commit}"); err == nil {
		st.head = head
	} else if exitCode(err) != 1 {
		return repoState{}, fmt.Errorf("read %s of %s: %w", branch, r.dir, err)
	}
	if u, err := r.run(ctx, "", nil, nil, "ls-files", "-u", "-z"); err != nil {
		return repoState{}, fmt.Errorf("read the index of %s: %w", r.dir, err)
	} else if u != "" {
		return repoState{}, &BlockedError{Reason: "the index has unmerged paths (resolve the conflict first)"}
	}
	return st, nil
}

// Check reports whether checkpoints can be made now: nil, ErrNotRepo or a
// *BlockedError.
func (r *Repo) Check(ctx context.Context) error {
	_, err := r.probe(ctx)
	return err
}

// tree writes the tree of the work tree as a checkpoint holds it: HEAD plus
// every change `git add -A` sees (git's ignore rules apply), .autodev/
// excepted, staged in cairn's own index so the user's staging is never read
// half-way. dirty reports whether it differs from HEAD's tree.
func (r *Repo) tree(ctx context.Context, st repoState) (tree string, dirty bool, err error) {
	index := filepath.Join(r.state, "index")
	base := st.head
	if base == "" {
		_, err = r.run(ctx, index, nil, nil, "read-tree", "--empty")
	} else {
		// -m keeps the stat data of unchanged entries: unchanged files are not hashed again.
		_, err = r.run(ctx, index, nil, nil, "read-tree", "-m", base)
		if err != nil {
			_ = os.Remove(index) // a damaged private index: start it over
			_, err = r.run(ctx, index, nil, nil, "read-tree", base)
		}
	}
	if err != nil {
		return "", false, fmt.Errorf("stage %s: %w", r.dir, err)
	}
	if _, err := r.run(ctx, index, nil, nil, "add", "-A", "--", ".", ":(top,exclude)"+StateDir); err != nil {
		return "", false, fmt.Errorf("stage %s: %w", r.dir, err)
	}
	tree, err = r.run(ctx, index, nil, nil, "write-tree")
	if err != nil {
		return "", false, fmt.Errorf("write the tree of %s: %w", r.dir, err)
	}
	var was string
	if base == "" {
		was, err = r.run(ctx, "", []byte{}, nil, "hash-object", "-t", "tree", "--stdin")
	} else {
		was, err = r.run(ctx, "", nil, nil, "rev-parse", base+"^{tree}")
	}
	if err != nil {
		return "", false, fmt.Errorf("read the tree of HEAD in %s: %w", r.dir, err)
	}
	return tree, tree != was, nil
}

// commit makes a checkpoint commit of tree on parent (none: a root commit).
func (r *Repo) commit(ctx context.Context, tree, parent string, e Entry, when time.Time) (string, error) {
	args := []string{"commit-tree", tree}
	if parent != "" {
		args = append(args, "-p", parent)
	}
	args = append(args, "-F", "-")
	date := when.Format(time.RFC3339)
	sha, err := r.run(ctx, "", []byte(message(e)), []string{"GIT_AUTHOR_DATE=" + date, "GIT_COMMITTER_DATE=" + date}, args...)
	if err != nil {
		return "", fmt.Errorf("commit a checkpoint in %s: %w", r.dir, err)
	}
	return sha, nil
}

// message is a checkpoint commit's message: the subject, then trailers that
// let a lost checkpoints.json be rebuilt whole.
func message(e Entry) string {
	var b strings.Builder
	b.WriteString(SubjectPrefix + oneLine(e.Label) + "\n\n")
	fmt.Fprintf(&b, "Autodev-Checkpoint: %s\nAutodev-Kind: %s\n", e.ID, e.Kind)
	if e.Task != "" {
		fmt.Fprintf(&b, "Autodev-Task: %s\n", oneLine(e.Task))
	}
	return b.String()
}

// oneLine is s's first line, control characters made spaces.
func oneLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return strings.TrimSpace(strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s))
}

// moveBranch moves ref from old (empty: it must not exist) to sha, refusing
// if another writer moved it meanwhile.
func (r *Repo) moveBranch(ctx context.Context, ref, sha, old, why string) error {
	if _, err := r.run(ctx, "", nil, nil, "update-ref", "-m", why, ref, sha, old); err != nil {
		return fmt.Errorf("move %s in %s: %w", ref, r.dir, err)
	}
	return nil
}
