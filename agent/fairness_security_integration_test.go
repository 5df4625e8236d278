//go:build linux

package agent_test

// A local attacker against discovery's caps and against the modes of the
// stores cairn keeps inside workspaces (README, "Security").

import (
	"fmt"
	"io/fs"
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
	// Three more discovery passes (2 s apart): both stay, the cap holds. Not a
	// wait: no status says a pass happened, so the test watches for 6 s.
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

// TestSecurityHankweaveStorePrivate: a Hankweave store lives inside the
// workspace. A 0600 file of its owner's, once sealed, must not be readable
// by another user through the store: every file of it refuses that user.
// A store left open to others (as an older cairn made them) is named in
// the owner's status with the fix, and left as it is.
func TestSecurityHankweaveStorePrivate(t *testing.T) {
	alice, bob := newUser(t), newUser(t)
	base := openBase(t)
	exec := filepath.Join(base, "exec")
	ownedDir(t, alice, exec, map[string]string{
		".hankweave/.keep":        "",
		"agentRoot/notes.txt":     "public\n",
		"agentRoot/secret.txt":    "ALICE PRIVATE KEY\n",
		"agentRoot/sub/other.txt": "more\n",
	})
	secret := filepath.Join(exec, "agentRoot", "secret.txt")
	if err := os.Chmod(secret, 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, filepath.Join(base, "state"), "--watch", exec)
	waitWatching(t, d, exec)
	if code, body := httpAs(t, alice, d.socket, "POST", "/v1/checkpoint", api.CheckpointRequest{Workspace: exec, Label: "sealed"}); code != 200 {
		t.Fatalf("alice's checkpoint: %d %s", code, body)
	}
	store := hwStore(exec)
	if hits := storesHolding(t, "secret.txt", filepath.Dir(store)); len(hits) == 0 {
		t.Fatal("the secret was not sealed: nothing to protect")
	}

	// Every file of the store, and its ledger, as bob.
	var files []string
	_ = filepath.WalkDir(store, func(p string, de fs.DirEntry, err error) error {
		if err == nil && de.Type().IsRegular() {
			files = append(files, p)
		}
		return nil
	})
	files = append(files, filepath.Join(exec, ".hankweave", "checkpoints", "cairn-ledger.jsonl"))
	if len(files) < 10 {
		t.Fatalf("only %d files in the store: %v", len(files), files)
	}
	script := `for f; do head -c1 "$f" >/dev/null 2>&1 && echo "$f"; done; exit 0`
	out, err := asUser(bob, "sh", append([]string{"-c", script, "sh"}, files...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("reading as bob: %v %s", err, out)
	}
	if read := strings.Fields(string(out)); len(read) > 0 {
		t.Fatalf("bob read %d of the %d files of alice's store, e.g. %v", len(read), len(files), read[:min(len(read), 5)])
	}
	if fi, err := os.Stat(store); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("store %s: %v %v, want 0700", store, fi.Mode().Perm(), err)
	}

	// An existing store open to others (an older cairn's) is named, not changed.
	if err := os.Chmod(store, 0o755); err != nil {
		t.Fatal(err)
	}
	var named string
	waitFor(t, 20*time.Second, "the open store named in alice's status", func() bool {
		for _, w := range statusAs(t, alice, d.socket).Workspaces {
			if w.Dir == exec && strings.Contains(w.StoreExposed, store) && strings.Contains(w.StoreExposed, "chmod -R go-rwx "+store) {
				named = w.StoreExposed
				return true
			}
		}
		return false
	})
	t.Logf("status says: %s", named)
	if code, body := httpAs(t, alice, d.socket, "POST", "/v1/checkpoint", api.CheckpointRequest{Workspace: exec, Label: "again"}); code != 200 {
		t.Fatalf("alice's checkpoint: %d %s", code, body)
	}
	if fi, err := os.Stat(store); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("store %s changed by cairn: %v %v", store, fi.Mode().Perm(), err)
	}
	// Closed again by its owner: no longer named.
	if err := os.Chmod(store, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, w := range statusAs(t, alice, d.socket).Workspaces {
		if w.Dir == exec && w.StoreExposed != "" {
			t.Errorf("a private store still named: %s", w.StoreExposed)
		}
	}
}
