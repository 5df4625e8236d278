//go:build linux

package agent_test

// A local attacker against discovery's caps and against the modes of the
// stores cairn keeps inside workspaces (README, "Security").

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/agent/api"
)

// flood makes n folders named prefix-NNNN in dir, owned by u, as u could.
func flood(t *testing.T, u testUser, dir, prefix string, n int) {
	t.Helper()
	for i := range n {
		p := filepath.Join(dir, fmt.Sprintf("%s-%04d", prefix, i))
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(p, u.uid, u.gid); err != nil {
			t.Fatal(err)
		}
	}
}

// watchedOf counts the workspaces root's status shows under dir whose base
// name begins with prefix.
func watchedOf(st api.Status, dir, prefix string) int {
	n := 0
	for _, w := range st.Workspaces {
		if filepath.Dir(w.Dir) == dir && strings.HasPrefix(filepath.Base(w.Dir), prefix) {
			n++
		}
	}
	return n
}

// TestSecurityDiscoveryFairShare: in a folder every user may write (as
// /tmp), one user makes 1,100 folders matching the root's glob, more than
// the root's cap. The other user's workspace, watched before the flood,
// stays watched through it; one made after it is watched too; the flooder's
// own status says which of theirs are not watched and why, and the victim's
// shows nothing of the flooder's.
func TestSecurityDiscoveryFairShare(t *testing.T) {
	alice, mallory := newUser(t), newUser(t)
	base := openBase(t)
	shared := filepath.Join(base, "agents")
	if err := os.Mkdir(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o1777); err != nil {
		t.Fatal(err)
	}
	early, late := filepath.Join(shared, "alice-early"), filepath.Join(shared, "alice-late")
	ownedDir(t, alice, early, map[string]string{"a.txt": "alice's\n"})
	const maxWS = 6 // the root's cap, small so the workspaces watched stay few
	pattern := filepath.Join(shared, "*")
	cfg := configFile(t, fmt.Sprintf("[[watch]]\npath = %q\nmax_workspaces = %d\n", pattern, maxWS))
	d := startDaemon(t, filepath.Join(base, "state"), "--config", cfg)
	waitWatching(t, d, early)

	// The flood, after alice's workspace is watched.
	flood(t, mallory, shared, "m", 1100)
	waitFor(t, 60*time.Second, "a discovery pass over the flood", func() bool {
		return watchedOf(d.status(), shared, "m-") >= maxWS-1
	})
	if _, ok := d.workspace(early); !ok {
		t.Fatalf("alice's workspace watched before the flood was released by it: %+v", d.status().Refused)
	}

	// Alice's workspace made after the flood is watched, and the first one kept.
	ownedDir(t, alice, late, map[string]string{"b.txt": "alice's too\n"})
	waitWatching(t, d, late)
	// Three more discovery passes (2 s apart): both stay, the cap holds.
	for end := time.Now().Add(6 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		st := d.status()
		for _, dir := range []string{early, late} {
			if _, ok := d.workspace(dir); !ok {
				t.Fatalf("%s released while the flood stands: %+v", dir, st.Refused)
			}
		}
		if n := len(st.Workspaces); n > maxWS {
			t.Fatalf("%d workspaces watched under a cap of %d", n, maxWS)
		}
	}

	// The flooder sees, in their own status, that some of theirs are not watched, and why.
	mst := statusAs(t, mallory, d.socket)
	saysWhy := false
	for _, r := range mst.NotWatched {
		if strings.Contains(r.Reason, "alice") {
			t.Errorf("mallory's status names alice's folders: %+v", r)
		}
		saysWhy = saysWhy || (r.Dir == pattern && strings.Contains(r.Reason, "uid "+strconv.Itoa(mallory.uid)) &&
			strings.Contains(r.Reason, "not watched") && strings.Contains(r.Reason, fmt.Sprintf("at most %d", maxWS)))
	}
	if !saysWhy {
		t.Errorf("mallory's status does not say which of theirs are not watched and why: %+v", mst.NotWatched)
	}
	if n := watchedOf(d.status(), shared, "m-"); n == 0 || len(mst.Workspaces) != n {
		t.Errorf("mallory sees %d workspaces, %d of theirs are watched", len(mst.Workspaces), n)
	}
	// Alice's own status: her two workspaces, nothing refused of hers, nothing of mallory's.
	ast := statusAs(t, alice, d.socket)
	if len(ast.Workspaces) != 2 || len(ast.NotWatched) != 0 {
		t.Errorf("alice's status: %d workspaces, not watched %+v", len(ast.Workspaces), ast.NotWatched)
	}
}
