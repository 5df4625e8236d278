package replicate

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/cairn-dev/cairn/snapshot"
)

// Credentials in a remote's URL (https://user:password@host/…) never go on a
// command line, where every local user's ps would show them (README.md,
// "Fleet replication"): git is given the URL without them, and a credential
// helper, scoped to the remote's scheme and host, that hands them to git
// from a pipe only git and what it starts inherit (snapshot.Git.Secret).

// credentialHelper answers git's "get" with what is on the secret's
// descriptor; "store" and "erase" are ignored.
var credentialHelper = fmt.Sprintf(`!f() { test "$1" = get && cat <&%d; }; f`, snapshot.SecretFD)

// access is how git reaches a remote: the URL it is given, the options that
// come before the command, and the secret the helper reads.
type access struct {
	url    string
	config []string
	secret []byte
}

// curlSchemes are the transports whose credentials git asks helpers for.
var curlSchemes = map[string]bool{"http": true, "https": true, "ftp": true, "ftps": true}

// accessOf is remote as git is given it. A URL of a curl transport with a
// user (and password) loses them; they go to a helper scoped to its scheme
// and host. With a password, that helper replaces the configured ones for
// that host, as the URL's password did; a user alone is offered after them.
func accessOf(remote string) (access, error) {
	u, err := url.Parse(remote)
	if err != nil || u.User == nil || !curlSchemes[strings.ToLower(u.Scheme)] {
		return access{url: remote}, nil
	}
	name := u.User.Username()
	pw, hasPW := u.User.Password()
	if strings.ContainsAny(name+pw, "\x00\n\r") {
		return access{}, fmt.Errorf("the user or password of %s holds a newline or NUL", Redact(remote))
	}
	u.User = nil
	key := "credential." + u.Scheme + "://" + u.Host + ".helper"
	a := access{url: u.String(), secret: []byte("username=" + name + "\n")}
	if hasPW {
		a.config = append(a.config, "-c", key+"=") // an empty helper clears the list before it
		a.secret = fmt.Appendf(a.secret, "password=%s\n", pw)
	}
	a.config = append(a.config, "-c", key+"="+credentialHelper)
	return a, nil
}

// gitFor is g for a call that reaches remote: with the secret set, and the
// options and URL to give git.
func gitFor(g *snapshot.Git, remote string) (*snapshot.Git, access, error) {
	a, err := accessOf(remote)
	if err != nil {
		return nil, a, err
	}
	c := *g
	c.Secret = a.secret
	return &c, a, nil
}

// StrayPassword reports whether remote is a URL with a password that git
// would not hand to a credential helper (ssh://, git://): it would pass it on,
// on the command line of ssh, or nowhere.
func StrayPassword(remote string) bool {
	u, err := url.Parse(remote)
	if err != nil || u.User == nil || curlSchemes[strings.ToLower(u.Scheme)] {
		return false
	}
	_, ok := u.User.Password()
	return ok
}
