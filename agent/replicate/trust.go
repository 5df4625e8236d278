package replicate

import (
	"errors"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/cairn-dev/cairn/platform"
)

// A push into a repository on this machine (a file:// URL or a path) runs
// git receive-pack there, with that repository's config and hooks, as the
// user who pushes; fetching and listing run its upload-pack. Root therefore
// pushes only into a local repository no one else can change (README.md,
// "Security").

// LocalPath is the folder git reaches for a local remote (a file:// URL or a
// path; a relative one as given), and whether remote is one: git's own rules,
// where an address with a ':' before any '/' is ssh's host:path.
func LocalPath(remote string) (string, bool) {
	if rest, ok := strings.CutPrefix(remote, "file://"); ok {
		// git takes the path from the first '/' (a host is ignored) and
		// decodes it.
		i := strings.IndexByte(rest, '/')
		if i < 0 {
			return "", false
		}
		p := rest[i:]
		if dec, err := url.PathUnescape(p); err == nil {
			p = dec
		}
		return p, true
	}
	if strings.Contains(remote, "://") || strings.Contains(remote, "::") || remote == "" {
		return "", false
	}
	if c := strings.IndexByte(remote, ':'); c > 0 {
		if s := strings.IndexByte(remote, '/'); s < 0 || c < s {
			return "", false // [user@]host:path
		}
	}
	return remote, true
}

// localRepo is the repository git uses for the local path p, in the order
// git tries them (p/.git, p, p.git/.git, p.git): its git folder, and the top
// of its work tree when it has one. None there: p itself, bare.
func localRepo(p string) (gitDir, workTree string) {
	exists := func(q string) bool {
		_, err := os.Lstat(q)
		return !errors.Is(err, fs.ErrNotExist)
	}
	switch {
	case exists(filepath.Join(p, ".git")):
		return filepath.Join(p, ".git"), p
	case exists(p):
		return p, ""
	case exists(filepath.Join(p+".git", ".git")):
		return filepath.Join(p+".git", ".git"), p + ".git"
	case exists(p + ".git"):
		return p + ".git", ""
	}
	return p, ""
}

// CheckLocalRemote refuses, when the caller is root, a local remote that
// someone other than root can change (platform.CheckGitTrusted); cwd is the
// folder git runs in, against which a relative path is resolved. Other
// remotes, and other callers, pass.
func CheckLocalRemote(remote, cwd string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	p, ok := LocalPath(remote)
	if !ok {
		return nil
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(cwd, p)
	}
	gitDir, workTree := localRepo(filepath.Clean(p))
	if err := platform.CheckGitTrusted(0, gitDir, workTree); err != nil {
		return &UntrustedRemoteError{Err: err}
	}
	return nil
}

// UntrustedRemoteError is a local remote root will not push to: Err names
// the path, why, and the fix.
type UntrustedRemoteError struct{ Err error }

func (e *UntrustedRemoteError) Error() string {
	return "refused: root pushes only to a local repository no one else can change (its hooks and config would run as root): " + e.Err.Error()
}

func (e *UntrustedRemoteError) Unwrap() error { return e.Err }
