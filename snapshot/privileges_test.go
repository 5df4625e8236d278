//go:build linux

package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/cairn-dev/cairn/platform"
)

// testUser creates an unprivileged user for the test (root only) and removes
// it afterwards.
func testUser(t *testing.T) (name string, uid, gid uint32) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a user")
	}
	if _, err := exec.LookPath("useradd"); err != nil {
		t.Skip("no useradd")
	}
	name = fmt.Sprintf("cairntest%d", rand.Intn(1_000_000))
	if out, err := exec.Command("useradd", "-M", "-N", "-s", "/usr/sbin/nologin", name).CombinedOutput(); err != nil {
		t.Skipf("useradd: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("userdel", name).Run() })
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := strconv.Atoi(u.Uid)
	b, _ := strconv.Atoi(u.Gid)
	return name, uint32(a), uint32(b)
}

// openDir is a folder every user can traverse (t.TempDir is root's 0700).
func openDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "cairn-priv-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

func chownTree(t *testing.T, root string, uid, gid uint32) {
	t.Helper()
	err := filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, int(uid), int(gid))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// notOwnedBy lists what under root does not belong to uid.
func notOwnedBy(t *testing.T, root string, uid uint32) []string {
	t.Helper()
	var bad []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != uid {
			bad = append(bad, fmt.Sprintf("%s (uid %d)", p, st.Uid))
		}
		return nil
	})
	return bad
}

// TestStoreOwnedByWorkspaceOwner: with Cred set (a root daemon acting for the
// owner), every file and folder the store creates, and the files a restore
// writes, belong to the owner — for both layouts.
func TestStoreOwnedByWorkspaceOwner(t *testing.T) {
	_, uid, gid := testUser(t)
	ctx := context.Background()
	for _, layout := range []Layout{LayoutHankweave, LayoutPlain} {
		t.Run(string(layout), func(t *testing.T) {
			base := openDir(t)
			ws := filepath.Join(base, "exec")
			work := ws
			if layout == LayoutHankweave {
				work = filepath.Join(ws, "agentRoot")
				putFile(t, filepath.Join(ws, ".hankweave", "state.json"), "{}\n")
			}
			putFile(t, filepath.Join(work, "a.txt"), "a1\n")
			chownTree(t, ws, uid, gid)
			state := filepath.Join(base, "state")
			st, err := Open(ctx, ws, Options{Layout: layout, StateDir: state, Cred: &SysCred{UID: uid, GID: gid}})
			if err != nil {
				t.Fatal(err)
			}
			c1, err := st.Seal(ctx, SealRequest{Kind: KindManual, Label: "one"})
			if err != nil || c1.SHA == "" {
				t.Fatalf("seal: %v %+v", err, c1)
			}
			putFile(t, filepath.Join(work, "d", "e", "b.txt"), "b\n")
			if err := os.Remove(filepath.Join(work, "a.txt")); err != nil {
				t.Fatal(err)
			}
			chownTree(t, ws, uid, gid)
			if _, err := st.Seal(ctx, SealRequest{Kind: KindManual, Label: "two"}); err != nil {
				t.Fatal(err)
			}
			if _, err := st.Restore(ctx, RestoreOptions{Target: c1.SHA, Label: c1.ID}); err != nil {
				t.Fatal(err)
			}
			if b, err := os.ReadFile(filepath.Join(work, "a.txt")); err != nil || string(b) != "a1\n" {
				t.Fatalf("restore did not bring a.txt back: %q %v", b, err)
			}
			if bad := notOwnedBy(t, ws, uid); len(bad) > 0 {
				t.Errorf("not owned by the workspace owner: %q", bad)
			}
			if layout == LayoutPlain {
				home := filepath.Dir(st.GitDir())
				if bad := notOwnedBy(t, home, uid); len(bad) > 0 {
					t.Errorf("store files not owned by the workspace owner: %q", bad)
				}
				if u, _, _ := ownerOf(filepath.Dir(home)); u != 0 {
					t.Errorf("the stores folder belongs to uid %d, want the daemon's", u)
				}
			}
		})
	}
}

func ownerOf(p string) (uint32, uint32, bool) {
	fi, err := os.Lstat(p)
	if err != nil {
		return 0, 0, false
	}
	st := fi.Sys().(*syscall.Stat_t)
	return st.Uid, st.Gid, true
}

// TestNoWriteThroughOwnerSymlinks: a workspace owner who replaces cairn's
// files or folders by symbolic links cannot make a root daemon write (or
// truncate, or chown) what the links point at.
func TestNoWriteThroughOwnerSymlinks(t *testing.T) {
	ctx := context.Background()
	var cred *SysCred
	uid, gid := uint32(os.Geteuid()), uint32(os.Getegid())
	if os.Geteuid() == 0 {
		if _, err := exec.LookPath("useradd"); err == nil {
			_, uid, gid = testUser(t)
			cred = &SysCred{UID: uid, GID: gid}
		}
	}
	base := openDir(t)
	victim := filepath.Join(base, "victim")
	putFile(t, victim, "precious\n")
	victimDir := filepath.Join(base, "victim-dir")
	if err := os.Mkdir(victimDir, 0o755); err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(base, "exec")
	putFile(t, filepath.Join(ws, "agentRoot", "a.txt"), "a\n")
	putFile(t, filepath.Join(ws, ".hankweave", "state.json"), "{}\n")
	chownTree(t, ws, uid, gid)
	st, err := Open(ctx, ws, Options{Layout: LayoutHankweave, Cred: cred})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Seal(ctx, SealRequest{Kind: KindManual}); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(ws, ".hankweave", "checkpoints")
	cairnDir := filepath.Join(st.GitDir(), cairnSubdir)
	check := func(what string) {
		t.Helper()
		if b, err := os.ReadFile(victim); err != nil || string(b) != "precious\n" {
			t.Errorf("%s: the link's target was written: %q %v", what, b, err)
		}
		if u, _, _ := ownerOf(victim); u != 0 && os.Geteuid() == 0 {
			t.Errorf("%s: the link's target was given to uid %d", what, u)
		}
		if ents, _ := os.ReadDir(victimDir); len(ents) > 0 {
			t.Errorf("%s: files created through a linked folder: %v", what, ents)
		}
	}
	plant := func(link, target string) {
		t.Helper()
		if err := os.RemoveAll(link); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
		_ = os.Lchown(link, int(uid), int(gid))
	}

	// The ledger, then the lock, as links to a file outside.
	for _, p := range []string{filepath.Join(home, hankLedgerName), filepath.Join(cairnDir, "lock")} {
		plant(p, victim)
		putFile(t, filepath.Join(st.WorkTree(), "a.txt"), "changed "+filepath.Base(p)+"\n")
		_, err := st.Seal(ctx, SealRequest{Kind: KindManual})
		if err == nil {
			t.Errorf("seal with %s linked elsewhere succeeded", filepath.Base(p))
		}
		check(filepath.Base(p))
		// A fresh open fails too, and writes nothing.
		if _, err := Open(ctx, ws, Options{Layout: LayoutHankweave, Cred: cred}); err == nil {
			t.Errorf("open with %s linked elsewhere succeeded", filepath.Base(p))
		}
		check(filepath.Base(p) + " on open")
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}

	if cred == nil {
		return // the folder checks guard a root daemon acting for an owner
	}
	// The whole checkpoints folder as a link to a folder outside.
	if err := os.RemoveAll(home); err != nil {
		t.Fatal(err)
	}
	plant(home, victimDir)
	_, err = Open(ctx, ws, Options{Layout: LayoutHankweave, Cred: cred})
	if !errors.Is(err, errSymlink()) {
		t.Errorf("open with checkpoints/ linked elsewhere: %v, want a refusal", err)
	}
	check("checkpoints folder")
}

func errSymlink() error { return platform.ErrSymlink }
