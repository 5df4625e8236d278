package replicate

import (
	"context"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/restore/ckpt"
	"github.com/cairn-dev/cairn/snapshot"
)

// TestCredentialsThroughHelper: the user and password of an http remote
// reach the server (through the helper), and, while git waits for the
// server's answer, no process's command line holds the password; nor does
// the error.
func TestCredentialsThroughHelper(t *testing.T) {
	if _, err := os.Stat("/proc/self/cmdline"); err != nil {
		t.Skip("needs /proc")
	}
	ctx := context.Background()
	path, ver, err := snapshot.FindGit(ctx)
	if err != nil {
		t.Skip(err)
	}
	got := make(chan string, 4)
	release := make(chan struct{})
	var once sync.Once
	let := func() { once.Do(func() { close(release) }) }
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, pw, ok := r.BasicAuth()
		if !ok {
			w.Header().Set("WWW-Authenticate", `Basic realm="fleet"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		got <- u + ":" + pw
		<-release // git waits for the answer meanwhile
		http.Error(w, "no such repository", http.StatusNotFound)
	}))
	defer srv.Close()
	defer let()
	addr := srv.Listener.Addr().String()

	store := filepath.Join(t.TempDir(), "store.git")
	plainGit(t, store, "init", "-q", "--bare", store)
	// A helper of the user's own that would answer otherwise: the URL's
	// password replaces it for this host.
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, ".gitconfig"), []byte("[credential]\n\thelper = \"!f() { echo username=wrong; echo password=wrong; }; f\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &Pusher{Store: snapshot.NewGit(path, ver, store, filepath.Dir(store)),
		Remote: "http://fleet%20user:s3cret@" + addr + "/x.git", Host: "h1", Key: "k", Home: home}
	errc := make(chan error, 1)
	go func() {
		_, err := p.LsRemote(ctx)
		errc <- err
	}()
	select {
	case c := <-got:
		if c != "fleet user:s3cret" {
			t.Fatalf("the server got %q", c)
		}
	case err := <-errc:
		t.Fatalf("ls-remote ended before the server got credentials: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the server got no credentials in 30 s")
	}
	seen := 0
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		cmd := strings.ReplaceAll(string(b), "\x00", " ")
		if strings.Contains(cmd, addr) {
			seen++
		}
		if strings.Contains(cmd, "s3cret") {
			t.Errorf("process %s shows the password: %s", e.Name(), cmd)
		}
	}
	if seen == 0 {
		t.Fatal("no git process reaching the server was found")
	}
	let()
	err = <-errc
	if err == nil {
		t.Fatal("ls-remote of a missing repository succeeded")
	}
	if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "fleet user") {
		t.Errorf("the error shows the credentials: %v", err)
	}
}

func TestAccessOf(t *testing.T) {
	for _, tc := range []struct {
		remote, url, secret string
		config              int // -c options
	}{
		{"https://u:p%40ss@host:8443/x.git", "https://host:8443/x.git", "username=u\npassword=p@ss\n", 4},
		{"https://token@host/x.git", "https://host/x.git", "username=token\n", 2},
		{"https://host/x.git", "https://host/x.git", "", 0},
		{"ssh://git@host/x.git", "ssh://git@host/x.git", "", 0},
		{"/srv/x.git", "/srv/x.git", "", 0},
	} {
		a, err := accessOf(tc.remote)
		if err != nil || a.url != tc.url || string(a.secret) != tc.secret || len(a.config) != tc.config {
			t.Errorf("accessOf(%q) = %q %q %q, %v", tc.remote, a.url, a.secret, a.config, err)
		}
	}
	if _, err := accessOf("https://u:a%0Ab@host/x.git"); err == nil {
		t.Error("a password with a newline is accepted")
	}
}

// TestPushWithCredentials: a push to a smart-http server (git http-backend)
// that asks for a password arrives, the user and password coming through
// the helper; a wrong password fails, and its error does not show it.
func TestPushWithCredentials(t *testing.T) {
	ctx := context.Background()
	path, _, err := snapshot.FindGit(ctx)
	if err != nil {
		t.Skip(err)
	}
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("one"), 0o644)
	st, err := snapshot.Open(ctx, ws, snapshot.Options{Layout: snapshot.LayoutPlain, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Seal(ctx, snapshot.SealRequest{Kind: ckpt.KindBaseline}); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	remoteDir := filepath.Join(root, "fleet.git")
	plainGit(t, remoteDir, "init", "-q", "--bare", remoteDir)
	backend := &cgi.Handler{Path: path, Args: []string{"http-backend"},
		// REMOTE_USER: http-backend takes a push from a known user only.
		Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "HOME=" + root, "REMOTE_USER=fleet"}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, pw, ok := r.BasicAuth(); !ok || u != "fleet" || pw != "pa ss:w@rd" {
			w.Header().Set("WWW-Authenticate", `Basic realm="fleet"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, r)
	}))
	defer srv.Close()
	real, _ := filepath.EvalSymlinks(ws)
	pusher := func(remote string) *Pusher {
		return &Pusher{Store: st.ObjectsGit(),
			Remote: remote, Host: "h1", Key: Key(real), Home: t.TempDir(), StatePath: filepath.Join(t.TempDir(), "state.json")}
	}
	base := "127.0.0.1:" + strings.TrimPrefix(srv.URL, "http://127.0.0.1:")
	_, err = pusher("http://fleet:wrong@"+base+"/fleet.git").Sync(ctx, Manifest{Workspace: real, Layout: "plain"})
	if err == nil || strings.Contains(err.Error(), "wrong") {
		t.Fatalf("a wrong password: %v", err)
	}
	res, err := pusher("http://fleet:pa%20ss%3Aw%40rd@"+base+"/fleet.git").Sync(ctx, Manifest{Workspace: real, Layout: "plain"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Pushes != 1 || res.Manifest == "" {
		t.Fatalf("sync %+v", res)
	}
	if got := plainGit(t, remoteDir, "rev-parse", ManifestRef("h1", Key(real))); got != res.Manifest {
		t.Errorf("the manifest on the remote is %s, pushed %s", got, res.Manifest)
	}
}
