package cli_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/cairn-dev/cairn/platform/testsupport"
)

// browser is the Chromium (or Chrome) the panel's tests drive. Without one
// the test skips, unless CI is set: CI installs Chromium, so there a missing
// browser fails.
func browser(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "" {
		t.Skip("no Chromium on PATH (apt-get install chromium); the panel's browser test needs one, and runs whenever CI is set")
	}
	t.Fatal("CI is set and no Chromium is on PATH: .ci/run installs it")
	return ""
}

// shotsDir is where the test writes its screenshots: $CAIRN_UI_SHOTS, else
// a temporary folder.
func shotsDir(t *testing.T) string {
	dir := os.Getenv("CAIRN_UI_SHOTS")
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s", dir)
	return dir
}

// startDaemon runs the real daemon on ws (autosave off: the test makes
// every checkpoint) and waits for its baseline.
func startDaemon(t *testing.T, ws string) (sock, state string) {
	t.Helper()
	return startDaemonWithin(t, ws, 20*time.Second)
}

// startDaemonWithin is startDaemon waiting at most within for the baseline
// (a big workspace's takes longer).
func startDaemonWithin(t *testing.T, ws string, within time.Duration) (sock, state string) {
	t.Helper()
	state = t.TempDir()
	cfg := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(cfg, []byte("[defaults]\nautosave = false\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sock = filepath.Join(state, "cairn.sock")
	d := exec.Command(cairnBin, "daemon", "--config", cfg, "--watch", ws, "--state-dir", state, "--socket", sock)
	d.Env = append(os.Environ(), "CAIRN_STATE_DIR="+state)
	var dlog strings.Builder
	d.Stderr = &dlog
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.Process.Signal(syscall.SIGTERM)
		d.Wait()
		if t.Failed() {
			t.Logf("daemon log:\n%s", dlog.String())
		}
	})
	testsupport.WaitFor(t, within, "the daemon's baseline", func() bool { // its log is shown on failure
		out, _, code := cairn(t, nil, "list", ws, "--socket", sock, "--state-dir", t.TempDir())
		return code == 0 && strings.Contains(out, "c1")
	})
	return sock, state
}

// startUI runs `cairn ui --no-open` and returns the URL it prints.
func startUI(t *testing.T, sock string) string {
	t.Helper()
	cmd := exec.Command(cairnBin, "ui", "--no-open", "--socket", sock)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errOut strings.Builder
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if i := strings.Index(sc.Text(), "http://"); i >= 0 {
				found <- strings.TrimSpace(sc.Text()[i:])
				break
			}
		}
		io.Copy(io.Discard, out)
	}()
	select {
	case u := <-found:
		return u
	case <-time.After(20 * time.Second):
		t.Fatalf("cairn ui printed no URL; stderr:\n%s", errOut.String())
	}
	return ""
}

// treeSums is every file of a checkpoint (path → sha256 of its blob), read
// from the store with git.
func treeSums(t *testing.T, gitDir, sha string) map[string]string {
	t.Helper()
	out, err := exec.Command("git", "--git-dir", gitDir, "ls-tree", "-r", "-z", sha).Output()
	if err != nil {
		t.Fatalf("ls-tree %s: %v", sha, err)
	}
	sums := map[string]string{}
	for _, e := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		meta, path, _ := strings.Cut(e, "\t")
		f := strings.Fields(meta)
		blob, err := exec.Command("git", "--git-dir", gitDir, "cat-file", "blob", f[2]).Output()
		if err != nil {
			t.Fatalf("cat-file %s: %v", f[2], err)
		}
		s := sha256.Sum256(blob)
		sums[path] = hex.EncodeToString(s[:])
	}
	return sums
}

// diskSums is every regular file under root (slash path → sha256).
func diskSums(t *testing.T, root string) map[string]string {
	t.Helper()
	sums := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		s := sha256.Sum256(b)
		sums[filepath.ToSlash(rel)] = hex.EncodeToString(s[:])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sums
}

func sameSums(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// storeGitDir finds the workspace's store under the daemon's state folder.
func storeGitDir(t *testing.T, state string) string {
	t.Helper()
	var found string
	filepath.WalkDir(state, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() == "store.git" {
			found = p
			return filepath.SkipAll
		}
		return nil
	})
	if found == "" {
		t.Fatalf("no store.git under %s", state)
	}
	return found
}

// shaOf is a ledger id's commit, through the daemon.
func shaOf(t *testing.T, ws, sock, id string) string {
	t.Helper()
	var recs []record
	if err := json.Unmarshal([]byte(mustCairn(t, nil, "list", ws, "--json", "--socket", sock)), &recs); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.ID == id {
			return r.SHA
		}
	}
	t.Fatalf("no %s in the ledger", id)
	return ""
}

// TestPanelInBrowser opens the panel of a real daemon's workspace through
// `cairn ui` in headless Chromium: the timeline, a diff, a live update, a
// restore through its dry-run plan and the confirmation (the work tree on
// disk checked file by file against the checkpoint), Undo, and a refusal.
// Plain HTTP requests without the token, with a foreign Host, or without
// the CSRF token are refused.
func TestPanelInBrowser(t *testing.T) {
	chrome := browser(t)
	shots := shotsDir(t)
	ws := t.TempDir()
	put := func(rel, body string) {
		t.Helper()
		p := filepath.Join(ws, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	put("README.md", "# demo\n")
	put("src/main.go", "package main\n\nfunc main() {}\n")
	sock, state := startDaemon(t, ws) // c1: the baseline
	put("src/main.go", "package main\n\nfunc main() { println(\"two\") }\n")
	put("logo.png", "\x89PNG\r\n\x1a\n\x00\x00\x00binary")
	mustCairn(t, nil, "checkpoint", ws, "--label", "two", "--socket", sock)
	put("src/main.go", "package main\n\nfunc main() { println(\"three\") }\n")
	put("notes.txt", "three\n")
	if err := os.Remove(filepath.Join(ws, "README.md")); err != nil {
		t.Fatal(err)
	}
	mustCairn(t, nil, "checkpoint", ws, "--status", "completed", "--codon", "build", "--run", "1-abcde", "--socket", sock)

	panel := startUI(t, sock)
	u, err := url.Parse(panel)
	if err != nil || u.Hostname() != "127.0.0.1" {
		t.Fatalf("cairn ui printed %q", panel)
	}
	base := "http://" + u.Host

	// Without the cookie, with a foreign Host, with a wrong token: refused,
	// and the one-time token is not spent by any of them.
	get := func(path, host string, cookie *http.Cookie) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		if host != "" {
			req.Host = host
		}
		if cookie != nil {
			req.AddCookie(cookie)
		}
		res, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	for _, c := range []struct {
		path, host string
		want       int
	}{
		{"/ui/", "", http.StatusUnauthorized},
		{"/v1/status", "", http.StatusUnauthorized},
		{"/ui/login?token=nope", "", http.StatusUnauthorized},
		{u.RequestURI(), "rebound.example:" + u.Port(), http.StatusForbidden},
	} {
		if got := get(c.path, c.host, nil); got != c.want {
			t.Errorf("GET %s (Host %q): %d, want %d", c.path, c.host, got, c.want)
		}
	}

	bctx := newBrowser(t, chrome)
	ctx, cancel := context.WithTimeout(bctx, 120*time.Second)
	defer cancel()
	fail := func(what string, err error) {
		t.Helper()
		page, _ := chromedp.Run(bctx, chromedp.OuterHTML(chromedp.CSS("body")))
		t.Fatalf("%s: %v\npage:\n%s", what, err, page)
	}
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			fail(what, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			fail("text of "+sel, err)
		}
		return s
	}
	visible := func(sel string) chromedp.Action[chromedp.Void] { return chromedp.WaitVisible(chromedp.CSS(sel)) }
	click := func(sel string) chromedp.Action[chromedp.Void] { return chromedp.Click(chromedp.CSS(sel)) }
	until := func(expr string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(30*time.Second))(ctx, tg)
			return err
		})
	}
	shot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			fail("screenshot "+name, err)
		}
		if err := os.WriteFile(filepath.Join(shots, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// The timeline: three checkpoints, the newest at HEAD.
	do("open the panel", chromedp.Navigate(panel), visible(`#timeline .row[data-id="c3"]`), visible(`#live.on`))
	headRow, wsText := text(`#timeline .row[data-id="c3"]`), text(`#workspaces`)
	if !strings.Contains(headRow, "← HEAD") || !strings.Contains(headRow, "build/1-abcde") || !strings.Contains(headRow, "✔") {
		t.Errorf("c3's row: %q", headRow)
	}
	if !strings.Contains(wsText, ws) || !strings.Contains(wsText, "watching") || !strings.Contains(wsText, "3 checkpoints") {
		t.Errorf("workspaces: %q", wsText)
	}

	// The cookie the login set: HttpOnly, SameSite=Strict; with it but no
	// CSRF token, a restore is refused; no other endpoint is reachable.
	got, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{base}})
	if err != nil {
		t.Fatal(err)
	}
	cookies := got.Cookies
	var session *http.Cookie
	for _, c := range cookies {
		if c.Name == "cairn_ui" && c.HTTPOnly && c.SameSite == network.CookieSameSiteStrict {
			session = &http.Cookie{Name: c.Name, Value: c.Value}
		}
	}
	if session == nil {
		t.Fatalf("no HttpOnly SameSite=Strict session cookie: %+v", cookies)
	}
	if got := get(u.RequestURI(), "", nil); got != http.StatusUnauthorized {
		t.Errorf("the one-time URL worked again: %d", got)
	}
	if got := get("/v1/status", "", session); got != http.StatusOK {
		t.Errorf("with the session cookie: %d", got)
	}
	if got := get("/v1/status", "evil.example:"+u.Port(), session); got != http.StatusForbidden {
		t.Errorf("with the cookie and a foreign Host: %d", got)
	}
	post := func(path, body string, header map[string]string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
		req.AddCookie(session)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	restoreBody := fmt.Sprintf(`{"workspace":%q,"target":"c1"}`, ws)
	if got := post("/v1/restore", restoreBody, nil); got != http.StatusForbidden {
		t.Errorf("a restore without the CSRF token: %d, want 403", got)
	}
	if got := post("/v1/restore", restoreBody, map[string]string{"X-Cairn-Csrf": "guess"}); got != http.StatusForbidden {
		t.Errorf("a restore with a wrong CSRF token: %d, want 403", got)
	}
	if got := post("/v1/watch", fmt.Sprintf(`{"workspace":%q}`, t.TempDir()), nil); got != http.StatusForbidden && got != http.StatusNotFound {
		t.Errorf("watch through the panel: %d", got)
	}
	if !sameSums(diskSums(t, ws), treeSums(t, storeGitDir(t, state), shaOf(t, ws, sock, "c3"))) {
		t.Fatal("a refused restore changed the work tree")
	}

	// A checkpoint: its files, a text diff, a binary file named only.
	do("c2's files and a diff",
		click(`#timeline .row[data-id="c2"]`),
		visible(`#files li[data-path="src/main.go"]`),
		click(`#files li[data-path="src/main.go"] .diff-btn`),
		visible(`#diff-box`),
		until(`document.getElementById('diff').textContent.includes('println("two")')`))
	files, diff := text(`#files`), text(`#diff`)
	if !strings.Contains(files, "logo.png") || !strings.Contains(files, "binary") || !strings.Contains(diff, `+func main() { println("two") }`) || !strings.Contains(diff, "-func main() {}") {
		t.Errorf("files %q\ndiff %q", files, diff)
	}
	do("the binary file's diff",
		click(`#files li[data-path="logo.png"] .diff-btn`),
		until(`document.getElementById('diff').textContent.includes('Binary files')`))
	if diff = text(`#diff`); strings.Contains(diff, "binary\n") || !strings.Contains(diff, "not shown") {
		t.Errorf("binary diff %q", diff)
	}
	// Against the work tree: c2 → now.
	do("against the work tree",
		chromedp.SetValue(chromedp.CSS(`#compare`), "worktree"), // fires change
		visible(`#files li[data-path="notes.txt"]`),
		click(`#files li[data-path="src/main.go"] .diff-btn`),
		until(`document.getElementById('diff').textContent.includes('println("three")')`))

	// Live: a checkpoint sealed elsewhere appears without a reload.
	put("notes.txt", "by hand\n")
	mustCairn(t, nil, "checkpoint", ws, "--label", "four", "--socket", sock)
	do("c4 arrives by the event stream", visible(`#timeline .row[data-id="c4"]`))
	c4 := diskSums(t, ws)

	// A refusal reads "Restore: <the daemon's words>".
	do("a refused restore",
		chromedp.Evaluate[chromedp.Void](`doRestore(S.ws, 'c99', [])`),
		until(`document.getElementById('result').textContent.startsWith('Restore: ')`))
	if result := text(`#result`); !strings.Contains(result, "unknown checkpoint: c99") {
		t.Errorf("refusal %q", result)
	}

	// Restore c2: the plan first, then the confirmation.
	do("c2's restore plan",
		click(`#timeline .row[data-id="c2"]`),
		visible(`#files li[data-path="logo.png"]`),
		click(`#restore-btn`),
		visible(`#confirm-btn`))
	summary, plan := text(`#plan-summary`), text(`#plan`)
	if !sameSums(diskSums(t, ws), c4) {
		t.Fatal("the dry run changed the work tree")
	}
	if !strings.Contains(summary, "Writes 2 file(s)") || !strings.Contains(summary, "deletes 1 file(s)") ||
		!strings.Contains(plan, "README.md") || !strings.Contains(plan, "notes.txt") {
		t.Errorf("plan %q\n%q", summary, plan)
	}
	shot("restore-plan.png")
	do("restore c2", click(`#confirm-btn`), visible(`#undo-btn`))
	if result := text(`#result`); !strings.HasPrefix(result, `Restored to "two"`) || !strings.Contains(result, "pre-restore") {
		t.Errorf("result %q", result)
	}
	gitDir := storeGitDir(t, state)
	if got, want := diskSums(t, ws), treeSums(t, gitDir, shaOf(t, ws, sock, "c2")); !sameSums(got, want) {
		t.Errorf("after the restore the work tree is\n%v\nwant c2's\n%v", got, want)
	}
	// The page reloads the workspaces once the restore answers: the card's
	// last checkpoint is the pre-restore one.
	do("the pre-restore checkpoint arrives", visible(`#timeline .row[data-id="c5"]`),
		until(`document.getElementById('workspaces').textContent.includes('last c5 ')`))

	// Undo: back to the work tree as it was (c4's files).
	do("undo",
		click(`#undo-btn`),
		until(`document.getElementById('result').textContent.includes('Restored to') && !document.getElementById('result').textContent.includes('"two"')`))
	if got := diskSums(t, ws); !sameSums(got, c4) || !sameSums(got, treeSums(t, gitDir, shaOf(t, ws, sock, "c4"))) {
		t.Errorf("after undo (%q) the work tree is\n%v\nwant\n%v", text(`#result`), got, c4)
	}

	// The timeline with its forks (a pre-restore checkpoint for the restore
	// and one for the undo), c2 chosen and a diff open.
	do("the timeline after restore and undo",
		visible(`#timeline .row[data-id="c6"]`),
		click(`#timeline .row[data-id="c2"]`),
		visible(`#files li[data-path="src/main.go"]`),
		click(`#files li[data-path="src/main.go"] .diff-btn`),
		until(`!document.getElementById('diff-box').hidden && document.getElementById('diff-title').textContent.startsWith('src/main.go (its parent → c2)')`))
	shot("timeline.png")
}

// newBrowser starts headless Chromium at chrome for the test (closed at its
// end) and returns its context.
func newBrowser(t *testing.T, chrome string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome),
		chromedp.NoSandbox,
		chromedp.Headless,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 760),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(cancelBrowser)
	// The first action starts the browser: no timeout on its context.
	if err := chromedp.Do(bctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start %s: %v", chrome, err)
	}
	return bctx
}

// TestPanelBigCheckpoint opens a checkpoint of many files (10,000;
// CAIRN_UI_FILES=100000 for the figure the README gives) in headless
// Chromium: the files are drawn a screenful at a time (the page holds a
// bounded number of rows however many files there are), the folders are
// counted and browsable, and scrolling to the end fetches and draws the
// last file. How long the checkpoint took to draw is logged (a figure, not
// an assertion).
func TestPanelBigCheckpoint(t *testing.T) {
	chrome := browser(t)
	n := 10000
	if v, err := strconv.Atoi(os.Getenv("CAIRN_UI_FILES")); err == nil && v > 0 {
		n = v
	}
	ws := t.TempDir()
	for i := range n {
		p := filepath.Join(ws, fmt.Sprintf("d%02d", i%50), fmt.Sprintf("f%06d.txt", i))
		if i < 50 {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(p, []byte(strconv.Itoa(i)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sock, _ := startDaemonWithin(t, ws, 5*time.Minute) // c1: the baseline, every file added
	panel := startUI(t, sock)
	ctx, cancel := context.WithTimeout(newBrowser(t, chrome), 5*time.Minute)
	defer cancel()
	poll := func(expr string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(2*time.Minute))(ctx, tg)
			return err
		})
	}
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			page, _ := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("body")))
			t.Fatalf("%s: %v\npage:\n%.4000s", what, err, page)
		}
	}
	do("open the panel", chromedp.Navigate(panel), chromedp.WaitVisible(chromedp.CSS(`#timeline .row[data-id="c1"]`)))
	began := time.Now()
	do("the baseline's files", chromedp.Click(chromedp.CSS(`#timeline .row[data-id="c1"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#files li[data-path="d00/f000000.txt"]`)))
	t.Logf("a checkpoint of %d files drawn in %s", n, time.Since(began).Round(time.Millisecond))

	rows, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#files li').length`))
	if err != nil || rows == 0 || rows > 200 {
		t.Errorf("%d file rows in the page for %d files (%v): want a screenful", rows, n, err)
	}
	folders, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#folders`)))
	if err != nil || !strings.Contains(folders, fmt.Sprintf("%s files", humanCount(n))) || !strings.Contains(folders, "d00/") {
		t.Errorf("folders: %q (%v)", folders, err)
	}
	last := fmt.Sprintf("d%02d/f%06d.txt", (n-1)%50, n-1)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { const v = document.getElementById('files-view'); v.scrollTop = v.scrollHeight; return true; })()`)); err != nil {
		t.Fatal(err)
	}
	do("scroll to the last file", poll(fmt.Sprintf(`!!document.querySelector('#files li[data-path=%q]')`, last)))
	do("one folder", chromedp.Click(chromedp.CSS(`#subfolders button[data-folder="d07"]`)),
		poll(`document.getElementById('folders').textContent.includes('d07')`),
		poll(`[...document.querySelectorAll('#files li')].every((li) => li.dataset.path.startsWith('d07/'))`))
}

// humanCount is n as the panel prints it (toLocaleString in en-US).
func humanCount(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
