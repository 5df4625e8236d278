//go:build linux

package agent_test

// Folders others can write, inside and above a workspace (README,
// "Security"), tried as a local attacker with users and a group the tests
// make.

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/platform/testsupport"
)

// foreignRow is a row of a workspace's "foreign" in /v1/status, read from
// the wire (what the CLI and the panel read).
type foreignRow struct {
	Path    string `json:"path"`
	Why     string `json:"why"`
	Above   bool   `json:"above"`
	LeftOut bool   `json:"leftOut"`
}

// foreignNamed is the row for path in the foreign folders a /v1/status body
// names for the workspace ws.
func foreignNamed(t testing.TB, status []byte, ws, path string) (foreignRow, bool) {
	t.Helper()
	var st struct {
		Workspaces []struct {
			Dir     string       `json:"dir"`
			Foreign []foreignRow `json:"foreign"`
		} `json:"workspaces"`
	}
	if err := json.Unmarshal(status, &st); err != nil {
		t.Fatalf("status: %v: %s", err, status)
	}
	for _, w := range st.Workspaces {
		if w.Dir != ws {
			continue
		}
		for _, f := range w.Foreign {
			if f.Path == path {
				return f, true
			}
		}
	}
	return foreignRow{}, false
}

// TestSecurityForeignFolderInRootWorkspace: a root-owned workspace (served
// by the supervisor, as root) holds tmp/, which the attacker can write: mode
// 1777, chowned to the attacker, or group-writable with the attacker in the
// group. While full and incremental seals, whole and path restores and undos
// run, the attacker swaps its folder tmp/x with a link to a root-only folder
// (renameat2 exchange, 5 s). Nothing of the root-only folder lands in the
// store and nothing in it changes; status names tmp/ as left out, and a
// restore to a checkpoint that held tmp/x/old.txt leaves it alone and says so.
//
// How git is kept out of tmp/: the full reconcile's ls-files gets
// `-x /tmp/` (with -o, --exclude-standard and no --directory git does not
// open an excluded folder: `strace -f -e trace=openat,getdents64,newfstatat`
// of `git ls-files -z -t -o -m -d --exclude-standard -x /tmp/` shows no
// openat or stat under tmp/), after the index entries under tmp/ were taken
// out with `update-index --force-remove` (which stats nothing): a pathspec
// `:(exclude)tmp` alone is not enough, since -m still lstats every tracked
// entry under it (strace shows newfstatat of tmp/x/old.txt).
func TestSecurityForeignFolderInRootWorkspace(t *testing.T) {
	for _, shape := range []string{"sticky", "chowned", "group"} {
		t.Run(shape, func(t *testing.T) { foreignFolderRace(t, shape) })
	}
}

func foreignFolderRace(t *testing.T, shape string) {
	alice := newUser(t)
	base := openBase(t)
	ws := filepath.Join(base, "ws")
	tmp := filepath.Join(ws, "tmp")
	write(t, filepath.Join(ws, "a.txt"), "root's a\n")
	write(t, filepath.Join(tmp, "x/old.txt"), "root's old\n")
	secret := fmt.Sprintf("secret-%d.txt", rand.Intn(1_000_000_000))
	rootDir := filepath.Join(base, "rootonly")
	rootOnly(t, rootDir, secret, "root's secret\n")
	// A root file named as the one the workspace tracks under tmp/x: a
	// restore that writes or deletes through the link would reach it.
	rootOnly(t, rootDir, "old.txt", "root's own\n")
	state := filepath.Join(base, "state")
	d := startDaemon(t, state, "--config", configFile(t, fastAutosave), "--watch", ws)
	waitWatching(t, d, ws)
	first, _ := d.workspace(ws)
	baseline := first.Last

	// tmp/ becomes the attacker's to write; x in it is the attacker's own.
	want := ""
	switch shape {
	case "sticky":
		must(t, os.Chmod(tmp, 0o777|os.ModeSticky))
		want = "writable by everyone"
	case "chowned":
		must(t, os.Chown(tmp, alice.uid, alice.gid))
		want = fmt.Sprintf("owned by uid %d", alice.uid)
	case "group":
		g, gid := newGroup(t, alice)
		must(t, os.Chown(tmp, 0, gid))
		must(t, os.Chmod(tmp, 0o775))
		want = fmt.Sprintf("writable by group %s (%s)", g, alice.name)
	}
	chownTree(t, filepath.Join(tmp, "x"), alice)
	link := filepath.Join(tmp, "xlink")
	must(t, os.Symlink(rootDir, link))
	_ = os.Lchown(link, alice.uid, alice.gid)
	named := func() bool {
		f, ok := foreignNamed(t, rawStatus(t, d.socket), ws, tmp)
		return ok && f.LeftOut && f.Why == want
	}
	if !testsupport.Poll(10*time.Second, named) {
		t.Errorf("status does not name %s as left out (%s): %s", tmp, want, rawStatus(t, d.socket))
	}

	// The attacker keeps writing a file named as root's secret in its own
	// folder (through a descriptor, wherever the exchange put the folder):
	// each write is a change an incremental seal reads by its path.
	xfd, err := unix.Open(filepath.Join(tmp, "x"), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	must(t, err)
	defer unix.Close(xfd)
	stopWrites := make(chan struct{})
	var writes sync.WaitGroup
	writes.Add(1)
	go func() {
		defer writes.Done()
		for i := 0; ; i++ {
			select {
			case <-stopWrites:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if fd, err := unix.Openat(xfd, secret, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_NOFOLLOW, 0o644); err == nil {
				_, _ = unix.Write(fd, []byte(fmt.Sprintf("attacker's %d\n", i)))
				_ = unix.Fchown(fd, alice.uid, alice.gid)
				unix.Close(fd)
			}
		}
	}()
	stop := exchangeLoop(filepath.Join(tmp, "x"), link)
	end := time.Now().Add(5 * time.Second)
	rounds := 0
	for i := 0; time.Now().Before(end); i++ {
		// Root's own changes outside tmp/: incremental autosaves (100 ms quiet).
		write(t, filepath.Join(ws, "n.txt"), fmt.Sprintf("round %d\n", i))
		call(t, d.socket, "POST", "/v1/checkpoint", api.CheckpointRequest{Workspace: ws, Label: "full"})
		call(t, d.socket, "POST", "/v1/restore", api.RestoreRequest{Workspace: ws, Target: baseline, Paths: []string{"tmp"}})
		call(t, d.socket, "POST", "/v1/restore", api.RestoreRequest{Workspace: ws, Target: baseline})
		call(t, d.socket, "POST", "/v1/undo", api.WorkspaceRequest{Workspace: ws})
		rounds++
	}
	stop()
	close(stopWrites)
	writes.Wait()
	t.Logf("%d rounds of seals and restores under the exchange loop", rounds)

	if hits := storesHolding(t, secret, state); len(hits) > 0 {
		t.Errorf("a file under tmp/ named as root's secret was sealed into %v", hits)
	}
	if hits := storesHoldingBlob(t, "root's secret\n", state); len(hits) > 0 {
		t.Errorf("root's secret was sealed into %v", hits)
	}
	ents, err := os.ReadDir(rootDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 2 || ents[0].Name() != "old.txt" || ents[1].Name() != secret {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("the root-only folder now holds %v", names)
	}
	for name, body := range map[string]string{secret: "root's secret\n", "old.txt": "root's own\n"} {
		p := filepath.Join(rootDir, name)
		if b, err := os.ReadFile(p); err != nil || string(b) != body {
			t.Errorf("root's %s: %q %v", name, b, err)
		}
		if fi, err := os.Lstat(p); err != nil || fi.Sys().(*syscall.Stat_t).Uid != 0 || fi.Mode().Perm() != 0o600 {
			t.Errorf("root's %s changed owner or mode: %v %v", name, fi, err)
		}
	}
	// The baseline holds tmp/x/old.txt: a restore to it leaves it alone, and says so.
	code, out := call(t, d.socket, "POST", "/v1/restore", api.RestoreRequest{Workspace: ws, Target: baseline})
	if code != 200 {
		t.Fatalf("restore: %d %v", code, out)
	}
	left, _ := out["leftOut"].([]any)
	found := false
	for _, l := range left {
		if m, _ := l.(map[string]any); m["path"] == "tmp/x/old.txt" {
			found = true
		}
	}
	if !found {
		t.Errorf("the restore does not report tmp/x/old.txt left alone: %v", out)
	}
	if w, _ := d.workspace(ws); w.State != "watching" {
		t.Errorf("workspace %s: %s", w.State, w.Error)
	}
}

// TestSecurityRootWorkspaceUnderWritableFolder: a root-owned workspace
// inside a folder everyone may write and that is not sticky (anyone could
// rename it away and put their own in its place between two looks) is
// refused, as sshd's StrictModes would; under a sticky 1777 folder (like
// /tmp) it is served.
func TestSecurityRootWorkspaceUnderWritableFolder(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	base := openBase(t)
	open, sticky := filepath.Join(base, "open"), filepath.Join(base, "sticky")
	wsOpen, wsSticky := filepath.Join(open, "ws"), filepath.Join(sticky, "ws")
	write(t, filepath.Join(wsOpen, "a.txt"), "a\n")
	write(t, filepath.Join(wsSticky, "a.txt"), "a\n")
	must(t, os.Chmod(open, 0o777))
	must(t, os.Chmod(sticky, 0o777|os.ModeSticky))
	d := startDaemon(t, filepath.Join(base, "state"), "--watch", wsOpen, "--watch", wsSticky)
	waitWatching(t, d, wsSticky)
	st := d.status()
	i := slices.IndexFunc(st.Refused, func(r api.RefusedWorkspace) bool { return r.Dir == wsOpen })
	if i < 0 {
		t.Fatalf("%s is not refused: %+v", wsOpen, st.Refused)
	}
	if r := st.Refused[i].Reason; !strings.Contains(r, open+" is writable by everyone") || !strings.Contains(r, "not sticky") {
		t.Errorf("reason: %s", r)
	}
	if _, ok := d.workspace(wsOpen); ok {
		t.Errorf("%s is served as root", wsOpen)
	}
}

// TestSecurityForeignFolderInUserWorkspace: alice's workspace holds a folder
// every user may write. Her worker names it in her status (a warning: she
// chose to share it) and leaves nothing out.
func TestSecurityForeignFolderInUserWorkspace(t *testing.T) {
	alice := newUser(t)
	base := openBase(t)
	ws := filepath.Join(base, "ws")
	ownedDir(t, alice, ws, map[string]string{"a.txt": "a\n", "shared/s.txt": "s\n"})
	shared := filepath.Join(ws, "shared")
	must(t, os.Chmod(shared, 0o777))
	state := filepath.Join(base, "state")
	d := startDaemon(t, state, "--watch", ws)
	waitWatching(t, d, ws)
	var f foreignRow
	waitFor(t, 15*time.Second, "alice's status names shared/", func() bool {
		code, body := httpAs(t, alice, d.socket, "GET", "/v1/status", nil)
		if code != 200 {
			t.Fatalf("status as alice: %d %s", code, body)
		}
		var ok bool
		f, ok = foreignNamed(t, body, ws, shared)
		return ok
	})
	if f.Why != "writable by everyone" || f.LeftOut || f.Above {
		t.Errorf("row: %+v", f)
	}
	if hits := storesHolding(t, "s.txt", state); len(hits) == 0 {
		t.Errorf("shared/s.txt is not in alice's checkpoints")
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// storesHoldingBlob lists the stores under root holding a blob with content.
func storesHoldingBlob(t *testing.T, content, root string) []string {
	t.Helper()
	cmd := exec.Command("git", "hash-object", "--stdin")
	cmd.Stdin = strings.NewReader(content)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	sha := strings.TrimSpace(string(out))
	var hits []string
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() || filepath.Ext(p) != ".git" {
			return nil
		}
		c := exec.Command("git", "cat-file", "-e", sha)
		c.Env = []string{"GIT_DIR=" + p, "GIT_CONFIG_NOSYSTEM=1", "HOME=/", "PATH=" + os.Getenv("PATH")}
		if c.Run() == nil {
			hits = append(hits, p)
		}
		return filepath.SkipDir
	})
	return hits
}
