//go:build linux

package agent_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/client"
	"github.com/cairn-dev/cairn/snapshot"

	"github.com/cairn-dev/cairn/platform/testsupport"
	"github.com/cairn-dev/cairn/restore/ckpt"
)

// TestKill9Torture kills the daemon with SIGKILL again and again, at random
// moments, while a writer changes a plain workspace hundreds of times a
// second, and restarts it on the same state directory each time. Only the
// daemon's pid is killed, never its process group: git commands it started
// are left running, as after a real crash, and must die with it or be coped
// with by the next daemon.
//
// It runs for both engines and, as root, twice: the daemon as root and the
// daemon as an unprivileged user made for the test. Afterwards (writer
// stopped, a final `cairn checkpoint` through the daemon):
//
//   - the final checkpoint's tree is the tree git itself builds from the disk
//     (a temporary index, `git add -A`): no change lost;
//   - every ledger record with a commit has that commit and every object it
//     reaches (`git rev-list --objects --missing=print`);
//   - the ledger ids are c1..cN, each once (failed seals take ids too);
//   - `git fsck --strict --no-dangling` is clean;
//   - the store was never stuck: on most lifetimes the test waits, before
//     killing, for the new daemon to seal a checkpoint, and fails ("stuck")
//     when none comes within 30 s. A quarter of the kills do not wait, so
//     that startup reconciles are killed too.
//
// Budget: CAIRN_TORTURE_KILLS kills per engine and user (default 3, 2 with
// -short, so that it lives in `go test ./...`; .ci/run gives 40), spaced
// 0.05–2 s, within CAIRN_TORTURE_TIME per engine and user (default 4m;
// .ci/run gives 60s). CAIRN_TORTURE_SEED replays a run's kill
// timing and writer (the daemon's own scheduling is not replayed).
func TestKill9Torture(t *testing.T) {
	kills := 3
	if testing.Short() {
		kills = 2
	}
	if v := os.Getenv("CAIRN_TORTURE_KILLS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			t.Fatalf("CAIRN_TORTURE_KILLS=%q: want a count", v)
		}
		kills = n
	}
	budget := 4 * time.Minute
	if v := os.Getenv("CAIRN_TORTURE_TIME"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("CAIRN_TORTURE_TIME=%q: %v", v, err)
		}
		budget = d
	}
	seed := time.Now().UnixNano()
	if v := os.Getenv("CAIRN_TORTURE_SEED"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("CAIRN_TORTURE_SEED=%q: %v", v, err)
		}
		seed = n
	}
	t.Logf("seed %d (CAIRN_TORTURE_SEED=%d replays it), %d kills per run, budget %s", seed, seed, kills, budget)
	users := []string{"self"}
	if os.Geteuid() == 0 {
		users = append(users, "user")
	}
	for _, who := range users {
		for _, engine := range []string{"inproc", "git"} {
			t.Run(who+"/"+engine, func(t *testing.T) {
				var u *testUser
				if who == "user" {
					nu := newUser(t)
					u = &nu
				}
				tortureRun(t, u, engine, seed, kills, budget)
			})
		}
	}
}

// tortureFigures are what one run counts.
type tortureFigures struct {
	kills, early, orphans, stuck                          int
	restores, restoresDone                                int
	records, ok, partial, racy, failed, recovered, pruned int
	writes                                                int64
	// orphanLife is the longest a git child outlived the daemon (polled).
	orphanLife time.Duration
}

// A git child of a daemon killed with SIGKILL is sent SIGKILL by the kernel
// as the daemon exits (Pdeathsig, snapshot/proc_linux.go): once the daemon
// is reaped, each child still alive must be dying (SIGKILL pending, or
// exiting), or it escaped, and fails the run at once. A dying child ends at
// its next return to user mode, in milliseconds, unless it waits in the
// kernel for block I/O (state D): measured on a loaded disk, such a git
// lived on up to 1.84 s (wait channels submit_bio_wait, rq_qos_wait). One
// still alive orphanGrace after the daemon died fails the run too.
const orphanGrace = 5 * time.Second

// leftoverError matches a failed record's error that the kill -9 rule
// forbids: a seal that met a lock file left by a git that is gone, a git
// ended by a bus error (two gits on one index, or a file truncated under a
// git that had it mapped), or another writer.
var leftoverError = regexp.MustCompile(`(?i)\.lock'?: File exists|Unable to create .*\.lock|bus error|another writer|store lock`)

func tortureRun(t *testing.T, u *testUser, engine string, seed int64, kills int, budget time.Duration) {
	base := openBase(t)
	ws := filepath.Join(base, "ws")
	state := filepath.Join(base, "state")
	seedLoad(t, ws)
	// Many files and a few big ones the writer rewrites whole: the git
	// children a seal starts then run long enough to be caught by a kill.
	for i := range 2000 {
		write(t, filepath.Join(ws, fmt.Sprintf("bulk/b%02d/g%04d.txt", i%40, i)), fmt.Sprintf("bulk %d\n", i))
	}
	for i := range 6 {
		write(t, filepath.Join(ws, fmt.Sprintf("big/big%d.bin", i)), strings.Repeat(fmt.Sprintf("%015d\n", i), 1<<17))
	}
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(base, "cairn.toml")
	write(t, conf, fmt.Sprintf("[defaults]\nengine = %q\nautosave = true\nautosave_quiet = \"100ms\"\nautosave_max_wait = \"1s\"\n", engine))
	if u != nil {
		chownTree(t, base, *u)
	}
	real, _ := filepath.EvalSymlinks(ws)
	home := filepath.Join(state, "stores", snapshot.PlainStoreName(real))
	gitDir := filepath.Join(home, "store.git")

	d := &tortureDaemon{t: t, user: u, state: state, socket: filepath.Join(state, "cairn.sock"),
		args: []string{"--config", conf, "--watch", ws}}
	d.start()
	t.Cleanup(func() {
		_, _, escaped := d.kill()
		if len(escaped) > 0 {
			t.Errorf("git children of the daemon not dying as it was reaped, or alive %s after: %v", orphanGrace, escaped)
		}
		if t.Failed() {
			t.Logf("the last daemons' logs:\n%s", d.logs())
		}
	})
	waitFor(t, 60*time.Second, "a baseline", func() bool {
		return slices.ContainsFunc(ledgerFile(home), func(r ckpt.Record) bool { return r.Kind == ckpt.KindBaseline && r.SHA != "" })
	})

	// The writer: creates, edits, same-size rewrites, deletes and renames,
	// one every 2 ms at most.
	stop := make(chan struct{})
	var writes atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var own func(string)
		if u != nil {
			own = func(p string) { _ = os.Lchown(p, u.uid, u.gid) }
		}
		loadWriter(ws, own, rand.New(rand.NewSource(seed)), stop, &writes)
	}()

	var f tortureFigures
	var restores sync.WaitGroup // restores asked of a daemon, ended by it or by its kill
	var restoresDone atomic.Int64
	var restoreErrs sync.Map // why the others did not end ok, logged
	rng := rand.New(rand.NewSource(seed + 1))
	start := time.Now()
	lastSealed := maxSealed(ledgerFile(home))
	for f.kills < kills && time.Since(start) < budget {
		// Most lifetimes must seal a checkpoint before they are killed:
		// the store is not stuck. The others are killed whenever, startup
		// included.
		if rng.Intn(4) == 0 {
			f.early++
		} else {
			if !testsupport.Poll(30*time.Second, func() bool { return maxSealed(ledgerFile(home)) > lastSealed }) {
				f.stuck++
				t.Errorf("stuck: daemon lifetime %d (after %d kills) sealed no checkpoint within 30 s (seed %d); "+
					"git processes on the store: %v; lock files: %v; its log:\n%s",
					f.kills+1, f.kills, seed, storeGits(gitDir), lockFiles(gitDir), d.lastLog())
			}
			d.orphansGone(fmt.Sprintf("kill %d", f.kills))
		}
		// A third of the lifetimes ask for a restore (or an undo) first, so
		// that kills land in restores too: the pre-restore checkpoint, the
		// writes under temporary names, the verification.
		if rng.Intn(3) == 0 {
			f.restores++
			req := api.RestoreRequest{Workspace: ws}
			if recs := okRecords(ledgerFile(home)); len(recs) > 0 {
				req.Target = recs[rng.Intn(len(recs))].ID
			}
			undo := req.Target == "" || rng.Intn(4) == 0
			restores.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				c := client.New(d.socket)
				defer c.Close()
				var err error
				if undo {
					_, err = c.Undo(ctx, ws)
				} else {
					_, err = c.Restore(ctx, req)
				}
				if err == nil {
					restoresDone.Add(1)
				} else {
					restoreErrs.Store(err.Error(), true)
				}
			})
		}
		// Not a wait: the kill lands at a random point of the daemon's work.
		time.Sleep(time.Duration(50+rng.Intn(1951)) * time.Millisecond)
		n, life, escaped := d.kill()
		f.orphans += n
		f.orphanLife = max(f.orphanLife, life)
		if len(escaped) > 0 {
			t.Errorf("kill %d: git children of the daemon not dying as it was reaped, or alive %s after (seed %d): %v",
				f.kills+1, orphanGrace, seed, escaped)
		}
		f.kills++
		d.start()
		lastSealed = maxSealed(ledgerFile(home))
	}
	close(stop)
	wg.Wait()
	restores.Wait()
	f.restoresDone = int(restoresDone.Load())
	f.writes = writes.Load()
	elapsed := time.Since(start)

	// A final checkpoint through the daemon holds the disk as it is now.
	var final ckpt.Record
	waitFor(t, 60*time.Second, "a final checkpoint sealed ok", func() bool {
		out, err := d.cairn("checkpoint", ws, "--label", "final", "--json", "--socket", d.socket, "--state-dir", state)
		final = ckpt.Record{}
		if jerr := json.Unmarshal(out, &final); jerr != nil {
			t.Logf("final checkpoint: %v: %s", err, out)
			return false
		}
		if final.State != ckpt.StateOK {
			t.Logf("final checkpoint %s: %s %s", final.ID, final.State, final.Error)
		}
		return final.State == ckpt.StateOK
	})
	d.orphansGone("after the final checkpoint")
	// A restore killed while writing leaves files under its temporary names
	// (.cairn-<tag>-<random>); the seals after it remove them. None may be
	// left, or the final checkpoint holds them as the user's files.
	if left := restoreTemps(t, ws); len(left) > 0 {
		t.Errorf("a killed restore's temporary files are still in the work tree after the final checkpoint: %v (seed %d)", left, seed)
	}
	// The daemon is stopped cleanly before the store is examined.
	d.term()

	recs := ledgerFile(home)
	f.records = len(recs)
	errs := map[string]int{}
	for _, r := range recs {
		switch r.State {
		case ckpt.StateOK:
			f.ok++
		case ckpt.StatePartial:
			f.partial++
		case ckpt.StateRacy:
			f.racy++
		case ckpt.StateFailed:
			f.failed++
			errs[r.Error]++
		case ckpt.StatePruned:
			f.pruned++
		}
		if r.Recovered {
			f.recovered++
		}
	}
	for e, n := range errs {
		if leftoverError.MatchString(e) {
			t.Errorf("failed ×%d by what an earlier git left or another writer (seed %d): %s", n, seed, e)
		} else {
			t.Logf("failed ×%d: %s", n, e)
		}
	}

	// Ids: c1..cN, each once.
	byNum := map[int]int{}
	top := 0
	for _, r := range recs {
		n, ok := ckpt.LedgerNum(r.ID)
		if !ok {
			t.Errorf("ledger id %q is not c<N>", r.ID)
			continue
		}
		byNum[n]++
		top = max(top, n)
	}
	var gaps, dups []string
	for n := 1; n <= top; n++ {
		switch {
		case byNum[n] == 0:
			gaps = append(gaps, "c"+strconv.Itoa(n))
		case byNum[n] > 1:
			dups = append(dups, fmt.Sprintf("c%d×%d", n, byNum[n]))
		}
	}
	if len(gaps) > 0 {
		t.Errorf("ledger ids missing (of c1..c%d): %v (seed %d)", top, gaps, seed)
	}
	if len(dups) > 0 {
		t.Errorf("ledger ids recorded more than once: %v (seed %d)", dups, seed)
	}

	// Every record with a commit: the commit and all it reaches are there.
	var shas []string
	for _, r := range recs {
		if r.SHA != "" && r.State != ckpt.StateFailed && r.State != ckpt.StatePruned {
			shas = append(shas, r.SHA)
		}
	}
	check, _ := d.git(gitDir, strings.Join(shas, "\n")+"\n", "cat-file", "--batch-check")
	var present []string
	for i, l := range strings.Split(strings.TrimSpace(check), "\n") {
		if i < len(shas) && strings.HasSuffix(l, " missing") {
			t.Errorf("record's commit %s is missing (seed %d)", shas[i], seed)
		} else if i < len(shas) {
			present = append(present, shas[i])
		}
	}
	if len(present) > 0 {
		out, err := d.git(gitDir, strings.Join(present, "\n")+"\n", "rev-list", "--objects", "--missing=print", "--stdin")
		if err != nil {
			t.Errorf("rev-list --objects: %v: %s (seed %d)", err, out, seed)
		}
		var missing []string
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "?") {
				missing = append(missing, l[1:])
			}
		}
		if len(missing) > 0 {
			t.Errorf("%d objects reached from ledger commits are missing, e.g. %v (seed %d)", len(missing), missing[:min(5, len(missing))], seed)
		}
	}
	if out, err := d.git(gitDir, "", "fsck", "--strict", "--no-dangling", "--no-progress"); err != nil {
		t.Errorf("git fsck --strict: %v\n%s (seed %d)", err, out, seed)
	}
	// Lock files: every git of the store is gone now (the daemon was stopped,
	// its children die with it), and a seal removes what a dead one left;
	// any lock file left after the final seal is an error.
	locks := lockFiles(gitDir)
	if len(locks) > 0 {
		t.Errorf("lock files left after the final checkpoint: %v (seed %d)", locks, seed)
	}

	// No lost change: the final checkpoint's tree is git's own tree of the disk.
	if final.SHA != "" {
		idx := filepath.Join(base, "verify.index")
		tree, err := d.git(gitDir, "", "rev-parse", final.SHA+"^{tree}")
		if err != nil {
			t.Errorf("final checkpoint %s: %v: %s", final.SHA, err, tree)
		}
		if out, err := d.gitEnv(gitDir, []string{"GIT_WORK_TREE=" + ws, "GIT_INDEX_FILE=" + idx}, "", "add", "-A"); err != nil {
			t.Fatalf("git add -A: %v: %s", err, out)
		}
		disk, err := d.gitEnv(gitDir, []string{"GIT_INDEX_FILE=" + idx}, "", "write-tree")
		if err != nil {
			t.Fatalf("git write-tree: %v: %s", err, disk)
		}
		if disk != tree {
			diff, _ := d.git(gitDir, "", "diff-tree", "-r", "--name-status", tree, disk)
			lines := strings.Split(diff, "\n")
			t.Errorf("lost changes: final checkpoint %s (tree %s) is not the disk (tree %s); %d paths differ, e.g.\n%s\n(seed %d)",
				final.ID, tree, disk, len(lines), strings.Join(lines[:min(20, len(lines))], "\n"), seed)
		}
	}
	t.Logf("%d restores or undos asked for, %d ended ok", f.restores, f.restoresDone)
	restoreErrs.Range(func(k, _ any) bool {
		t.Logf("a restore ended: %s", k)
		return true
	})
	t.Logf("%s engine, daemon as %s: %d kills (%d without waiting for a seal), %d git children outlived the daemon (the longest by %s; bound %s), %d stuck; "+
		"%d writes in %s (%.0f/s); %d records: %d ok, %d partial, %d racy, %d failed, %d pruned, %d recovered; ids c1..c%d; lock files left %v",
		engine, d.who(), f.kills, f.early, f.orphans, f.orphanLife.Round(time.Millisecond), orphanGrace, f.stuck, f.writes, elapsed.Round(time.Millisecond), float64(f.writes)/elapsed.Seconds(),
		f.records, f.ok, f.partial, f.racy, f.failed, f.pruned, f.recovered, top, locks)
}

// ledgerFile reads a plain store's ledger file directly (no cairn process),
// by id; lines that do not parse (a torn tail) are skipped.
func ledgerFile(home string) []ckpt.Record {
	b, err := os.ReadFile(filepath.Join(home, "ledger.jsonl"))
	if err != nil {
		return nil
	}
	var recs []ckpt.Record
	var prunes []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var r struct {
			ckpt.Record
			Prune string `json:"prune"`
		}
		if json.Unmarshal(sc.Bytes(), &r) != nil {
			continue
		}
		if r.Prune != "" {
			prunes = append(prunes, r.Prune)
			continue
		}
		if r.ID != "" {
			recs = append(recs, r.Record)
		}
	}
	for i := range recs {
		if slices.Contains(prunes, recs[i].ID) {
			recs[i].State = ckpt.StatePruned
		}
	}
	sort.SliceStable(recs, func(i, j int) bool { return idNumOf(recs[i].ID) < idNumOf(recs[j].ID) })
	return recs
}

// okRecords are the records a restore can go to: sealed, ok.
func okRecords(recs []ckpt.Record) []ckpt.Record {
	var ok []ckpt.Record
	for _, r := range recs {
		if r.SHA != "" && r.State == ckpt.StateOK {
			ok = append(ok, r)
		}
	}
	return ok
}

// restoreTempName is the name an in-process restore writes a file under
// before renaming it over the path (platform.TempPrefix and a restore's tag).
var restoreTempName = regexp.MustCompile(`^\.cairn-[0-9a-f]{16}-`)

// restoreTemps lists the work tree's files named as a restore's temporary files.
func restoreTemps(t *testing.T, ws string) []string {
	t.Helper()
	var left []string
	err := filepath.WalkDir(ws, func(p string, de os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if de.IsDir() && de.Name() == ".git" {
			return filepath.SkipDir
		}
		if restoreTempName.MatchString(de.Name()) {
			left = append(left, p)
		}
		return nil
	})
	if err != nil {
		t.Errorf("walking the work tree: %v", err)
	}
	return left
}

func idNumOf(id string) int {
	n, _ := ckpt.LedgerNum(id)
	return n
}

// maxSealed is the highest id of a checkpoint a daemon sealed (a commit, not
// a failure, not one rebuilt from a commit at open).
func maxSealed(recs []ckpt.Record) int {
	top := 0
	for _, r := range recs {
		if r.SHA != "" && r.State != ckpt.StateFailed && !r.Recovered {
			top = max(top, idNumOf(r.ID))
		}
	}
	return top
}

// tortureDaemon is a `cairn daemon` that is killed and restarted, as the
// test's user or as u. It keeps the logs of its last three lifetimes.
type tortureDaemon struct {
	t      *testing.T
	user   *testUser
	state  string
	socket string
	args   []string

	cmd     *exec.Cmd
	exited  chan struct{}
	mu      sync.Mutex
	lives   []*syncBuffer
	orphans []orphan // left by the last killed daemon's gits, for orphansGone
}

func (d *tortureDaemon) who() string {
	if d.user == nil {
		return fmt.Sprintf("uid %d", os.Geteuid())
	}
	return fmt.Sprintf("user %s (uid %d)", d.user.name, d.user.uid)
}

func (d *tortureDaemon) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
	if d.user != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(d.user.uid), Gid: uint32(d.user.gid)}}
		cmd.Dir = "/"
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + d.state, "GORACE=atexit_sleep_ms=0"}
	}
	return cmd
}

func (d *tortureDaemon) start() {
	d.t.Helper()
	log := &syncBuffer{}
	d.mu.Lock()
	d.lives = append(d.lives, log)
	if len(d.lives) > 3 {
		d.lives = d.lives[1:]
	}
	d.mu.Unlock()
	d.cmd = d.command(cairnBin, append([]string{"daemon", "--state-dir", d.state, "--socket", d.socket}, d.args...)...)
	d.cmd.Stdout, d.cmd.Stderr = log, log
	d.exited = make(chan struct{})
	if err := d.cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	exited := d.exited
	cmd := d.cmd
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	c := client.New(d.socket)
	waitFor(d.t, 30*time.Second, "daemon socket answers", func() bool {
		select {
		case <-exited:
			d.t.Fatalf("daemon exited with %d:\n%s", cmd.ProcessState.ExitCode(), log.String())
		default:
		}
		return c.Running(context.Background())
	})
}

// kill sends SIGKILL to the daemon's pid alone and waits for it. It returns
// how many of its descendants were still alive just after, how long the
// last of them lived on (polled), and those alive orphanGrace after, which
// it then kills so that the run goes on.
func (d *tortureDaemon) kill() (n int, life time.Duration, escaped []string) {
	if d.cmd == nil {
		return 0, 0, nil
	}
	select {
	case <-d.exited:
		return 0, 0, nil
	default:
	}
	daemonPid := d.cmd.Process.Pid
	kids := descendants(daemonPid)
	cmdlines := map[int]string{}
	started := map[int]string{} // a pid's start time: the same process, not one that reused its pid
	direct := map[int]bool{}    // the daemon's own children (a git's children are not: no parent-death signal reaches them)
	for _, pid := range kids {
		direct[pid] = procParent(pid) == daemonPid
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		cmdlines[pid] = strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " ")
		started[pid] = procStart(pid)
	}
	same := func(pid int) bool { return alive(pid) && procStart(pid) == started[pid] }
	_ = d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.exited
	died := time.Now()
	live := slices.DeleteFunc(slices.Clone(kids), func(pid int) bool { return !same(pid) })
	// A git's own children (a repack's pack-objects) outlive it by design:
	// the next daemon stops them before it touches the store
	// (d.orphans, checked once it has sealed).
	for _, pid := range live {
		if !direct[pid] && !dying(pid) {
			d.orphans = append(d.orphans, orphan{pid, started[pid], cmdlines[pid]})
		}
	}
	live = slices.DeleteFunc(live, func(pid int) bool { return !direct[pid] })
	n = len(live)
	for _, pid := range live {
		if !dying(pid) && same(pid) {
			escaped = append(escaped, fmt.Sprintf("%d, not dying as the daemon was reaped (%s): %s", pid, procDoing(pid), cmdlines[pid]))
		}
	}
	seen := map[int]string{} // what a survivor was doing 100 ms on
	// Not testsupport.Poll: this loop measures how long the survivors live,
	// so it looks every 2 ms rather than ever less often.
	for len(live) > 0 && time.Since(died) < orphanGrace {
		time.Sleep(2 * time.Millisecond)
		live = slices.DeleteFunc(live, func(pid int) bool { return !same(pid) })
		if time.Since(died) > 100*time.Millisecond {
			for _, pid := range live {
				if _, ok := seen[pid]; !ok {
					seen[pid] = procDoing(pid)
				}
			}
		}
	}
	if n > 0 {
		life = time.Since(died)
	}
	for pid, doing := range seen {
		d.t.Logf("a git child of the killed daemon lived on over 100 ms: %d (%s): %s", pid, doing, cmdlines[pid])
	}
	for _, pid := range live {
		doing := procDoing(pid)
		_ = syscall.Kill(pid, syscall.SIGKILL)
		// How long it takes to die now, SIGKILL sent twice.
		testsupport.Poll(30*time.Second-time.Since(died), func() bool { return !same(pid) })
		escaped = append(escaped, fmt.Sprintf("%d (%s; gone after %s): %s", pid, doing, time.Since(died).Round(time.Millisecond), cmdlines[pid]))
	}
	return n, life, escaped
}

// dying reports whether a process has SIGKILL pending or is exiting
// (PF_EXITING, in /proc/<pid>/stat's flags): a process that took SIGKILL
// off its pending set is exiting.
func dying(pid int) bool {
	st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(st), "\n") {
		k, v, _ := strings.Cut(l, ":")
		if k == "ShdPnd" || k == "SigPnd" {
			if m, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64); err == nil && m&(1<<(syscall.SIGKILL-1)) != 0 {
				return true
			}
		}
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true // gone
	}
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 7 {
		return false
	}
	flags, _ := strconv.ParseUint(f[6], 10, 64)
	const pfExiting = 0x4
	return flags&pfExiting != 0
}

// procDoing describes a process for a message: its state, parent, pending
// signals and where in the kernel it waits.
func procDoing(pid int) string {
	st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	var out []string
	for _, l := range strings.Split(string(st), "\n") {
		switch k, _, _ := strings.Cut(l, ":"); k {
		case "State", "PPid", "ShdPnd", "SigPnd":
			out = append(out, strings.Join(strings.Fields(l), " "))
		}
	}
	wchan, _ := os.ReadFile(fmt.Sprintf("/proc/%d/wchan", pid))
	return strings.Join(append(out, "wchan "+string(wchan)), ", ")
}

// procStart is a process's start time (in clock ticks after boot), from
// /proc/<pid>/stat; empty when it is gone.
func procStart(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

// orphan is a process a killed daemon's git started, left running.
type orphan struct {
	pid          int
	start, cmdln string
}

// orphansGone fails the test for a killed daemon's orphans still running
// once the next daemon has sealed (it stops them before touching the store).
func (d *tortureDaemon) orphansGone(when string) {
	for _, o := range d.orphans {
		if !testsupport.Poll(orphanGrace, func() bool { return !alive(o.pid) || procStart(o.pid) != o.start }) {
			d.t.Errorf("%s: a process a killed daemon's git started still runs: %d (%s): %s", when, o.pid, procDoing(o.pid), o.cmdln)
			_ = syscall.Kill(o.pid, syscall.SIGKILL)
		}
	}
	d.orphans = nil
}

// procParent is a process's parent pid (0 when gone).
func procParent(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

// term stops the daemon with SIGTERM.
func (d *tortureDaemon) term() {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(20 * time.Second):
		d.t.Errorf("daemon did not exit within 20 s of SIGTERM")
		d.kill()
	}
}

// lastLog is the current lifetime's log (its last 100 kB).
func (d *tortureDaemon) lastLog() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.lives[len(d.lives)-1].String()
	if len(s) > 100_000 {
		s = "…" + s[len(s)-100_000:]
	}
	return s
}

func (d *tortureDaemon) logs() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var b strings.Builder
	for i, l := range d.lives {
		s := l.String()
		if len(s) > 200_000 {
			s = "…" + s[len(s)-200_000:]
		}
		fmt.Fprintf(&b, "--- lifetime -%d\n%s", len(d.lives)-1-i, s)
	}
	return b.String()
}

// cairn runs a short cairn command as the daemon's user; its stdout.
func (d *tortureDaemon) cairn(args ...string) ([]byte, error) {
	cmd := d.command(cairnBin, args...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		return append(out, errb.Bytes()...), err
	}
	return out, nil
}

// git runs git on the store as the daemon's user.
func (d *tortureDaemon) git(gitDir, stdin string, args ...string) (string, error) {
	return d.gitEnv(gitDir, nil, stdin, args...)
}

func (d *tortureDaemon) gitEnv(gitDir string, env []string, stdin string, args ...string) (string, error) {
	cmd := d.command("git", args...)
	cmd.Env = append([]string{"GIT_DIR=" + gitDir, "HOME=" + filepath.Dir(gitDir), "GIT_CONFIG_NOSYSTEM=1",
		"PATH=" + os.Getenv("PATH"), "LC_ALL=C"}, env...)
	for _, e := range env {
		if wt, ok := strings.CutPrefix(e, "GIT_WORK_TREE="); ok {
			cmd.Dir = wt // pathspecs are the work tree's
		}
	}
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// lockFiles lists the git lock files in a store (not cairn's flock files).
func lockFiles(gitDir string) []string {
	var locks []string
	_ = filepath.WalkDir(gitDir, func(p string, de os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".lock") && !de.IsDir() {
			rel, _ := filepath.Rel(gitDir, p)
			if rel != "cairn/lock" && rel != "cairn/maintain.lock" {
				locks = append(locks, rel)
			}
		}
		return nil
	})
	return locks
}

// storeGits lists the live processes whose GIT_DIR is gitDir: pid and command line.
func storeGits(gitDir string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !alive(pid) {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !bytes.Contains(env, []byte("GIT_DIR="+gitDir+"\x00")) {
			continue
		}
		cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		pp, _ := ppidOf(pid)
		out = append(out, fmt.Sprintf("%d (parent %d): %s", pid, pp, strings.ReplaceAll(strings.TrimRight(string(cmd), "\x00"), "\x00", " ")))
	}
	return out
}

// ppidOf is a process's parent, from /proc/<pid>/stat.
func ppidOf(pid int) (int, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0, false
	}
	n, err := strconv.Atoi(f[1])
	return n, err == nil
}

// alive reports whether pid is a running process (not a zombie).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}
