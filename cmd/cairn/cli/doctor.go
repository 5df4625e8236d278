package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/agent/client"
	"github.com/cairn-dev/cairn/platform"
	"github.com/cairn-dev/cairn/snapshot"
)

func init() {
	register("doctor", "check git, inotify limits, paths, stores, locks and the service", runDoctor)
}

// finding is one line of the doctor's report.
type finding struct {
	Check   string `json:"check"`
	Problem bool   `json:"problem"`
	Message string `json:"message"`
	Fix     string `json:"fix,omitempty"`
}

type doctor struct {
	findings []finding
}

func (d *doctor) ok(check, format string, a ...any) {
	d.findings = append(d.findings, finding{Check: check, Message: fmt.Sprintf(format, a...)})
}

func (d *doctor) bad(check, fix, format string, a ...any) {
	d.findings = append(d.findings, finding{Check: check, Problem: true, Message: fmt.Sprintf(format, a...), Fix: fix})
}

func runDoctor(ctx context.Context, e *env, args []string) error {
	fs := newFlags("doctor", "doctor [--fsck] [--socket P] [--state-dir D] [--json] [WORKSPACE]...", e)
	sock := fs.String("socket", "", "daemon socket (default: $CAIRN_SOCKET or the per-user default)")
	stateDir := fs.String("state-dir", "", "state directory (default: $CAIRN_STATE_DIR or the per-user default)")
	fsck := fs.Bool("fsck", false, "run git fsck on every store (slow on big stores)")
	asJSON := fs.Bool("json", false, "print the findings as JSON")
	dirs, err := parse(fs, args)
	if err != nil {
		return err
	}
	state := *stateDir
	if state == "" {
		state = platform.DefaultStateDir()
	}
	socket := socketPath(*sock, state)
	d := &doctor{}

	gitPath, ver, gitErr := snapshot.FindGit(ctx)
	switch {
	case gitErr != nil:
		d.bad("git", "install git "+snapshot.MinGitVersion.String()+" or newer and put it on PATH", "%v", gitErr)
	default:
		d.ok("git", "git %s at %s (minimum %s)", ver, gitPath, snapshot.MinGitVersion)
	}

	// The daemon, its socket and state.
	watched := 0
	var workspaces []string
	c := client.New(socket)
	running := c.Running(ctx)
	if running {
		if st, err := c.Status(ctx); err == nil {
			for _, w := range st.Workspaces {
				watched += w.Watches
				workspaces = append(workspaces, w.Dir)
			}
			d.ok("daemon", "daemon pid %d answers on %s, watching %d workspaces", st.PID, socket, len(st.Workspaces))
		}
	}
	d.checkPath("socket", socket, running)
	d.checkPath("state", state, true)

	for _, dir := range dirs {
		abs, err := filepath.Abs(dir)
		if err != nil {
			continue
		}
		if !running {
			watched += countDirs(abs)
		}
		workspaces = append(workspaces, abs)
	}
	d.checkInotify(watched)

	// Stores: of the named and watched workspaces, and every plain-layout
	// store in the state directory.
	seen := map[string]bool{}
	for _, ws := range workspaces {
		if err := notAsRootFor(ws); err != nil {
			d.ok("store", "%s: its store is checked by its owner, not as root (sudo -u OWNER cairn doctor %s)", ws, ws)
			continue
		}
		gitDir := filepath.Join(ws, ".hankweave", "checkpoints", ".hankweavecheckpoints")
		if _, err := os.Stat(filepath.Join(gitDir, "HEAD")); err != nil {
			continue
		}
		seen[gitDir] = true
		d.checkStore(ctx, gitPath, ver, gitErr, gitDir, filepath.Join(filepath.Dir(gitDir), "cairn-ledger.jsonl"), *fsck)
	}
	homes, _ := filepath.Glob(filepath.Join(state, "stores", "*"))
	sort.Strings(homes)
	for _, home := range homes {
		gitDir := filepath.Join(home, "store.git")
		if seen[gitDir] {
			continue
		}
		if fi, err := os.Stat(gitDir); err != nil || !fi.IsDir() {
			continue
		}
		d.checkStore(ctx, gitPath, ver, gitErr, gitDir, filepath.Join(home, "ledger.jsonl"), *fsck)
	}
	d.checkLock(filepath.Join(state, "daemon.lock"))
	d.checkService()

	problems := 0
	for _, f := range d.findings {
		if f.Problem {
			problems++
		}
	}
	if *asJSON {
		b, _ := json.MarshalIndent(map[string]any{"problems": problems, "findings": d.findings}, "", "  ")
		fmt.Fprintln(e.stdout, string(b))
	} else {
		for _, f := range d.findings {
			if f.Problem {
				fmt.Fprintf(e.stdout, "FAIL %-8s %s; fix: %s\n", f.Check, f.Message, f.Fix)
			} else {
				fmt.Fprintf(e.stdout, "ok   %-8s %s\n", f.Check, f.Message)
			}
		}
	}
	if problems > 0 {
		return &exitError{ExitDoctor, fmt.Errorf("doctor found %d problem(s)", problems)}
	}
	return nil
}

// checkPath reports a path's mode; a world-writable one is a problem.
func (d *doctor) checkPath(check, p string, mustExist bool) {
	fi, err := os.Stat(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			if check == "socket" {
				d.ok(check, "%s: no socket (no daemon running); start one with `cairn daemon` or `cairn service start`", p)
			} else {
				d.ok(check, "%s: not created yet (the first daemon or checkpoint creates it)", p)
			}
			return
		}
		d.bad(check, "check the path's permissions", "%s: %v", p, err)
		return
	}
	if check == "socket" && !mustExist {
		d.bad(check, "remove it if no daemon runs: rm "+p, "%s exists but no daemon answers (stale socket)", p)
		return
	}
	if fi.IsDir() && fi.Mode().Perm()&0o002 != 0 && fi.Mode()&os.ModeSticky == 0 {
		d.bad(check, "chmod o-w "+p, "%s is world-writable (%s)", p, fi.Mode())
		return
	}
	uid, _, _ := platform.Owner(p)
	d.ok(check, "%s (%s, uid %d)", p, fi.Mode(), uid)
}

// checkInotify compares the kernel's inotify limits with what is watched.
func (d *doctor) checkInotify(watched int) {
	read := func(name string) int {
		b, err := os.ReadFile("/proc/sys/fs/inotify/" + name)
		if err != nil {
			return -1
		}
		n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return n
	}
	watches, instances := read("max_user_watches"), read("max_user_instances")
	if watches < 0 {
		d.ok("inotify", "no inotify limits to read on this system")
		return
	}
	need := watched + watched/4 + 1024 // headroom for new folders and other programs
	if watched > 0 && need > watches {
		want := 524288
		for want < need {
			want *= 2
		}
		d.bad("inotify", fmt.Sprintf("sysctl -w fs.inotify.max_user_watches=%d (and persist it in /etc/sysctl.d/)", want),
			"max_user_watches %d is too low for %d watched folders", watches, watched)
	} else {
		d.ok("inotify", "max_user_watches %d, %d folders watched", watches, watched)
	}
	if instances >= 0 && instances < 8 {
		d.bad("inotify", "sysctl -w fs.inotify.max_user_instances=128", "max_user_instances %d is too low", instances)
	}
}

// countDirs counts the folders a watch of dir would need.
func countDirs(dir string) int {
	n := 0
	_ = filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if de.IsDir() {
			if de.Name() == ".git" || strings.HasSuffix(p, ".hankweavecheckpoints") {
				return filepath.SkipDir
			}
			n++
		}
		return nil
	})
	return n
}

// checkStore checks one store: cheaply (HEAD, main, the ledger parses), or
// with git fsck on request.
func (d *doctor) checkStore(ctx context.Context, gitPath string, ver snapshot.Version, gitErr error, gitDir, ledger string, fsck bool) {
	name := "store"
	if _, err := os.Stat(filepath.Join(gitDir, "HEAD")); err != nil {
		d.bad(name, "restore the store from a backup, or move it aside to start afresh", "%s: no HEAD", gitDir)
		return
	}
	if gitErr == nil {
		g := &snapshot.Git{Path: gitPath, Version: ver, Dir: gitDir, Home: filepath.Dir(gitDir)}
		if _, err := g.Run(ctx, nil, "rev-parse", "--verify", "-q", "refs/heads/main^{commit}"); err != nil {
			d.bad(name, "run `cairn doctor --fsck` and restore the store from a backup", "%s: refs/heads/main does not resolve: %v", gitDir, err)
			return
		}
		if fsck {
			tctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
			_, err := g.Run(tctx, nil, "fsck", "--no-dangling", "--no-progress")
			cancel()
			if err != nil {
				d.bad(name, "restore the store from a backup; the ledger names the checkpoints to re-check", "%s: git fsck: %v", gitDir, err)
				return
			}
		}
	}
	bad, lines := 0, 0
	if f, err := os.Open(ledger); err == nil {
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			line := bytes.TrimSpace(sc.Bytes())
			if len(line) == 0 {
				continue
			}
			lines++
			var r map[string]any
			if json.Unmarshal(line, &r) != nil {
				bad++
			}
		}
		f.Close()
	}
	if bad > 0 {
		d.bad(name, "none needed: cairn skips bad lines and rebuilds records from git; move the ledger aside to rebuild it",
			"%s: %d of %d ledger lines do not parse", ledger, bad, lines)
	} else {
		how := "HEAD, main and the ledger"
		if fsck {
			how = "git fsck, main and the ledger"
		}
		d.ok(name, "%s healthy (%s; %d records)", gitDir, how, lines)
	}
	d.checkLock(filepath.Join(gitDir, "cairn", "lock"))
	d.checkLock(filepath.Join(filepath.Dir(gitDir), ".cairn-init.lock"))
	if fi, err := os.Stat(filepath.Join(gitDir, "cairn", "index.lock")); err == nil && time.Since(fi.ModTime()) > time.Minute {
		d.bad("lock", "none needed: the next seal removes it; or rm "+filepath.Join(gitDir, "cairn", "index.lock"),
			"%s left by an interrupted seal", filepath.Join(gitDir, "cairn", "index.lock"))
	}
}

// checkLock reports a lock file naming a process that no longer runs. The
// lock itself (flock) died with it; the file only misleads.
func (d *doctor) checkLock(path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return
	}
	if platform.ProcessRunning(pid) {
		return
	}
	d.bad("lock", "rm "+path, "stale lock %s: pid %d is not running", path, pid)
}

// checkService reports whether a service is installed (files only).
func (d *doctor) checkService() {
	var found []string
	candidates := []string{"/etc/init.d/cairn", "/etc/systemd/system/cairn.service",
		"/lib/systemd/system/cairn.service", "/usr/lib/systemd/system/cairn.service",
		"/Library/LaunchDaemons/cairn.plist"}
	if home, err := os.UserHomeDir(); err == nil {
		candidates = append(candidates, filepath.Join(home, ".config/systemd/user/cairn.service"),
			filepath.Join(home, "Library/LaunchAgents/cairn.plist"))
	}
	for _, p := range candidates {
		if _, err := os.Stat(p); err == nil {
			found = append(found, p)
		}
	}
	if len(found) == 0 {
		d.ok("service", "not installed (install with `cairn service install`)")
		return
	}
	d.ok("service", "installed: %s", strings.Join(found, ", "))
}
