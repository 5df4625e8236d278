//go:build unix

package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// discoverTree makes root with the given folders (ending in "/") and files
// below it; root is resolved so a linked temp folder (macOS) is no prefix link.
func discoverTree(t *testing.T, entries ...string) string {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		p := filepath.Join(root, e)
		if strings.HasSuffix(e, "/") {
			err = os.MkdirAll(p, 0o755)
		} else if err = os.MkdirAll(filepath.Dir(p), 0o755); err == nil {
			err = os.WriteFile(p, nil, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func foundPaths(root string, dirs []found) []string {
	out := make([]string, 0, len(dirs))
	for _, d := range dirs {
		rel, err := filepath.Rel(root, d.Path)
		if err != nil || strings.HasPrefix(rel, "..") {
			rel = d.Path // outside root: keep it whole so the test shows it
		}
		out = append(out, filepath.ToSlash(rel))
	}
	return out
}

func TestDiscoverPatterns(t *testing.T) {
	root := discoverTree(t,
		"runs/a/", "runs/b/", "runs/file", "runs/.hidden/",
		"secret/", "secret/key",
		"data/exec-1/", "data/x/exec-2/", "data/x/y/z/exec-3/", "data/x/notexec/", "data/x/exec-file",
		"home/ann/runs/r1/", "home/bob/runs/r2/", "home/bob/other/r3/",
	)
	if err := os.Chmod(filepath.Join(root, "secret"), 0o700); err != nil {
		t.Fatal(err)
	}
	// Links into the root-only folder, a folder, and a tree with matches:
	// none is ever listed or walked.
	for link, target := range map[string]string{
		"runs/tosecret":     filepath.Join(root, "secret"),
		"runs/toa":          filepath.Join(root, "runs/a"),
		"data/x/exec-link":  filepath.Join(root, "secret"),
		"data/linked":       filepath.Join(root, "data/x"),
		"home/carl":         filepath.Join(root, "home/ann"),
		"runs/a/dangling":   filepath.Join(root, "missing"),
		"home/ann/runs/rl":  "../../bob/runs/r2",
		"data/x/y/exec-rel": "../exec-2",
	} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		pattern string
		want    []string
	}{
		{"runs/*", []string{"runs/.hidden", "runs/a", "runs/b"}},
		{"runs/[ab]", []string{"runs/a", "runs/b"}},
		{"runs/a", []string{"runs/a"}},
		{"runs/missing", nil},
		{"runs/file", nil},
		{"missing/*", nil},
		{"runs/file/*", nil},
		{"data/**/exec-*", []string{"data/exec-1", "data/x/exec-2", "data/x/y/z/exec-3"}},
		{"data/**", []string{"data", "data/exec-1", "data/x", "data/x/exec-2", "data/x/notexec", "data/x/y", "data/x/y/z", "data/x/y/z/exec-3"}},
		{"home/*/runs/*", []string{"home/ann/runs/r1", "home/bob/runs/r2"}},
		{"home/{ann,bob}/runs/*", []string{"home/ann/runs/r1", "home/bob/runs/r2"}},
		{"home/{ann/runs,bob/other}/*", []string{"home/ann/runs/r1", "home/bob/other/r3"}},
		{"*/x/*", []string{"data/x/exec-2", "data/x/notexec", "data/x/y"}},
	} {
		t.Run(c.pattern, func(t *testing.T) {
			dirs, trunc, err := discoverRoot(context.Background(), filepath.Join(root, c.pattern), discoverLimits{})
			if err != nil || trunc != "" {
				t.Fatalf("err %v, truncated %q", err, trunc)
			}
			if got := foundPaths(root, dirs); !slices.Equal(got, c.want) {
				t.Fatalf("got %q, want %q", got, c.want)
			}
			for _, d := range dirs {
				if !d.Mode.IsDir() {
					t.Errorf("%s: mode %v is not a folder", d.Path, d.Mode)
				}
			}
		})
	}
}

func TestDiscoverPrefixThroughLink(t *testing.T) {
	root := discoverTree(t, "real/ws/", "real/sub/ws/")
	if err := os.Symlink(filepath.Join(root, "real"), filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"link/*", "link", "link/sub/*", "link/**"} {
		dirs, _, err := discoverRoot(context.Background(), filepath.Join(root, p), discoverLimits{})
		if err == nil || !strings.Contains(err.Error(), "symbolic link") {
			t.Errorf("%s: got %v, %v; want an error about a symbolic link", p, dirs, err)
		}
	}
}

// A folder that was a workspace and is swapped for a link to a root-only
// folder stops being listed; the link's target is never listed.
func TestDiscoverSwappedForLink(t *testing.T) {
	root := discoverTree(t, "runs/a/", "runs/b/", "rootonly/")
	if err := os.Chmod(filepath.Join(root, "rootonly"), 0o700); err != nil {
		t.Fatal(err)
	}
	pattern := filepath.Join(root, "runs/*")
	dirs, _, err := discoverRoot(context.Background(), pattern, discoverLimits{})
	if got := foundPaths(root, dirs); err != nil || !slices.Equal(got, []string{"runs/a", "runs/b"}) {
		t.Fatalf("first: %q, %v", got, err)
	}
	a := filepath.Join(root, "runs/a")
	if err := os.Remove(a); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "rootonly"), a); err != nil {
		t.Fatal(err)
	}
	dirs, _, err = discoverRoot(context.Background(), pattern, discoverLimits{})
	if got := foundPaths(root, dirs); err != nil || !slices.Equal(got, []string{"runs/b"}) {
		t.Fatalf("after swap: %q, %v", got, err)
	}
	// The plain path of the swapped folder is refused, not followed.
	if dirs, _, err := discoverRoot(context.Background(), a, discoverLimits{}); err == nil {
		t.Fatalf("plain swapped path: got %v, want an error", dirs)
	}
}

func TestDiscoverCaps(t *testing.T) {
	var entries []string
	for _, d := range []string{"a", "a/b", "a/b/c", "d", "d/e"} {
		for i := range 4 {
			entries = append(entries, d+"/exec-"+string(rune('0'+i))+"/")
		}
	}
	root := discoverTree(t, entries...)
	pattern := filepath.Join(root, "**/exec-*")
	all, trunc, err := discoverRoot(context.Background(), pattern, discoverLimits{})
	if err != nil || trunc != "" || len(all) != 20 {
		t.Fatalf("uncapped: %d matches, %q, %v", len(all), trunc, err)
	}
	for _, c := range []struct {
		name    string
		lim     discoverLimits
		maxWant int
		says    string
	}{
		{"matches", discoverLimits{MaxMatches: 3}, 3, "at most 3 folders"},
		{"dirs", discoverLimits{MaxDirs: 2, MaxOwnerDirs: 2}, 20, "looking at 2 folders"},
		{"one dir", discoverLimits{MaxDirs: 1}, 20, "looking at 1 folders"},
		{"one owner's dirs", discoverLimits{MaxDirs: 100, MaxOwnerDirs: 3}, 20, "after 3 (one owner's share of the 100"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dirs, trunc, err := discoverRoot(context.Background(), pattern, c.lim)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(trunc, c.says) || !strings.Contains(trunc, pattern) {
				t.Errorf("truncated %q: want it to name the cap (%s) and the root", trunc, c.says)
			}
			if len(dirs) > c.maxWant || len(dirs) >= len(all) {
				t.Errorf("%d matches under the cap, want at most %d and fewer than %d", len(dirs), c.maxWant, len(all))
			}
		})
	}
}

func TestDiscoverRefused(t *testing.T) {
	for _, p := range []string{
		"/", "/proc", "/proc/*", "/proc/**", "/sys/fs/*", "/dev/shm/*",
		"runs/*", "/srv//runs", "/srv/runs/", "/srv/../runs", "/srv/[", "/srv/{a",
	} {
		if dirs, trunc, err := discoverRoot(context.Background(), p, discoverLimits{}); err == nil {
			t.Errorf("%q: got %v, %q; want an error", p, dirs, trunc)
		} else if strings.HasPrefix(p, "/proc") && !strings.Contains(err.Error(), "kernel") {
			t.Errorf("%q: error %q does not say why", p, err)
		}
	}
}

// mustNotBeKernel fails for "/" and for anything under /proc, /sys or /dev.
func mustNotBeKernel(t *testing.T, dirs []found) {
	t.Helper()
	for _, d := range dirs {
		if d.Path == "/" {
			t.Errorf("/ listed as a workspace")
		}
		for _, k := range kernelTrees {
			if d.Path == k || strings.HasPrefix(d.Path, k+"/") {
				t.Errorf("%s listed", d.Path)
			}
		}
	}
}

func TestDiscoverWholeMachineBounded(t *testing.T) {
	for _, cross := range []bool{false, true} {
		lim := discoverLimits{MaxDirs: 2000, MaxMatches: 1 << 30, CrossMounts: cross}
		dirs, trunc, err := discoverRoot(context.Background(), "/**", lim)
		if err != nil {
			t.Fatal(err)
		}
		if trunc == "" && len(dirs) >= lim.MaxDirs {
			t.Errorf("cross %v: %d matches and not truncated", cross, len(dirs))
		}
		t.Logf("cross %v: %d matches, truncated %q", cross, len(dirs), trunc)
		mustNotBeKernel(t, dirs)
		dirs, _, err = discoverRoot(context.Background(), "/*", discoverLimits{CrossMounts: cross})
		if err != nil || len(dirs) == 0 {
			t.Fatalf("/*: %d, %v", len(dirs), err)
		}
		mustNotBeKernel(t, dirs)
	}
	// The default match cap bounds /** too.
	dirs, trunc, err := discoverRoot(context.Background(), "/**", discoverLimits{})
	if err != nil || len(dirs) > defaultMaxMatches {
		t.Fatalf("default caps: %d matches, %v", len(dirs), err)
	}
	t.Logf("default caps: %d matches, truncated %q", len(dirs), trunc)
}

func TestDiscoverCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := discoverRoot(ctx, "/**", discoverLimits{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled before: %v", err)
	}

	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		dirs, _, err := discoverRoot(ctx, "/**", discoverLimits{MaxDirs: 1 << 30, MaxMatches: 1 << 30, CrossMounts: true})
		done <- result{len(dirs), err}
	}()
	select {
	case r := <-done: // the whole machine walked in 50 ms: nothing to cancel
		t.Skipf("walk of / ended before the cancel: %d matches, %v", r.n, r.err)
	case <-time.After(50 * time.Millisecond):
	}
	cancel()
	select {
	case r := <-done:
		if !errors.Is(r.err, context.Canceled) || r.n != 0 {
			t.Fatalf("after cancel: %d matches, %v; want none and context.Canceled", r.n, r.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("walk of / still running 5 s after the cancel")
	}
}

func TestDiscoverOwnerFromDescriptor(t *testing.T) {
	root := discoverTree(t, "runs/mine/", "runs/theirs/")
	if os.Geteuid() == 0 {
		if err := os.Chown(filepath.Join(root, "runs/theirs"), 12345, 23456); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(root, "runs/theirs"), 0o750); err != nil {
		t.Fatal(err)
	}
	dirs, _, err := discoverRoot(context.Background(), filepath.Join(root, "runs/*"), discoverLimits{})
	if err != nil || len(dirs) != 2 {
		t.Fatalf("%v, %v", dirs, err)
	}
	for _, d := range dirs {
		fi, err := os.Lstat(d.Path)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if d.UID != st.Uid || d.GID != st.Gid || d.Mode != fi.Mode() {
			t.Errorf("%s: got %d:%d %v, Lstat says %d:%d %v", d.Path, d.UID, d.GID, d.Mode, st.Uid, st.Gid, fi.Mode())
		}
	}
	if os.Geteuid() == 0 && (dirs[1].UID != 12345 || dirs[1].GID != 23456) {
		t.Errorf("theirs: %d:%d, want 12345:23456", dirs[1].UID, dirs[1].GID)
	}
}

func TestDiscoverNoDescriptorLeak(t *testing.T) {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("no /proc/self/fd here")
	}
	root := discoverTree(t, "runs/a/x/exec-1/", "runs/b/exec-2/", "real/c/")
	if err := os.Symlink(filepath.Join(root, "real"), filepath.Join(root, "runs/link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "real"), filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	run := func() {
		for _, c := range []struct {
			ctx     context.Context
			pattern string
			lim     discoverLimits
		}{
			{context.Background(), filepath.Join(root, "runs/*"), discoverLimits{}},
			{context.Background(), filepath.Join(root, "**/exec-*"), discoverLimits{}},
			{context.Background(), filepath.Join(root, "**"), discoverLimits{MaxMatches: 2}},
			{context.Background(), filepath.Join(root, "**"), discoverLimits{MaxDirs: 3}},
			{context.Background(), filepath.Join(root, "link/*"), discoverLimits{}},
			{context.Background(), filepath.Join(root, "runs/a"), discoverLimits{}},
			{context.Background(), filepath.Join(root, "missing/*"), discoverLimits{}},
			{cancelled, filepath.Join(root, "**"), discoverLimits{}},
			{context.Background(), "/**", discoverLimits{MaxDirs: 300, MaxMatches: 1 << 30}},
		} {
			_, _, _ = discoverRoot(c.ctx, c.pattern, c.lim)
		}
	}
	run() // warm up: the runtime may open descriptors of its own once
	count := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	before := count()
	for range 5 {
		run()
	}
	if after := count(); after != before {
		t.Fatalf("%d descriptors open before, %d after", before, after)
	}
}

// TestChooseShares: one owner's many folders never push out another's
// workspaces, watched or new, and room left over is used.
func TestChooseShares(t *testing.T) {
	mk := func(uid uint32, prefix string, n int) []found {
		var out []found
		for i := range n {
			out = append(out, found{Path: fmt.Sprintf("/r/%s-%04d", prefix, i), UID: uid})
		}
		return out
	}
	byUID := func(f found) uint32 { return f.UID }
	count := func(fs []found, uid uint32) int {
		n := 0
		for _, f := range fs {
			if f.UID == uid {
				n++
			}
		}
		return n
	}
	flood, victim := mk(1, "m", 1100), mk(2, "v", 2)
	cands := append(slices.Clone(flood), victim...)

	// Nothing watched yet: the victim's both, the flood the rest.
	ch := choose(cands, byUID, nil, 10)
	if len(ch.keep) != 10 || count(ch.keep, 2) != 2 || ch.share != 5 || len(ch.left[1]) != 1092 {
		t.Fatalf("fresh: kept %d (victim %d), share %d, left %d", len(ch.keep), count(ch.keep, 2), ch.share, len(ch.left[1]))
	}
	// The flood holds the whole cap; the victim's new folders still get their share.
	watched := map[string]bool{}
	for _, f := range flood[:10] {
		watched[f.Path] = true
	}
	ch = choose(cands, byUID, watched, 10)
	if count(ch.keep, 2) != 2 || len(ch.keep) != 10 {
		t.Fatalf("after a flood: kept %d, victim %d", len(ch.keep), count(ch.keep, 2))
	}
	// The victim's watched ones stay whatever the flood does, and so do the
	// flood's within its share.
	watched = map[string]bool{victim[0].Path: true, victim[1].Path: true}
	for _, f := range flood[500:508] {
		watched[f.Path] = true
	}
	ch = choose(cands, byUID, watched, 10)
	kept := map[string]bool{}
	for _, f := range ch.keep {
		kept[f.Path] = true
	}
	for p := range watched {
		if !kept[p] {
			t.Errorf("%s watched and released with room for it", p)
		}
	}
	// Many owners, one folder each, fewer slots than owners: each gets at most one.
	var many []found
	for uid := range uint32(20) {
		many = append(many, mk(uid, fmt.Sprint("u", uid), 3)...)
	}
	ch = choose(many, byUID, nil, 10)
	for uid := range uint32(10) {
		if count(ch.keep, uid) != 1 {
			t.Errorf("owner %d: %d kept, want 1", uid, count(ch.keep, uid))
		}
	}
}

// TestWalkOwnerBudgets: one owner's folders count against that owner's
// share of the folders a walk looks at and of the matches it holds; the
// walk goes on with everyone else's.
func TestWalkOwnerBudgets(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give folders to other uids")
	}
	var entries []string
	for i := range 60 {
		entries = append(entries, fmt.Sprintf("runs/m/d%02d/exec-%02d/", i, i))
	}
	entries = append(entries, "runs/v/deep/exec-v/")
	root := discoverTree(t, entries...)
	for _, e := range entries {
		owner := 12345
		if strings.HasPrefix(e, "runs/v/") {
			owner = 23456
		}
		for p := filepath.Join(root, e); p != filepath.Join(root, "runs"); p = filepath.Dir(p) {
			if err := os.Lchown(p, owner, owner); err != nil {
				t.Fatal(err)
			}
		}
	}
	lim := discoverLimits{MaxDirs: 1000, MaxOwnerDirs: 20, MaxMatches: 5}
	res, err := walkRoot(context.Background(), filepath.Join(root, "runs/**/exec-*"), lim)
	if err != nil {
		t.Fatal(err)
	}
	var victim, flood int
	for _, f := range res.dirs {
		switch f.UID {
		case 23456:
			victim++
		case 12345:
			flood++
		}
	}
	if victim != 1 || flood > 5 || res.ownerNotes[12345] == "" || res.ownerNotes[23456] != "" || !res.partial {
		t.Errorf("victim %d, flood %d held; notes %v, partial %v", victim, flood, res.ownerNotes, res.partial)
	}
	// A walk cut short finds again, one by one, what is watched now.
	lim.Watched = map[string]bool{filepath.Join(root, "runs/m/d59/exec-59"): true}
	res, err = walkRoot(context.Background(), filepath.Join(root, "runs/**/exec-*"), lim)
	if err != nil {
		t.Fatal(err)
	}
	recheck(filepath.Join(root, "runs/**/exec-*"), res, lim)
	if !slices.ContainsFunc(res.dirs, func(f found) bool { return lim.Watched[f.Path] }) {
		t.Errorf("a watched workspace the walk did not reach is lost: %v", foundPaths(root, res.dirs))
	}
}
