//go:build linux

package cli_test

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"golang.org/x/sys/unix"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/client"
	"github.com/cairn-dev/cairn/platform/printable"
	"github.com/cairn-dev/cairn/platform/testsupport"
)

// What a local user names things to attack whoever reads cairn's output:
// an OSC that retitles the window (ending in BEL), a clear-screen CSI, a
// right-to-left override, a C1 CSI, a carriage return and a newline that
// starts a forged line.
const (
	evilDir   = "ws\x1b]0;pwned\x07\x1b[2J\u202egpj.exe\u0085\nfake line"
	evilLabel = "label\x1b[31mred\u202e\r\nfake: sealed ok"
	evilFile  = "f\x1b]0;x\x07\u2066\x1b[2J.txt"
	evilFifo  = "fifo\u202e\x1b[1A\x9b"
)

// forgedLine is a line that begins with what followed a raw newline.
var forgedLine = regexp.MustCompile(`(?m)^fake`)

// sgr is a colour sequence cairn's own console log paints with.
var sgr = regexp.MustCompile("\x1b\\[[0-9;]*m")

// assertPrintable fails when out holds a raw terminal control, bidi control
// or a line forged by a raw newline.
func assertPrintable(t *testing.T, what, out string) {
	t.Helper()
	for _, bad := range []string{"\x1b", "\x07", "\r", "\u202e", "\u2066", "\u0085", "\u009b"} {
		if strings.Contains(out, bad) {
			t.Errorf("%s prints %q raw:\n%s", what, bad, strconv.Quote(out))
		}
	}
	if forgedLine.MatchString(out) {
		t.Errorf("%s prints a raw newline from a name (a forged line):\n%s", what, out)
	}
}

// openPTY opens a pseudo-terminal without output processing (no CR added
// to newlines): the daemon's stderr is a terminal, as when run by hand.
func openPTY(t *testing.T) (master, tty *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	fd := int(m.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	tio, err := unix.IoctlGetTermios(int(s.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	tio.Oflag &^= unix.OPOST
	if err := unix.IoctlSetTermios(int(s.Fd()), unix.TCSETS, tio); err != nil {
		t.Fatal(err)
	}
	return m, s
}

// TestUserTextPrintedEscaped: a workspace folder, a label, a file and a
// FIFO named with terminal escapes, bidi overrides and newlines are printed
// escaped by every human-readable output (status, events, list, log, show,
// diff, verify, a restore plan, an error quoting a path) and by the
// daemon's console log on a terminal; the JSON outputs still carry the exact
// names.
func TestUserTextPrintedEscaped(t *testing.T) {
	parent, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(parent, evilDir)
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	put := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(ws, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	put("a.txt", "a\n")
	put(evilFile, "one\x1b[2J\n")

	state := t.TempDir()
	sock := filepath.Join(state, "cairn.sock")
	cfg := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(cfg, []byte("[defaults]\nautosave_quiet = \"100ms\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	text := startCairn(t, nil, "events", "--socket", sock, "--wait")
	asJSON := startCairn(t, nil, "events", "--socket", sock, "--wait", "--json")
	for _, p := range []*evProc{text, asJSON} {
		p.waitErr(t, "waiting for a daemon")
	}

	master, tty := openPTY(t)
	defer master.Close()
	console := &evBuffer{}
	go func() { _, _ = io.Copy(console, master) }() // ends when the master closes
	// The folder is found by a glob, as one a user makes under a watched root.
	d := exec.Command(cairnBin, "daemon", "--config", cfg, "--watch", filepath.Join(parent, "*"), "--state-dir", state, "--socket", sock)
	d.Env = append(os.Environ(), "CAIRN_STATE_DIR="+state, "CAIRN_LOG_LEVEL=info")
	d.Stdout, d.Stderr = tty, tty
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	t.Cleanup(func() {
		_ = d.Process.Signal(syscall.SIGTERM)
		_ = d.Wait()
		if t.Failed() {
			t.Logf("daemon's console:\n%s", strconv.Quote(console.String()))
		}
	})
	c := client.New(sock)
	defer c.Close()
	testsupport.WaitFor(t, 30*time.Second, "the daemon's baseline of the workspace", func() bool {
		st, err := c.Status(context.Background())
		return err == nil && len(st.Workspaces) == 1 && st.Workspaces[0].Last != ""
	})
	for _, p := range []*evProc{text, asJSON} {
		p.waitErr(t, "cairn: connected\n")
	}
	// A FIFO is not checkpointed: the autosave that sees it is partial,
	// and the daemon logs the path it names.
	if err := syscall.Mkfifo(filepath.Join(ws, evilFifo), 0o644); err != nil {
		t.Fatal(err)
	}
	testsupport.WaitFor(t, 30*time.Second, "the daemon to log the partial autosave naming the FIFO", func() bool {
		return strings.Contains(console.String(), "issues=")
	})

	put(evilFile, "two\x1b]0;owned\x07\n")
	put("a.txt", "b\n")
	out, errOut, code := cairn(t, nil, "checkpoint", ws, "--label", evilLabel, "--socket", sock)
	if code != 0 && code != 4 { // 4: partial, the FIFO
		t.Fatalf("checkpoint: exit %d\n%s%s", code, out, errOut)
	}
	assertPrintable(t, "checkpoint", out+errOut)
	recs := func() []record {
		var rs []record
		if err := json.Unmarshal([]byte(mustCairn(t, nil, "list", ws, "--json", "--socket", sock)), &rs); err != nil {
			t.Fatalf("list --json: %v", err)
		}
		return rs
	}()
	// The ledger keeps a label's C0 controls as spaces (docs/cairn-formats.md);
	// the bidi override is kept, and JSON carries it exactly.
	stored := strings.Map(func(r rune) rune {
		if r < 0x20 {
			return ' '
		}
		return r
	}, evilLabel)
	if len(recs) < 2 || recs[0].Label != stored {
		t.Fatalf("list --json does not carry the exact label %q: %+v", stored, recs)
	}
	id, first := recs[0].ID, recs[len(recs)-1].ID

	// The events: one line for people, JSON carrying the exact names.
	text.waitLine(t, "the text event of "+id, func(l string) bool { return strings.Contains(l, "sealed "+id) })
	asJSON.waitLine(t, "the JSON event of "+id, func(l string) bool {
		var ev struct {
			Type, Workspace string
			Data            record
		}
		return json.Unmarshal([]byte(l), &ev) == nil && ev.Type == api.EvCheckpointSealed &&
			ev.Workspace == ws && ev.Data.ID == id && ev.Data.Label == stored
	})
	assertPrintable(t, "events", text.stdout.String())
	assertPrintable(t, "events --json", asJSON.stdout.String())
	if !strings.Contains(text.stdout.String(), printable.String(ws)) {
		t.Errorf("events does not name the workspace escaped (%s):\n%s", printable.String(ws), text.stdout)
	}

	// status: the folder's name escaped; --json the exact name.
	st := mustCairn(t, nil, "status", "--socket", sock)
	assertPrintable(t, "status", st)
	if !strings.Contains(st, printable.String(ws)) {
		t.Errorf("status does not name the workspace escaped (%s):\n%s", printable.String(ws), st)
	}
	var sj api.Status
	stJSON := mustCairn(t, nil, "status", "--json", "--socket", sock)
	assertPrintable(t, "status --json", stJSON)
	if err := json.Unmarshal([]byte(stJSON), &sj); err != nil || len(sj.Workspaces) != 1 || sj.Workspaces[0].Dir != ws {
		t.Errorf("status --json does not carry the exact folder name (%v):\n%s", err, stJSON)
	}

	for _, args := range [][]string{
		{"list", ws},
		{"list", ws, "--json"},
		{"log", ws},
		{"log", ws, "--json"},
		{"show", ws, id},
		{"diff", ws, first, id},
		{"verify", ws},
		{"restore", ws, first, "--dry-run"},
		{"status", "--socket", filepath.Join(ws, "no.sock")}, // an error quoting a path
	} {
		if args[0] != "status" {
			args = append(args, "--socket", sock)
		}
		out, errOut, code := cairn(t, nil, args...)
		if code != 0 && code != 1 && code != 4 {
			t.Errorf("cairn %v: exit %d\n%s%s", args, code, out, errOut)
		}
		assertPrintable(t, "cairn "+strings.Join(args[:1], " "), out+errOut)
		if args[0] == "list" && !slices.Contains(args, "--json") && !strings.Contains(out, printable.String(stored)) {
			t.Errorf("list does not show the label escaped:\n%s", out)
		}
	}

	// The console log on a terminal: zerolog's colours, nothing else raw.
	testsupport.WaitFor(t, 30*time.Second, "the daemon to log checkpoint "+id, func() bool {
		return strings.Contains(sgr.ReplaceAllString(console.String(), ""), "id="+id)
	})
	assertPrintable(t, "the daemon's console log", sgr.ReplaceAllString(console.String(), ""))
}

// TestPanelShowsNamesEscaped: the panel, in a real browser, shows a
// workspace folder, a label, a file path and a diff from a user's tree with
// their controls as visible escapes, the same ones the CLI prints; no raw
// terminal or bidi control reaches the page's text or its tooltips.
func TestPanelShowsNamesEscaped(t *testing.T) {
	chrome := browser(t)
	parent, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(parent, evilDir)
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	put := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(ws, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	put("a.txt", "a\n")
	put(evilFile, "one\n")
	state := t.TempDir()
	sock := filepath.Join(state, "cairn.sock")
	cfg := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(cfg, []byte("[defaults]\nautosave = false\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := startCairn(t, []string{"CAIRN_STATE_DIR=" + state}, "daemon", "--config", cfg, "--watch", filepath.Join(parent, "*"),
		"--state-dir", state, "--socket", sock)
	c := client.New(sock)
	defer c.Close()
	testsupport.WaitFor(t, 30*time.Second, "the daemon's baseline of the workspace", func() bool {
		select {
		case <-d.exited:
			t.Fatalf("daemon exited:\n%s", d.stderr)
		default:
		}
		st, err := c.Status(context.Background())
		return err == nil && len(st.Workspaces) == 1 && st.Workspaces[0].Last != ""
	})
	put(evilFile, "two\x1b]0;owned\x07\u202e\n")
	if out, errOut, code := cairn(t, nil, "checkpoint", ws, "--label", evilLabel, "--socket", sock); code != 0 {
		t.Fatalf("checkpoint: exit %d\n%s%s", code, out, errOut)
	}

	panel := startUI(t, sock)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chrome), chromedp.NoSandbox, chromedp.Headless,
		chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.UserDataDir(t.TempDir()))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	if err := chromedp.Do(bctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start %s: %v", chrome, err)
	}
	ctx, cancel := context.WithTimeout(bctx, 120*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx,
		chromedp.Navigate(panel),
		chromedp.WaitVisible(chromedp.CSS(`#timeline .row[data-id="c2"]`)),
		chromedp.Click(chromedp.CSS(`#timeline .row[data-id="c2"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#files li .diff-btn`)),
		chromedp.Click(chromedp.CSS(`#files li .diff-btn`)),
		chromedp.WaitVisible(chromedp.CSS(`#diff-box`)),
	); err != nil {
		page, _ := chromedp.Run(bctx, chromedp.OuterHTML(chromedp.CSS("body")))
		t.Fatalf("the panel: %v\n%s", err, page)
	}
	page, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.textContent + '\n' +
		[...document.querySelectorAll('[title],[aria-label]')].map((e) => e.title + ' ' + (e.getAttribute('aria-label') || '')).join('\n')`))
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"\x1b", "\x07", "\r", "\u202e", "\u2066", "\u0085"} {
		if strings.Contains(page, bad) {
			t.Errorf("the panel shows %q raw:\n%s", bad, strconv.Quote(page))
		}
	}
	for _, want := range []string{printable.String(ws), printable.String(evilFile), `two\x1b]0;owned\a\u202e`} {
		if !strings.Contains(page, want) {
			t.Errorf("the panel does not show %s:\n%s", want, page)
		}
	}
	dir, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS(`.ws-dir`)))
	if err != nil || dir != printable.String(ws) {
		t.Errorf("the panel shows the folder as %q (%v), the CLI as %q", dir, err, printable.String(ws))
	}
}
