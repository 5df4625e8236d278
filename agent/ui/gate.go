package ui

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
)

// A Gate guards the panel on a loopback port (docs/operating.md, "The panel"). The
// port is reachable by every local user and by any page a browser opens,
// so before anything reaches the socket a request must:
//   - name the port as 127.0.0.1 or localhost in Host (DNS rebinding);
//   - carry the session cookie, which only the one-time login URL sets
//     (HttpOnly, SameSite=Strict);
//   - if it changes anything (any method but GET and HEAD), carry the
//     session's CSRF token in the CSRFHeader, and an Origin, when it has
//     one, of this port;
//   - be one of the few endpoints the panel uses.
//
// No answer carries a CORS header, so no other origin reads one.
type Gate struct {
	port    int
	next    http.Handler
	token   string // one-time: exchanged for the cookie once
	session string // the cookie's value
	csrf    string

	mu   sync.Mutex
	used bool
}

// Names the page and the Gate share.
const (
	CookieName  = "cairn_ui"
	CSRFHeader  = "X-Cairn-Csrf"
	LoginPath   = Prefix + "login"
	SessionPath = Prefix + "session"
)

// NewGate guards next (the socket, see SocketProxy) on the loopback port.
func NewGate(port int, next http.Handler) (*Gate, error) {
	g := &Gate{port: port, next: next}
	for _, s := range []*string{&g.token, &g.session, &g.csrf} {
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			return nil, fmt.Errorf("panel secrets: %w", err)
		}
		*s = hex.EncodeToString(b)
	}
	return g, nil
}

// URL is the one-time login URL to print and open.
func (g *Gate) URL() string {
	return fmt.Sprintf("http://127.0.0.1:%d%s?token=%s", g.port, LoginPath, g.token)
}

// allowed are the endpoints the panel uses; the rest of the socket API
// (watch, gc, prune, checkpoint, metrics …) is not reachable from a browser.
var allowed = map[string]string{
	"/v1/status":  http.MethodGet,
	"/v1/list":    http.MethodGet,
	"/v1/show":    http.MethodGet,
	"/v1/diff":    http.MethodGet,
	"/v1/events":  http.MethodGet,
	"/v1/restore": http.MethodPost,
	"/v1/undo":    http.MethodPost,
}

func (g *Gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	pageHeaders(w.Header())
	if !g.ourHost(r.Host) {
		writeError(w, http.StatusForbidden, "BAD_HOST", "the panel answers only to 127.0.0.1 and localhost on its own port")
		return
	}
	if o := r.Header.Get("Origin"); o != "" && !g.ourOrigin(o) {
		writeError(w, http.StatusForbidden, "CROSS_ORIGIN", "requests from another site are refused")
		return
	}
	if r.URL.Path == LoginPath {
		g.login(w, r)
		return
	}
	if !g.hasSession(r) {
		writeError(w, http.StatusUnauthorized, "NO_SESSION", "open the panel with the URL `cairn ui` printed")
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		if !same(r.Header.Get(CSRFHeader), g.csrf) {
			writeError(w, http.StatusForbidden, "CSRF", "a state-changing request needs the session's "+CSRFHeader+" header")
			return
		}
	}
	switch {
	case r.URL.Path == SessionPath:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"csrf": g.csrf})
		return
	case r.URL.Path == "/" || r.URL.Path == "/ui":
		http.Redirect(w, r, Prefix, http.StatusFound)
		return
	case strings.HasPrefix(r.URL.Path, Prefix):
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			writeError(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "the panel's pages are read only")
			return
		}
	case allowed[r.URL.Path] == r.Method || (r.Method == http.MethodHead && allowed[r.URL.Path] == http.MethodGet):
	default:
		writeError(w, http.StatusNotFound, "NOT_FOUND", fmt.Sprintf("the panel does not use %s %s", r.Method, r.URL.Path))
		return
	}
	// The socket needs none of the browser's secrets.
	r.Header.Del("Cookie")
	r.Header.Del(CSRFHeader)
	g.next.ServeHTTP(&noCORS{ResponseWriter: w}, r)
}

// noCORS drops any CORS header an answer would carry: no other origin may
// read the panel's answers, whatever the socket says.
type noCORS struct {
	http.ResponseWriter
	checked bool
}

func (w *noCORS) strip() {
	if w.checked {
		return
	}
	w.checked = true
	for k := range w.Header() {
		if strings.HasPrefix(k, "Access-Control-") {
			w.Header().Del(k)
		}
	}
}

func (w *noCORS) WriteHeader(code int) { w.strip(); w.ResponseWriter.WriteHeader(code) }

func (w *noCORS) Write(b []byte) (int, error) { w.strip(); return w.ResponseWriter.Write(b) }

func (w *noCORS) FlushError() error {
	w.strip()
	return http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *noCORS) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// login exchanges the one-time token for the session cookie, then sends
// the browser to the panel. The page it answers moves on by itself, so the
// panel's first request is made by this origin: a SameSite=Strict cookie
// goes with it even when the login URL came from another site.
func (g *Gate) login(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		writeError(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "open the login URL in a browser")
		return
	}
	g.mu.Lock()
	ok := !g.used && same(r.URL.Query().Get("token"), g.token)
	if ok {
		g.used = true
	}
	g.mu.Unlock()
	if !ok && !g.hasSession(r) {
		writeError(w, http.StatusUnauthorized, "BAD_TOKEN", "this login URL was used already or is wrong; run cairn ui again")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: g.session, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprintf(w, `<!doctype html><meta charset="utf-8"><meta http-equiv="refresh" content="0; url=%[1]s"><title>cairn</title><p><a href="%[1]s">Open the panel</a></p>`, html.EscapeString(Prefix))
}

func (g *Gate) hasSession(r *http.Request) bool {
	c, err := r.Cookie(CookieName)
	return err == nil && same(c.Value, g.session)
}

// ourHost: a name a rebinding DNS answer could give would not be
// 127.0.0.1 or localhost with this port.
func (g *Gate) ourHost(host string) bool {
	h, p, err := net.SplitHostPort(host)
	return err == nil && p == strconv.Itoa(g.port) && (h == "127.0.0.1" || h == "localhost")
}

func (g *Gate) ourOrigin(origin string) bool {
	u, err := url.Parse(origin)
	return err == nil && u.Scheme == "http" && u.Path == "" && g.ourHost(u.Host)
}

func same(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// SocketProxy forwards requests to the daemon's socket, dialled by this
// process: the daemon authorises them by this process's credentials, as it
// would the CLI's. Events stream through unbuffered.
func SocketProxy(socket string) http.Handler {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host, pr.Out.Host = "http", "cairn", "cairn"
			pr.Out.Header.Del("Origin")
			pr.Out.Header.Del("Referer")
		},
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		}},
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			writeError(w, http.StatusBadGateway, "NO_DAEMON", "the daemon does not answer on "+socket+": "+err.Error())
		},
	}
}
