package watcher

import (
	"slices"
	"strings"
	"testing"
)

// MaxWatches (a test hook the daemon exposes as CAIRN_TEST_MAX_WATCHES)
// behaves as the kernel's watch limit does, and Status names the folders
// left unwatched.
func TestMaxWatchesOption(t *testing.T) {
	checkNoLeaks(t)
	root := t.TempDir()
	mkdirs(t, root, "a", "b", "c/deep")
	w, c := startWatcher(t, Options{Root: root, MaxWatches: 2}, nil)

	s := w.Status()
	if !s.LimitHit || s.Watches != 2 || s.Unwatched != 2 || !slices.Equal(s.UnwatchedDirs, []string{"b", "c"}) {
		t.Fatalf("status = %+v, want LimitHit, 2 watches, b and c unwatched", s)
	}
	if !strings.Contains(s.Err, "fs.inotify.max_user_watches") {
		t.Errorf("Err = %q, want the sysctl", s.Err)
	}
	if !overflowed(w) {
		t.Error("no Overflow after the limit was hit")
	}
	writeFiles(t, root, "a/f")
	c.waitFor(t, Create, "a/f")
}
