//go:build unix

package snapshot

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/platform"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// TestNoWriteThroughOwnerSymlinks: an agent that replaces cairn's files or
// folders by symbolic links cannot make the worker write (or truncate) what
// the links point at.
func TestNoWriteThroughOwnerSymlinks(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	victim := filepath.Join(base, "victim")
	putFile(t, victim, "precious\n")
	victimDir := filepath.Join(base, "victim-dir")
	if err := os.Mkdir(victimDir, 0o755); err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(base, "exec")
	putFile(t, filepath.Join(ws, "agentRoot", "a.txt"), "a\n")
	putFile(t, filepath.Join(ws, ".hankweave", "state.json"), "{}\n")
	st, err := Open(ctx, ws, Options{Layout: LayoutHankweave})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Seal(ctx, SealRequest{Kind: ckpt.KindManual}); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(ws, ".hankweave", "checkpoints")
	cairnDir := filepath.Join(st.GitDir(), cairnSubdir)
	check := func(what string) {
		t.Helper()
		if b, err := os.ReadFile(victim); err != nil || string(b) != "precious\n" {
			t.Errorf("%s: the link's target was written: %q %v", what, b, err)
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
	}

	// The ledger, then the lock, as links to a file outside.
	for _, p := range []string{filepath.Join(home, hankLedgerName), filepath.Join(cairnDir, "lock")} {
		plant(p, victim)
		putFile(t, filepath.Join(st.WorkTree(), "a.txt"), "changed "+filepath.Base(p)+"\n")
		_, err := st.Seal(ctx, SealRequest{Kind: ckpt.KindManual})
		if err == nil {
			t.Errorf("seal with %s linked elsewhere succeeded", filepath.Base(p))
		}
		check(filepath.Base(p))
		// A fresh open fails too, and writes nothing.
		if _, err := Open(ctx, ws, Options{Layout: LayoutHankweave}); err == nil {
			t.Errorf("open with %s linked elsewhere succeeded", filepath.Base(p))
		}
		check(filepath.Base(p) + " on open")
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}

	// cairn's folder inside the store as a link to a folder outside: an open
	// store's next write and a fresh open both refuse it.
	plant(cairnDir, victimDir)
	putFile(t, filepath.Join(st.WorkTree(), "a.txt"), "changed cairn dir\n")
	if _, err := st.Seal(ctx, SealRequest{Kind: ckpt.KindManual}); !errors.Is(err, platform.ErrSymlink) {
		t.Errorf("seal with cairn/ linked elsewhere: %v, want a refusal", err)
	}
	if _, err := Open(ctx, ws, Options{Layout: LayoutHankweave}); !errors.Is(err, platform.ErrSymlink) {
		t.Errorf("open with cairn/ linked elsewhere: %v, want a refusal", err)
	}
	check("cairn folder")

	// The whole checkpoints folder as a link to a folder outside.
	plant(home, victimDir)
	if _, err := Open(ctx, ws, Options{Layout: LayoutHankweave}); !errors.Is(err, platform.ErrSymlink) {
		t.Errorf("open with checkpoints/ linked elsewhere: %v, want a refusal", err)
	}
	check("checkpoints folder")
}

// TestTrackedFolderBecomesLinkLeaves: a tracked folder replaced by a
// symbolic link to another folder holding files of the same names and
// contents. The checkpoint must hold nothing under the link (git's own
// `add -A` finds those paths gone; cairn never follows a link). The git
// engine's full plan read them through the link (ls-files -d and -m) and kept
// them in an ok checkpoint; told the paths with a .gitignore among them, a
// seal takes that plan too (differential seed 1796324310238603515).
func TestTrackedFolderBecomesLinkLeaves(t *testing.T) {
	for _, engine := range []string{EngineGit, EngineInproc} {
		for _, told := range [][]string{nil, {"-x", "-x/.gitignore", "-x/keep.log"}, {"-x", "-x/keep.log"}} {
			t.Run(engine+"/told="+strings.Join(told, ","), func(t *testing.T) {
				ws := t.TempDir()
				st := openTestStore(t, ws, Options{Engine: engine})
				same := map[string]string{".gitignore": "*.log\n!keep.log\n", "keep.log": "k\n", "other.log": "o\n"}
				files := map[string]string{"f0": "zero\n", ".gitignore": "*.log\n"}
				for n, c := range same {
					files["a/"+n], files["-x/"+n] = c, c
				}
				writeTree(t, ws, files)
				mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
				removeAll(t, ws, "-x")
				if err := os.Symlink("a", filepath.Join(ws, "-x")); err != nil {
					t.Fatal(err)
				}
				rec := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, Changed: told})
				if rec.State != ckpt.StateOK {
					t.Errorf("checkpoint %s: %+v", rec.State, rec.Issues)
				}
				for p := range lsTree(t, st, rec.SHA) {
					if strings.HasPrefix(p, "-x") {
						t.Errorf("the checkpoint holds %s, under a folder that is a link now", p)
					}
				}
			})
		}
	}
}
