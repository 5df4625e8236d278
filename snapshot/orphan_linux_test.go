package snapshot

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/platform/testsupport"
	"github.com/cairn-dev/cairn/restore/ckpt"
)

// slowGitScript is a git for PATH that runs the real one, except for one
// command (update-index or update-ref), which it starts so that the real git
// takes its lock (cairn/index.lock, the ref's .lock) and then holds it until
// the file go appears in dir (or dir is gone). Its pid goes to dir/pid. With fork set the
// real git is the script's child, so it outlives the script as a git started
// by git would; otherwise the script execs it. The feeder of git's stdin
// closes fd 3 (cairn's store lock, inherited): it is the test's, not a
// writer of the store, and would otherwise hold the lock until go.
const slowGitScript = `#!/bin/bash
real=%q; dir=%q; verb=%q; fork=%q
hit=
for a in "$@"; do [ "$a" = "$verb" ] && hit=1; done
[ -n "$hit" ] && [ ! -e "$dir/pid" ] || exec "$real" "$@"
wait_go() { until [ -e "$dir/go" ] || [ ! -d "$dir" ]; do sleep 0.05; done; }
args=("$@")
if [ "$verb" = update-ref ]; then
	# update-ref -m MSG REF NEW OLD as a transaction that holds the ref's
	# lock between prepare and commit.
	n=${#args[@]}
	ref=${args[n-3]} new=${args[n-2]} old=${args[n-1]}
	args=("${args[@]:0:n-3}" --stdin)
	feed() { printf 'start\nupdate %%s %%s %%s\nprepare\n' "$ref" "$new" "$old"; wait_go; printf 'commit\n'; }
else
	# update-index takes the index lock before it reads its stdin.
	feed() { wait_go; exec cat; }
fi
if [ -z "$fork" ]; then
	echo $$ >"$dir/pid.tmp" && mv "$dir/pid.tmp" "$dir/pid"
	exec "$real" "${args[@]}" < <(exec 3>&-; feed)
fi
# The survivor's output is not its killed cairn's pipe: update-ref --stdin
# answers "prepare: ok" after taking its lock, and that write into the pipe
# of a cairn already gone kills it (SIGPIPE, status 141), letting the lock go.
"$real" "${args[@]}" < <(exec 3>&-; feed) >/dev/null &
echo $! >"$dir/pid.tmp" && mv "$dir/pid.tmp" "$dir/pid"
wait $!
`

// procGone reports whether pid has ended (a zombie counts as ended).
func procGone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || len(b) < i+3 || b[i+2] == 'Z'
}

// TestKillNineDuringGit starts a seal in a cairn process (testdata/faultseal,
// the real code path) whose git holds cairn/index.lock or a ref's lock, and
// kills the cairn process with SIGKILL.
//
// child: the git is cairn's own child: it must die with cairn (before, it
// lived on and a restarted cairn removed the lock it held), and the next
// cairn removes the lock it left and seals.
//
// survivor: the git outlives its parent (as one git starts would): the lock
// is a live holder's, so the next cairn must not remove it; its seal fails,
// naming the store lock the survivor holds, and succeeds once the survivor
// is gone, with an index that is whole.
func TestKillNineDuringGit(t *testing.T) {
	real := hostGitPath(t)
	child := buildFaultSeal(t)
	for _, verb := range []string{"update-index", "update-ref"} {
		for _, survivor := range []bool{false, true} {
			name := verb + "/child"
			if survivor {
				name = verb + "/survivor"
			}
			t.Run(name, func(t *testing.T) { testKillNineDuringGit(t, real, child, verb, survivor) })
		}
	}
}

func testKillNineDuringGit(t *testing.T, real, child, verb string, survivor bool) {
	ctx := context.Background()
	ws, state, ctl, bin := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	opts := Options{Layout: LayoutPlain, StateDir: state, Engine: EngineInproc}
	putFile(t, filepath.Join(ws, "a.txt"), "one\n")
	st, err := Open(ctx, ws, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Seal(ctx, SealRequest{Kind: ckpt.KindBaseline}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	putFile(t, filepath.Join(ws, "a.txt"), "two\n")
	putFile(t, filepath.Join(ws, "b/c.txt"), "new\n")

	fork := ""
	if survivor {
		fork = "1"
	}
	script := fmt.Sprintf(slowGitScript, real, ctl, verb, fork)
	if err := os.WriteFile(filepath.Join(bin, "git"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	lock := filepath.Join(st.GitDir(), "cairn", "index.lock")
	if verb == "update-ref" {
		lock = filepath.Join(st.GitDir(), "refs", "cairn", "manual", "c2.lock")
	}
	gitPid := 0
	t.Cleanup(func() {
		// Whatever happened, let the slow git finish, and end it if it lingers.
		_ = os.WriteFile(filepath.Join(ctl, "go"), nil, 0o644)
		if gitPid > 0 && !testsupport.Poll(500*time.Millisecond, func() bool { return procGone(gitPid) }) {
			_ = syscall.Kill(gitPid, syscall.SIGKILL)
		}
	})

	// The next cairn's store, opened now: the survivor case then shows the
	// seal waiting for the store lock, not the open.
	st2, err := Open(ctx, ws, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st2.Close() })

	// A full seal: git stages and moves the ref.
	cmd := exec.Command(child, ws, state)
	// The git way: its update-index and update-ref are what is killed.
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "FAULTSEAL_ENGINE=git")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	testsupport.WaitFor(t, 30*time.Second, "the slow git holding "+lock, func() bool {
		select {
		case <-exited:
			t.Fatalf("the cairn process ended before its git took the lock: %s", out.String())
		default:
		}
		b, err := os.ReadFile(filepath.Join(ctl, "pid"))
		if err != nil {
			return false
		}
		gitPid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		_, err = os.Lstat(lock)
		return err == nil
	})
	_ = cmd.Process.Kill() // kill -9 of the cairn process alone
	<-exited

	if !survivor {
		testsupport.WaitFor(t, 10*time.Second, fmt.Sprintf("git pid %d dying with the cairn that started it", gitPid),
			func() bool { return procGone(gitPid) })
	} else {
		// The survivor still holds the lock: the seal must leave it alone.
		sctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
		_, err := st2.Seal(sctx, SealRequest{Kind: ckpt.KindManual})
		cancel()
		if err == nil || !strings.Contains(err.Error(), "store lock") {
			t.Fatalf("a seal while a git of the killed cairn holds %s: %v, want it to wait for the store lock", lock, err)
		}
		if !strings.Contains(err.Error(), "outlived") {
			t.Errorf("the failure does not say a process outlived its cairn: %v", err)
		}
		if _, err := os.Lstat(lock); err != nil {
			t.Fatalf("the live git's lock was removed: %v", err)
		}
		if procGone(gitPid) {
			t.Fatal("the survivor died: the test shows nothing")
		}
		// It finishes its write; the store is free again.
		if err := os.WriteFile(filepath.Join(ctl, "go"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		testsupport.WaitFor(t, 10*time.Second, "the survivor finishing", func() bool { return procGone(gitPid) })
		if verb == "update-ref" {
			// It moved refs/cairn/manual/c2 behind the ledger's back: a
			// restart finds it (Open recovers refs the ledger lacks).
			st2.Close()
			if st2, err = Open(ctx, ws, opts); err != nil {
				t.Fatal(err)
			}
		}
	}

	// The store keeps sealing, and cairn's index is whole.
	for i := range 3 {
		putFile(t, filepath.Join(ws, "a.txt"), fmt.Sprintf("after %d\n", i))
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		rec, err := st2.Seal(sctx, SealRequest{Kind: ckpt.KindManual})
		cancel()
		if err != nil {
			t.Fatalf("seal %d after the kill: %v", i, err)
		}
		requireOK(t, rec)
		if got := gitStr(t, st2, "show", rec.SHA+":a.txt"); got != fmt.Sprintf("after %d", i) {
			t.Fatalf("seal %d holds a.txt=%q", i, got)
		}
		if got := gitStr(t, st2, "show", rec.SHA+":b/c.txt"); got != "new" {
			t.Fatalf("seal %d holds b/c.txt=%q", i, got)
		}
	}
	if _, err := os.Lstat(lock); err == nil {
		t.Errorf("%s still there after the seals", lock)
	}
	// The index as git reads it: the in-process engine's pending entries
	// in (a reconcile on a base known whole leaves them pending).
	if err := st2.inproc.syncIndex(ctx); err != nil {
		t.Fatal(err)
	}
	if got := gitStr(t, st2, "ls-files"); got != "a.txt\nb/c.txt" {
		t.Errorf("cairn's index lists %q", got)
	}
	if fsck, err := st2.git.Run(ctx, nil, "fsck", "--no-progress", "--no-dangling"); err != nil {
		t.Fatalf("git fsck: %v\n%s", err, fsck)
	}
}

// TestLeftoverRefLockRemoved: a ref lock no process holds (its writer was
// killed) is removed by the next seal of a plain store, by either engine,
// and the seal takes the id the lock was for.
func TestLeftoverRefLockRemoved(t *testing.T) {
	for _, changed := range [][]string{nil, {"a.txt"}} {
		name := "git"
		if changed != nil {
			name = "inproc"
		}
		t.Run(name, func(t *testing.T) {
			ws, st := newTestStore(t, Options{})
			putFile(t, filepath.Join(ws, "a.txt"), "one\n")
			mustSeal(t, st, SealRequest{Kind: ckpt.KindBaseline})
			lock := filepath.Join(st.GitDir(), "refs", "cairn", "manual", "c2.lock")
			putFile(t, lock, "")
			putFile(t, filepath.Join(ws, "a.txt"), "two\n")
			rec := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, Changed: changed})
			if rec.ID != "c2" {
				t.Errorf("seal took id %s, want c2", rec.ID)
			}
			if _, err := os.Lstat(lock); err == nil {
				t.Errorf("%s still there", lock)
			}
		})
	}
}
