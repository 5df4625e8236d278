package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/client"
	"github.com/cairn-dev/cairn/agent/config"
	"github.com/cairn-dev/cairn/platform"
	"github.com/cairn-dev/cairn/platform/printable"
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
	// Repaired says what --repair did about a problem found (Problem is
	// then false).
	Repaired string `json:"repaired,omitempty"`
}

type doctor struct {
	findings []finding
	repair   bool // --repair: make the repairs store findings name
}

func (d *doctor) ok(check, format string, a ...any) {
	d.findings = append(d.findings, finding{Check: check, Message: fmt.Sprintf(format, a...)})
}

func (d *doctor) bad(check, fix, format string, a ...any) {
	d.findings = append(d.findings, finding{Check: check, Problem: true, Message: fmt.Sprintf(format, a...), Fix: fix})
}

func runDoctor(ctx context.Context, e *env, args []string) error {
	fs := newFlags("doctor", "doctor [--fsck [--repair]] [--socket P] [--state-dir D] [--json] [WORKSPACE]...", e)
	var df daemonFlags
	df.register(fs)
	fsck := fs.Bool("fsck", false, "run git fsck on every store and read every loose object (slow on big stores)")
	repair := fs.Bool("repair", false, "make the repair each finding names (implies --fsck)")
	asJSON := fs.Bool("json", false, "print the findings as JSON")
	dirs, err := parse(fs, args)
	if err != nil {
		return err
	}
	*fsck = *fsck || *repair
	// Without a daemon to ask, the state and socket are the ones a daemon
	// started here would use: the flag, else the mode's config, else the default.
	cfg, _ := config.Load(platform.DefaultPaths().Config)
	state := df.stateDir
	if state == "" && cfg != nil && cfg.StateDir != "" {
		state = cfg.StateDir
	}
	if state == "" {
		state = platform.DefaultStateDir()
	}
	socket := df.sock
	if socket == "" && cfg != nil && cfg.Socket != "" {
		socket = cfg.Socket
	}
	socket = socketPath(socket, state)
	d := &doctor{repair: *repair}

	gitPath, ver, gitErr := snapshot.FindGit(ctx)
	switch {
	case gitErr != nil:
		d.bad("git", "install git "+snapshot.MinGitVersion.String()+" or newer and put it on PATH", "%v", gitErr)
	default:
		d.ok("git", "git %s at %s (minimum %s)", ver, gitPath, snapshot.MinGitVersion)
	}

	// The daemon, its socket and state.
	var need inotifyNeed
	var workspaces []string
	stores := map[string]string{} // workspace → its store's GIT_DIR, as the daemon reports it
	c := client.New(socket)
	running := c.Running(ctx)
	if running {
		if st, err := c.Status(ctx); err == nil {
			if st.StateDir != "" { // the daemon's own; a user asking a root daemon is not told it
				state = st.StateDir
			}
			if st.Config != "" {
				cfg, _ = config.Load(st.Config)
			}
			need.daemon = true
			for _, w := range st.Workspaces {
				workspaces = append(workspaces, w.Dir)
				need.add(d, cfg, w)
				if w.Store != "" {
					stores[w.Dir] = w.Store
				}
			}
			d.ok("daemon", "daemon pid %d answers on %s, watching %s, state in %s", st.PID, socket, plural(len(st.Workspaces), "workspace", ""), orDash(st.StateDir))
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
			need.add(d, cfg, api.WorkspaceStatus{Dir: abs})
		}
		workspaces = append(workspaces, abs)
	}
	d.checkInotify(need)

	// Stores: of the named and watched workspaces, and every plain-layout
	// store in the state directory. As root, users' stores (their workspaces',
	// and everything under <state>/users/) are left to their owners.
	seen := map[string]bool{}
	for _, ws := range workspaces {
		if err := notAsRootFor(ws); err != nil {
			d.ok("store", "%s: its store is checked by its owner, not as root (sudo -u OWNER cairn doctor %s)", ws, ws)
			continue
		}
		gitDir := filepath.Join(ws, ".hankweave", "checkpoints", ".hankweavecheckpoints")
		ledger := filepath.Join(filepath.Dir(gitDir), "cairn-ledger.jsonl")
		if s, ok := stores[ws]; ok {
			gitDir, ledger = s, filepath.Join(filepath.Dir(s), "ledger.jsonl")
			if filepath.Base(s) == ".hankweavecheckpoints" {
				ledger = filepath.Join(filepath.Dir(s), "cairn-ledger.jsonl")
			}
		}
		if seen[gitDir] || os.Geteuid() == 0 && within(gitDir, filepath.Join(state, "users")) {
			continue
		}
		if _, err := os.Stat(filepath.Join(gitDir, "HEAD")); err != nil {
			continue
		}
		seen[gitDir] = true
		d.checkStore(ctx, gitPath, ver, gitErr, gitDir, ledger, *fsck)
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
	if _, err := os.Lstat(filepath.Join(state, "users")); err == nil && os.Geteuid() == 0 {
		d.ok("store", "%s: users' stores are checked by their owners, not as root (sudo -u USER cairn doctor)", filepath.Join(state, "users"))
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
		fmt.Fprintln(e.stdout, string(printable.JSON(b)))
	} else {
		p := printable.String // findings quote workspaces, paths and git's words
		for _, f := range d.findings {
			if f.Problem {
				fmt.Fprintf(e.stdout, "FAIL %-8s %s; fix: %s\n", f.Check, p(f.Message), p(f.Fix))
			} else if f.Repaired != "" {
				fmt.Fprintf(e.stdout, "fixed %-7s %s; did: %s\n", f.Check, p(f.Message), p(f.Repaired))
			} else {
				fmt.Fprintf(e.stdout, "ok   %-8s %s\n", f.Check, p(f.Message))
			}
		}
	}
	if problems > 0 {
		return &exitError{ExitDoctor, fmt.Errorf("doctor found %s", plural(problems, "problem", ""))}
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

// inotifyNeed adds up the folders the daemon's watches need: every folder
// of each workspace (what the watch covers), not just those watched now. A
// degraded watch has hit the limit and holds fewer than it needs.
type inotifyNeed struct {
	folders    int
	watched    int
	uncounted  int // workspaces of other users, not walked as root: their current watches are used
	workspaces int
	daemon     bool // the counts come with a running daemon's current watches
}

func (n *inotifyNeed) add(d *doctor, cfg *config.Config, w api.WorkspaceStatus) {
	n.workspaces++
	n.watched += w.Watches
	if w.State == "degraded" {
		d.bad("inotify", "raise the limit the error names (e.g. sysctl -w fs.inotify.max_user_watches=1048576, persisted in /etc/sysctl.d/); the daemon retries the whole watch",
			"%s: the daemon could not watch every folder (%d watched): %s", w.Dir, w.Watches, w.Error)
	}
	// Root does not walk a user's folders itself (README "Security").
	if notAsRootFor(w.Dir) != nil {
		n.uncounted++
		n.folders += w.Watches
		return
	}
	n.folders += max(watchFolders(w.Dir, w.WorkTree, w.Layout, excludesFor(cfg, w.Dir)), w.Watches)
}

// checkInotify compares the kernel's inotify limits with what the watches need.
func (d *doctor) checkInotify(n inotifyNeed) {
	read := func(name string) int {
		b, err := os.ReadFile("/proc/sys/fs/inotify/" + name)
		if err != nil {
			return -1
		}
		v, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return v
	}
	watches, instances := read("max_user_watches"), read("max_user_instances")
	if watches < 0 {
		d.ok("inotify", "no inotify limits to read on this system")
		return
	}
	what := fmt.Sprintf("%s in %s", plural(n.folders, "folder", ""), plural(n.workspaces, "workspace", ""))
	if n.daemon {
		what += fmt.Sprintf(" (%d watched now)", n.watched)
	}
	if n.uncounted > 0 {
		what += fmt.Sprintf("; %s of other users counted by their current watches, not walked as root", plural(n.uncounted, "workspace", ""))
	}
	need := n.folders + n.folders/4 + 1024 // headroom for new folders and other programs
	if n.folders > 0 && need > watches {
		want := 524288
		for want < need {
			want *= 2
		}
		d.bad("inotify", fmt.Sprintf("sysctl -w fs.inotify.max_user_watches=%d (and persist it in /etc/sysctl.d/)", want),
			"max_user_watches %d is too low for %s", watches, what)
	} else {
		d.ok("inotify", "max_user_watches %d, %s", watches, what)
	}
	if instances >= 0 && instances < 8 {
		d.bad("inotify", "sysctl -w fs.inotify.max_user_instances=128", "max_user_instances %d is too low", instances)
	}
}

// excludesFor are the configured excludes of the workspace dir: those of
// the first [[watch]] whose path matches it (as discovery takes them), else
// the defaults'.
func excludesFor(cfg *config.Config, dir string) []string {
	if cfg == nil {
		return nil
	}
	for _, w := range cfg.Watch {
		if ok, _ := doublestar.Match(filepath.ToSlash(filepath.Clean(w.Path)), filepath.ToSlash(dir)); ok {
			if w.Excludes != nil {
				return w.Excludes
			}
			break
		}
	}
	return cfg.Defaults.Excludes
}

// watchFolders counts the folders the daemon's watch of a workspace covers,
// its root included, leaving out what the watch leaves out (as the agent's
// skipFromRoot does): .git folders, the store and the runtime's folders but
// .hankweave/ and .hankweave/events/, read_only_data_source/ and rigArchive/,
// what is outside agentRoot/, and configured excludes. Symlinks are not followed.
func watchFolders(dir, workTree, layout string, excludes []string) int {
	hank := layout == string(snapshot.LayoutHankweave)
	if layout == "" || layout == string(snapshot.LayoutAuto) { // not opened yet: as Open would decide
		fi, err := os.Stat(filepath.Join(dir, ".hankweave"))
		hank = err == nil && fi.IsDir()
	}
	agentRoot := false
	if hank {
		if workTree == "" {
			fi, err := os.Stat(filepath.Join(dir, "agentRoot"))
			agentRoot = err == nil && fi.IsDir()
		} else {
			agentRoot = filepath.Clean(workTree) != filepath.Clean(dir)
		}
	}
	root := dir
	if !hank && workTree != "" {
		root = workTree
	}
	if real, err := filepath.EvalSymlinks(root); err == nil { // the watcher resolves its root
		root = real
	}
	n := 0
	_ = filepath.WalkDir(root, func(p string, de fs.DirEntry, err error) error {
		if err != nil || !de.IsDir() {
			return nil // an unreadable folder was counted when it was entered
		}
		rel, _ := filepath.Rel(root, p)
		if rel = filepath.ToSlash(rel); rel != "." && skipWatch(rel, hank, agentRoot, excludes) {
			return filepath.SkipDir
		}
		n++
		return nil
	})
	return n
}

// skipWatch mirrors the agent's watch filter for one folder, rel to the watch root.
func skipWatch(rel string, hank, agentRoot bool, excludes []string) bool {
	if hank {
		if rel == ".hankweave" || rel == ".hankweave/events" {
			return false
		}
		if strings.HasPrefix(rel, ".hankweave/") {
			return true
		}
		if agentRoot {
			if rel == "agentRoot" {
				return false
			}
			r, ok := strings.CutPrefix(rel, "agentRoot/")
			if !ok {
				return true
			}
			rel = r
		}
	}
	if snapshot.Excluded(rel) {
		return true
	}
	for _, e := range excludes {
		if snapshot.ExcludeMatch(e, rel, true) { // the walk asks about folders only
			return true
		}
	}
	return false
}

// within reports whether p is dir or lies below it (lexically).
func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
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
		g := snapshot.NewGit(gitPath, ver, gitDir, filepath.Dir(gitDir))
		d.checkup(ctx, g, gitDir, fsck) // first: a repair (a pack indexed) may bring main back
		var mainErr error
		if _, err := g.Run(ctx, nil, "rev-parse", "--verify", "-q", "refs/heads/main^{commit}"); err != nil {
			mainErr = err
			if !fsck { // with --fsck, fsck says what is missing first
				d.bad(name, "run `cairn doctor --fsck` and restore the store from a backup", "%s: refs/heads/main does not resolve: %v", gitDir, err)
				return
			}
		}
		if fsck {
			tctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
			out, err := g.Run(tctx, nil, "fsck", "--no-dangling", "--no-progress")
			cancel()
			// git fsck names missing objects on stdout ("missing blob <sha>").
			var missing []string
			for _, l := range strings.Split(string(out), "\n") {
				if strings.HasPrefix(l, "missing ") {
					missing = append(missing, strings.TrimPrefix(l, "missing "))
				}
			}
			// A ref whose commit is gone is on stderr: "error: <ref>: invalid sha1 pointer <sha>".
			var ge *snapshot.GitError
			if errors.As(err, &ge) {
				for _, l := range strings.Split(ge.Stderr, "\n") {
					if ref, sha, ok := strings.Cut(strings.TrimPrefix(l, "error: "), ": invalid sha1 pointer "); ok {
						missing = append(missing, "commit "+sha+" ("+ref+")")
					}
				}
			}
			if len(missing) > 0 {
				shown := missing
				if len(shown) > 5 {
					shown = append(shown[:5:5], fmt.Sprintf("… %d more", len(missing)-5))
				}
				d.bad(name, "copy the missing objects back from a backup of the store; or move the store aside "+
					"(the daemon, or the next `cairn checkpoint`, starts a new one with a baseline; the old checkpoints are lost)",
					"%s: %s missing (deleted by another program?); seals refuse to build on it: %s", gitDir, plural(len(missing), "object", ""), strings.Join(shown, ", "))
				return
			}
			if err != nil {
				d.bad(name, "restore the store from a backup; the ledger names the checkpoints to re-check", "%s: git fsck: %v", gitDir, err)
				return
			}
		}
		if mainErr != nil {
			d.bad(name, "restore the store from a backup", "%s: refs/heads/main does not resolve: %v", gitDir, mainErr)
			return
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
		d.ok(name, "%s healthy (%s; %s)", gitDir, how, plural(lines, "record", ""))
	}
	d.checkLock(filepath.Join(gitDir, "cairn", "lock"))
	d.checkLock(filepath.Join(filepath.Dir(gitDir), ".cairn-init.lock"))
}

// checkup examines what seals rely on (snapshot.Checkup): lock files, packs
// without their index, cairn's index and stat cache; with --fsck also every
// loose object and the objects refs name. With --repair each finding's
// repair is made, under the store's lock, and the next check sees its result.
func (d *doctor) checkup(ctx context.Context, g *snapshot.Git, gitDir string, fsck bool) {
	c := snapshot.NewCheckup(g)
	repair := d.repair
	if repair {
		lctx, cancel := context.WithTimeout(ctx, time.Minute)
		unlock, err := c.LockStore(lctx)
		cancel()
		if err != nil {
			d.bad("store", "stop what holds the store's lock (a stuck cairn process) and run again",
				"%s: cannot take the store's lock to repair it: %v", gitDir, err)
			repair = false
		} else {
			defer unlock()
		}
	}
	checks := []func() []snapshot.Problem{c.Locks, c.Packs}
	if fsck {
		checks = append(checks, c.LooseObjects)
	}
	checks = append(checks, func() []snapshot.Problem { return c.Index(ctx) }, c.StatCache)
	if fsck {
		checks = append(checks, func() []snapshot.Problem { return c.Refs(ctx) })
	}
	for _, check := range checks {
		for _, p := range check() {
			switch {
			case p.Repair == "":
				hint := p.Hint
				if hint == "" {
					hint = "none by cairn: look at it by hand"
				}
				d.bad(p.Check, hint, "%s", p.Message)
			case !repair:
				d.bad(p.Check, "`cairn doctor --fsck --repair` would "+p.Repair, "%s", p.Message)
			default:
				did, err := p.Fix(ctx)
				if err != nil {
					d.bad(p.Check, p.Repair+" by hand", "%s; the repair failed: %v", p.Message, err)
					continue
				}
				d.findings = append(d.findings, finding{Check: p.Check, Message: p.Message, Repaired: did})
			}
		}
	}
}

// checkLock reports a lock file naming a process that no longer runs. The
// lock itself (flock) died with it; the file only misleads.
func (d *doctor) checkLock(path string) {
	// A lock holds a pid: read a regular file's first bytes, never a FIFO
	// (which would block) or a file of any size.
	if fi, err := os.Lstat(path); err != nil || !fi.Mode().IsRegular() {
		return
	}
	f, err := os.Open(path)
	if err != nil {
		return
	}
	b, err := io.ReadAll(io.LimitReader(f, 64))
	f.Close()
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
