//go:build linux

package agent_test

// Root runs git only in repositories no one else can change, and never puts
// a credential on a command line (README.md, "Security"): tried as a member
// of a group that shares a root-owned repository would.

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/platform/testsupport"
)

// asMember is a command that runs as u with gid among its groups.
func asMember(u testUser, gid int, name string, args ...string) *exec.Cmd {
	cmd := asUser(u, name, args...)
	cmd.SysProcAttr.Credential.Groups = []uint32{uint32(gid)}
	return cmd
}

// mustRun runs cmd and fails the test with its output if it fails.
func mustRun(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", cmd.Args, err, out)
	}
}

// markerScript makes, in a folder of u's, a script that appends the uid it
// runs as to a marker file, then passes its input through; it returns the
// script and the marker.
func markerScript(t *testing.T, base string, u testUser) (script, marker string) {
	t.Helper()
	dir := filepath.Join(base, "attacker")
	marker = filepath.Join(dir, "ran-as")
	script = filepath.Join(dir, "payload.sh")
	write(t, script, fmt.Sprintf("#!/bin/sh\nid -u >> %s\nexec cat\n", marker))
	if err := os.Chmod(script, 0o755); err != nil {
		t.Fatal(err)
	}
	chownTree(t, dir, u)
	return script, marker
}

// ranAs is what the marker says: the uids the attacker's code ran as.
func ranAs(marker string) string {
	b, _ := os.ReadFile(marker)
	return strings.Join(strings.Fields(string(b)), ",")
}

// TestSecurityRootAutodevSharedRepo: a root-owned repository shared with a
// group (git init --shared=group) is watched by a root daemon in the autodev
// layout. A group member sets a clean filter in .git/config and assigns it to
// every file: the daemon never runs git there (no filter runs as root), and
// status names the path, why, and the fix. Once the repository is root's
// alone again, checkpoints begin.
func TestSecurityRootAutodevSharedRepo(t *testing.T) {
	mallory := newUser(t)
	group, gid := newGroup(t, mallory)
	base := openBase(t)
	dir := filepath.Join(base, "shop")
	write(t, filepath.Join(dir, "a.txt"), "one\n")
	rootGit := func(args ...string) {
		t.Helper()
		mustRun(t, exec.Command("git", append([]string{"-C", dir, "-c", "user.name=Root", "-c", "user.email=r@example.com",
			"-c", "init.defaultBranch=main"}, args...)...))
	}
	rootGit("init", "-q", "--shared=group")
	rootGit("add", "-A")
	rootGit("commit", "-q", "-m", "root: first")
	mustRun(t, exec.Command("chgrp", "-R", group, filepath.Join(dir, ".git")))
	script, marker := markerScript(t, base, mallory)

	// What the group member can do, and does: a filter every file goes through.
	mustRun(t, asMember(mallory, gid, "git", "config", "--file", filepath.Join(dir, ".git", "config"), "filter.x.clean", script))
	mustRun(t, asMember(mallory, gid, "sh", "-c", "printf '* filter=x\\n' > "+filepath.Join(dir, ".git", "info", "attributes")))
	write(t, filepath.Join(dir, "a.txt"), "two\n") // a dirty tree: a baseline is due

	cfg := configFile(t, fmt.Sprintf("[[watch]]\npath = %q\nlayout = \"autodev\"\n", dir))
	d := startDaemon(t, openBase(t), "--config", cfg)
	var ws, _ = d.workspace(dir)
	waitFor(t, 30*time.Second, "the refusal in status (or the attacker's filter run)", func() bool {
		ws, _ = d.workspace(dir)
		return ranAs(marker) != "" || strings.Contains(ws.Error, "refused")
	})
	if got := ranAs(marker); got != "" {
		t.Fatalf("the group member's filter ran as uid %s", got)
	}
	want := filepath.Join(dir, ".git") + " is group-writable (group " + group + ")"
	if !strings.Contains(ws.Error, want) || !strings.Contains(ws.Error, "fix: chmod g-w "+filepath.Join(dir, ".git")) || ws.State != "failed" {
		t.Errorf("status %s: %q, want it to say %q and the fix", ws.State, ws.Error, want)
	}
	// A checkpoint asked for is refused with the same words; git still never runs.
	out, errOut, code := cairnRun(t, "checkpoint", dir, "--label", "asked", "--socket", d.socket)
	if code == 0 || !strings.Contains(out+errOut, want) {
		t.Errorf("checkpoint (exit %d): %s%s", code, out, errOut)
	}
	if got := ranAs(marker); got != "" {
		t.Fatalf("the group member's filter ran as uid %s", got)
	}
	if n := strings.Count(d.log.String(), want); n != 1 {
		t.Errorf("the refusal is logged %d times, want once", n)
	}

	// Root takes the repository back: checkpoints begin, without the filter.
	mustRun(t, exec.Command("git", "config", "--file", filepath.Join(dir, ".git", "config"), "--unset", "filter.x.clean"))
	mustRun(t, exec.Command("chown", "-R", "root:root", filepath.Join(dir, ".git")))
	mustRun(t, exec.Command("chmod", "-R", "go-w", filepath.Join(dir, ".git")))
	waitFor(t, 30*time.Second, "the baseline once the repository is root's alone", func() bool {
		ws, _ = d.workspace(dir)
		return ws.Last == "c1" && ws.Error == "" && ws.State == "watching"
	})
	if got := ranAs(marker); got != "" {
		t.Fatalf("the group member's filter ran as uid %s", got)
	}
}

// TestSecurityRootReplicationLocalRemote: a root daemon replicates a root
// workspace to a local remote that someone else can change: its push would
// run the remote's hooks as root. The push is refused, with the path and
// the fix in status and the log, and the hook never runs.
func TestSecurityRootReplicationLocalRemote(t *testing.T) {
	mallory := newUser(t)
	group, gid := newGroup(t, mallory)
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, remote, hook string) // makes remote, with hook as its post-receive
		want  func(remote string) string
	}{
		{"root's, shared with a group", func(t *testing.T, remote, hook string) {
			mustRun(t, exec.Command("git", "init", "-q", "--bare", "--shared=group", remote))
			mustRun(t, exec.Command("chgrp", "-R", group, remote))
			// The member plants the hook, as the group's write access lets them.
			mustRun(t, asMember(mallory, gid, "sh", "-c", fmt.Sprintf("cp %s %s/hooks/post-receive", hook, remote)))
		}, func(remote string) string { return remote + " is group-writable (group " + group + ")" }},
		{"the attacker's", func(t *testing.T, remote, hook string) {
			mustRun(t, asUser(mallory, "git", "init", "-q", "--bare", remote))
			mustRun(t, asUser(mallory, "cp", hook, remote+"/hooks/post-receive"))
		}, func(remote string) string { return remote + " belongs to uid " + strconv.Itoa(mallory.uid) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := openBase(t)
			script, marker := markerScript(t, base, mallory)
			remotes := filepath.Join(base, "remotes")
			if err := os.Mkdir(remotes, 0o777|os.ModeSticky); err != nil { // a shared place, as /srv/git might be
				t.Fatal(err)
			}
			if err := os.Chmod(remotes, 0o777|os.ModeSticky); err != nil {
				t.Fatal(err)
			}
			remote := filepath.Join(remotes, "fleet.git")
			tc.setup(t, remote, script)
			ws := replWorkspace(t, "shop", 3)
			for _, url := range []string{"file://" + remote, remote} {
				d := startDaemon(t, "", "--config", replConfig(t, url, "h1", "100ms", ""), "--watch", ws)
				var r = replOf(t, d, ws)
				waitFor(t, 30*time.Second, "a refused push (or the hook run)", func() bool {
					r = replOf(t, d, ws)
					return ranAs(marker) != "" || (r != nil && r.LastError != "")
				})
				if got := ranAs(marker); got != "" {
					t.Fatalf("%s: the remote's hook ran as uid %s", url, got)
				}
				want := tc.want(remote)
				if r.State != "failing" || !strings.Contains(r.LastError, want) || !strings.Contains(r.LastError, "fix: ") {
					t.Errorf("%s: replication %s: %q, want it to say %q and the fix", url, r.State, r.LastError, want)
				}
				// The log line reaches the test through the daemon's stderr pipe: poll for it.
				if !testsupport.Poll(10*time.Second, func() bool { return strings.Contains(d.log.String(), want) }) {
					t.Errorf("%s: the log does not say %q", url, want)
				}
				d.stop(syscall.SIGTERM)
			}
		})
	}
}

// TestSecurityRemotePasswordNeverOnCommandLine: replication to an https
// remote whose URL holds a password. While cairn's git waits on the remote
// (a listener that holds each connection), no process's command line, which
// every local user can read, holds the password; nor do the log and status
// once the remote fails.
func TestSecurityRemotePasswordNeverOnCommandLine(t *testing.T) {
	if _, err := os.Stat("/proc/self/cmdline"); err != nil {
		t.Skip("needs /proc")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var once sync.Once
	let := func() { once.Do(func() { close(release) }) }
	t.Cleanup(func() { let(); l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { <-release; c.Close() }()
		}
	}()
	addr := l.Addr().String()
	const secret = "s3cret"
	remote := "https://fleet:" + secret + "@" + addr + "/x.git"
	ws := replWorkspace(t, "shop", 3)
	d := startDaemon(t, "", "--config", replConfig(t, remote, "h1", "100ms", ""), "--watch", ws)

	seen := 0
	// Not testsupport.Poll: a git reaching the remote lives briefly, so the
	// scan of /proc looks every 20 ms rather than ever less often.
	for deadline := time.Now().Add(30 * time.Second); seen == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			if err != nil {
				continue
			}
			cmd := strings.ReplaceAll(string(b), "\x00", " ")
			if strings.Contains(cmd, secret) {
				t.Fatalf("process %s shows the password: %s", e.Name(), cmd)
			}
			if strings.Contains(cmd, addr) {
				seen++
			}
		}
	}
	if seen == 0 {
		t.Fatal("no git reaching the remote was seen in 30 s")
	}
	let() // the remote fails: its error goes to status and the log
	var r *api.ReplicationStatus
	waitFor(t, 30*time.Second, "a failing replication", func() bool {
		r = replOf(t, d, ws)
		return r != nil && r.LastError != ""
	})
	out, _ := runCairn(t, "status", "--json", "--socket", d.socket)
	for what, s := range map[string]string{"status": out, "the log": d.log.String(), "the last error": r.LastError} {
		if strings.Contains(s, secret) {
			t.Errorf("%s shows the password:\n%s", what, s)
		}
	}
}
