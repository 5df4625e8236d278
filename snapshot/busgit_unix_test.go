//go:build unix

package snapshot

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// busGitScript is a git for Git.Path that runs the real one, except for the
// first n calls of one command (a verb and, if set, a flag among its
// arguments): those end as a real git does when a file it has mapped is
// truncated under it (an agent rewriting a file in place while git hashes
// it): by SIGBUS, and, for a command that writes the index, leaving
// index.lock behind, since git removes its lock files on the common signals
// only. (Measured with git 2.39: a 2 MiB file rewritten in a loop killed 13
// of 170 `git update-index --add` runs so, each leaving .git/index.lock.)
const busGitScript = `#!/bin/bash
real=%q; dir=%q; verb=%q; flag=%q; n=%d; writes=%q
hv=; hf=
[ -z "$flag" ] && hf=1
for a in "$@"; do [ "$a" = "$verb" ] && hv=1; [ "$a" = "$flag" ] && hf=1; done
if [ -n "$hv" ] && [ -n "$hf" ]; then
	c=$(cat "$dir/count" 2>/dev/null || echo 0)
	if [ "$c" -lt "$n" ]; then
		echo $((c+1)) >"$dir/count"
		[ -n "$writes" ] && : >"$GIT_INDEX_FILE.lock"
		ulimit -c 0
		kill -BUS $$
	fi
fi
exec "$real" "$@"
`

func busGit(t *testing.T, st *Store, verb, flag string, n int, writes bool) (count func() int) {
	t.Helper()
	dir := t.TempDir()
	w := ""
	if writes {
		w = "1"
	}
	script := filepath.Join(dir, "git")
	if err := os.WriteFile(script, []byte(fmt.Sprintf(busGitScript, st.git.Path, dir, verb, flag, n, w)), 0o755); err != nil {
		t.Fatal(err)
	}
	real := st.git.Path
	st.git.Path = script
	t.Cleanup(func() { st.git.Path = real })
	return func() int {
		b, _ := os.ReadFile(filepath.Join(dir, "count"))
		c, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return c
	}
}

// TestGitBusErrorRetried: a git that a bus error ends while it stages,
// checks or writes cairn's index (a file truncated while git had it mapped)
// made the seal fail: "signal: bus error", or, as the dead git left
// cairn/index.lock, the seal's next write of the index failed with
// "Unable to create '…/cairn/index.lock': File exists" (both seen in the
// kill -9 torture test, with no second git on the index). Now the lock the
// dead git left is removed (it held the store lock and is reaped: provably
// gone) and the call made again.
func TestGitBusErrorRetried(t *testing.T) {
	for _, c := range []struct {
		name, verb, flag string
		writes           bool
	}{
		{"update-index --add", "update-index", "--add", true},
		{"ls-files -m", "ls-files", "-m", false},
		{"write-tree", "write-tree", "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, st := newTestStore(t, Options{Engine: EngineGit})
			files := map[string]string{"a.txt": "a\n", "d/b.txt": "b\n", "d/e/c.txt": "c\n"}
			writeTree(t, dir, files)
			mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
			writeFile(t, dir, "a.txt", "a changed\n", 0o644)
			writeFile(t, dir, "d/new.txt", "new\n", 0o644)
			count := busGit(t, st, c.verb, c.flag, 2, c.writes)

			rec := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
			if count() != 2 {
				t.Fatalf("the bus error struck %d times, want 2 (is %q %q still called?)", count(), c.verb, c.flag)
			}
			if len(rec.Issues) > 0 || rec.State != ckpt.StateOK {
				t.Errorf("seal: state %s, issues %+v; want ok", rec.State, rec.Issues)
			}
			assertTreeMatchesDisk(t, st, rec.SHA, []string{"a.txt", "d/b.txt", "d/e/c.txt", "d/new.txt"})
			if _, err := os.Lstat(st.git.Index + ".lock"); err == nil {
				t.Errorf("cairn/index.lock left after the seal")
			}
		})
	}
}

// TestGitBusErrorPersists: a file that keeps changing under git (every
// update-index ends by a bus error) is named by the seal, and no index.lock
// is left for the next one.
func TestGitBusErrorPersists(t *testing.T) {
	dir, st := newTestStore(t, Options{Engine: EngineGit})
	writeTree(t, dir, map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
	mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
	writeFile(t, dir, "a.txt", "a changed\n", 0o644)
	count := busGit(t, st, "update-index", "--add", 1000, true)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rec, err := st.Seal(ctx, SealRequest{Kind: ckpt.KindManual})
	if count() == 0 {
		t.Fatalf("update-index --add was not called")
	}
	if _, lerr := os.Lstat(st.git.Index + ".lock"); lerr == nil {
		t.Errorf("cairn/index.lock left after the seal")
	}
	if err == nil && !strings.Contains(fmt.Sprint(rec.Issues), "bus error") {
		t.Errorf("seal: %s, issues %+v: the file git could not read is not named", rec.State, rec.Issues)
	}
	// The next seal, git reading normally, holds the change.
	st.git.Path = hostGitPath(t)
	rec = mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
	requireOK(t, rec)
	assertTreeMatchesDisk(t, st, rec.SHA, []string{"a.txt", "b.txt"})
}
