package ui

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/restore/ckpt"
)

// fakeSocket stands for the daemon: it records what reached it.
type fakeSocket struct{ got chan *http.Request }

func (f fakeSocket) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.got <- r.Clone(r.Context())
	w.Header().Set("Access-Control-Allow-Origin", "*") // never passed on: see below
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintln(w, `{"ok":true}`)
}

// gateFor serves a Gate on a loopback port and returns it with its base URL.
func gateFor(t *testing.T) (*Gate, string, fakeSocket) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sock := fakeSocket{got: make(chan *http.Request, 10)}
	port := ln.Addr().(*net.TCPAddr).Port
	g, err := NewGate(port, sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: g, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return g, fmt.Sprintf("http://127.0.0.1:%d", port), sock
}

type call struct {
	method, path, host, origin, csrf string
	cookie                           *http.Cookie
}

func do(t *testing.T, base string, c call) (*http.Response, string) {
	t.Helper()
	if c.method == "" {
		c.method = http.MethodGet
	}
	var body io.Reader
	if c.method == http.MethodPost {
		body = strings.NewReader(`{"workspace":"/w","target":"c1"}`)
	}
	req, err := http.NewRequest(c.method, base+c.path, body)
	if err != nil {
		t.Fatal(err)
	}
	if c.host != "" {
		req.Host = c.host
	}
	if c.origin != "" {
		req.Header.Set("Origin", c.origin)
	}
	if c.csrf != "" {
		req.Header.Set(CSRFHeader, c.csrf)
	}
	if c.cookie != nil {
		req.AddCookie(c.cookie)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	for k := range res.Header {
		if strings.HasPrefix(k, "Access-Control-") {
			t.Errorf("%s %s answered a CORS header %s", c.method, c.path, k)
		}
	}
	return res, string(b)
}

// TestUIGate: the one-time token becomes an HttpOnly SameSite=Strict
// cookie; without it, with a foreign Host or Origin, or a state-changing
// request without the CSRF token, nothing reaches the socket.
func TestUIGate(t *testing.T) {
	g, base, sock := gateFor(t)
	u, _ := url.Parse(g.URL())
	if u.Hostname() != "127.0.0.1" || u.Query().Get("token") == "" {
		t.Fatalf("login URL %s", g.URL())
	}
	port := u.Port()
	loginPath := u.RequestURI()

	// Before logging in: refused, token or not.
	for _, c := range []call{
		{path: "/ui/"},
		{path: "/v1/status"},
		{path: "/ui/session"},
		{path: LoginPath + "?token=wrong"},
		{path: loginPath, host: "evil.example:" + port},           // DNS rebinding: the token is not spent
		{path: loginPath, host: "127.0.0.1:1"},                    // another port
		{path: loginPath, origin: "http://evil.example"},          // another site
		{method: http.MethodPost, path: "/v1/restore", csrf: "x"}, // no cookie
	} {
		res, body := do(t, base, c)
		if res.StatusCode != http.StatusUnauthorized && res.StatusCode != http.StatusForbidden {
			t.Errorf("%+v: %d %s; want 401 or 403", c, res.StatusCode, body)
		}
	}
	if res, _ := do(t, base, call{path: "/v1/status"}); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("no cookie: %d, want 401", res.StatusCode)
	}

	// Logging in, once.
	res, body := do(t, base, call{path: loginPath, host: "localhost:" + port})
	if res.StatusCode != http.StatusOK || !strings.Contains(body, `url=/ui/`) {
		t.Fatalf("login: %d %s", res.StatusCode, body)
	}
	var cookie *http.Cookie
	for _, c := range res.Cookies() {
		if c.Name == CookieName {
			cookie = c
		}
	}
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Value == "" || strings.Contains(g.URL(), cookie.Value) {
		t.Fatalf("session cookie %+v", cookie)
	}
	if res, _ := do(t, base, call{path: loginPath}); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("the token worked twice: %d", res.StatusCode)
	}
	if res.Header.Get("Content-Security-Policy") == "" || res.Header.Get("Referrer-Policy") != "no-referrer" {
		t.Errorf("login page headers %v", res.Header)
	}

	// With the cookie.
	res, body = do(t, base, call{path: SessionPath, cookie: cookie})
	var sess struct{ CSRF string }
	if err := json.Unmarshal([]byte(body), &sess); res.StatusCode != http.StatusOK || err != nil || len(sess.CSRF) < 32 {
		t.Fatalf("session: %d %s", res.StatusCode, body)
	}
	for _, c := range []struct {
		call
		want int
	}{
		{call{path: "/v1/status", host: "evil.example:" + port}, http.StatusForbidden},
		{call{path: "/v1/status", host: "127.0.0.1"}, http.StatusForbidden},
		{call{method: http.MethodPost, path: "/v1/restore"}, http.StatusForbidden},
		{call{method: http.MethodPost, path: "/v1/restore", csrf: "wrong"}, http.StatusForbidden},
		{call{method: http.MethodPost, path: "/v1/restore", csrf: sess.CSRF, origin: "http://evil.example"}, http.StatusForbidden},
		{call{method: http.MethodPost, path: "/v1/restore", csrf: sess.CSRF, origin: "null"}, http.StatusForbidden},
		{call{method: http.MethodPost, path: "/v1/watch", csrf: sess.CSRF}, http.StatusNotFound},
		{call{method: http.MethodPost, path: "/v1/status", csrf: sess.CSRF}, http.StatusNotFound},
		{call{path: "/v1/restore"}, http.StatusNotFound},
		{call{path: "/metrics"}, http.StatusNotFound},
		{call{method: http.MethodPost, path: "/ui/timeline", csrf: sess.CSRF}, http.StatusMethodNotAllowed},
	} {
		c.cookie = cookie
		if res, body := do(t, base, c.call); res.StatusCode != c.want {
			t.Errorf("%s %s (host %q, origin %q, csrf %q): %d %s; want %d", c.method, c.path, c.host, c.origin, c.csrf, res.StatusCode, body, c.want)
		}
	}
	select {
	case r := <-sock.got:
		t.Fatalf("a refused request reached the socket: %s %s", r.Method, r.URL)
	default:
	}

	for _, c := range []call{
		{path: "/v1/status", cookie: cookie},
		{path: "/v1/list?workspace=/w", cookie: cookie, host: "localhost:" + port},
		{method: http.MethodPost, path: "/v1/restore", cookie: cookie, csrf: sess.CSRF},
		{method: http.MethodPost, path: "/v1/undo", cookie: cookie, csrf: sess.CSRF, origin: "http://127.0.0.1:" + port},
	} {
		if res, body := do(t, base, c); res.StatusCode != http.StatusOK {
			t.Errorf("%+v: %d %s", c, res.StatusCode, body)
			continue
		}
		r := <-sock.got
		if r.Header.Get("Cookie") != "" || r.Header.Get(CSRFHeader) != "" {
			t.Errorf("the browser's secrets reached the socket: %v", r.Header)
		}
	}
}

// TestUIGateWithJar: a browser-like client that logs in follows the page to
// the panel with its cookie.
func TestUIGateWithJar(t *testing.T) {
	g, base, sock := gateFor(t)
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	res, err := c.Get(g.URL())
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	res, err = c.Get(base + "/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("with the cookie: %d", res.StatusCode)
	}
	<-sock.got
}

// TestUITimeline: the panel's timeline is `cairn log`'s graph, row by row,
// laid out from the socket's own listing for the same request.
func TestUITimeline(t *testing.T) {
	rec := func(id, sha, parent string, kind ckpt.Kind, run string) ckpt.Record {
		return ckpt.Record{ID: id, SHA: sha, Parent: parent, Kind: kind, RunID: run, State: ckpt.StateOK, Label: "l" + id}
	}
	list := api.List{Workspace: "/w", Head: "c4", Records: []api.Record{
		rec("c4", "s4", "s1", ckpt.KindManual, ""),
		rec("c3", "s3", "s2", ckpt.KindPreRestore, ""),
		rec("c2", "s2", "s1", ckpt.KindCompleted, "1-run"),
		rec("c1", "s1", "", ckpt.KindBaseline, ""),
	}}
	socketAPI := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/list" || r.URL.Query().Get("workspace") != "/w" {
			w.WriteHeader(http.StatusForbidden)
			json.NewEncoder(w).Encode(api.Error{Code: "FORBIDDEN", Message: "not a workspace you may act on: " + r.URL.Query().Get("workspace")})
			return
		}
		json.NewEncoder(w).Encode(list)
	})
	h := Handler(socketAPI)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()
	base := "http://" + ln.Addr().String()

	res, err := http.Get(base + "/ui/timeline?workspace=/w")
	if err != nil {
		t.Fatal(err)
	}
	var tl Timeline
	err = json.NewDecoder(res.Body).Decode(&tl)
	res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, r := range tl.Rows {
		line := r.Lanes + r.Sign + r.After
		if r.Node >= 0 {
			n := tl.Nodes[r.Node]
			line += " " + n.Mark + " " + n.ID
			if n.Head {
				line += " ← HEAD"
			}
		}
		lines = append(lines, line)
	}
	want := []string{"○ + c4 ← HEAD", "│ ○ ⤿ c3", "│ ● ✔ c2", "├─╯", "○ ─ c1"}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("timeline:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	if tl.Nodes[2].Where != "run 1-run" || tl.Nodes[0].Title != "lc4" || !tl.Nodes[0].Usable || len(tl.Edges) != 3 {
		t.Errorf("nodes %+v edges %+v", tl.Nodes, tl.Edges)
	}
	// The socket's refusal is passed on as it was given.
	res, err = http.Get(base + "/ui/timeline?workspace=/other")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden || !strings.Contains(string(b), "not a workspace you may act on") {
		t.Errorf("refusal: %d %s", res.StatusCode, b)
	}
	// The page and its files are embedded, with headers that keep it in its origin.
	for _, p := range []string{"/ui/", "/ui/app.js", "/ui/style.css"} {
		res, err := http.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK || !strings.Contains(res.Header.Get("Content-Security-Policy"), "default-src 'self'") {
			t.Errorf("%s: %d %v", p, res.StatusCode, res.Header)
		}
	}
}
