package snapshot

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// TestStoreCreatedPrivate: a new store's folder is 0700, git's files in it
// are its owner's alone whatever the umask, the ledger 0600; a store opened
// to others is named (with the chmod), and never changed by cairn.
func TestStoreCreatedPrivate(t *testing.T) {
	for _, layout := range []Layout{LayoutHankweave, LayoutPlain} {
		t.Run(string(layout), func(t *testing.T) {
			dir := t.TempDir()
			if err := os.Chmod(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if layout == LayoutHankweave {
				if err := os.MkdirAll(filepath.Join(dir, ".hankweave"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("a\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			state := filepath.Join(t.TempDir(), "state")
			s, err := Open(context.Background(), dir, Options{Layout: layout, StateDir: state})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if _, err := s.Seal(context.Background(), SealRequest{Kind: ckpt.KindManual, Label: "x"}); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(s.GitDir())
			if err != nil || fi.Mode().Perm() != 0o700 {
				t.Fatalf("store folder %v %v, want 0700", fi.Mode().Perm(), err)
			}
			if fi, err := os.Stat(s.LedgerPath()); err != nil || fi.Mode().Perm()&0o077 != 0 {
				t.Fatalf("ledger %v %v, want 0600", fi.Mode().Perm(), err)
			}
			if got := s.Exposure(); got != "" {
				t.Errorf("a private store named: %s", got)
			}
			// All the folders above it opened: only the store's own modes stand between.
			for p := filepath.Dir(s.GitDir()); p != "/"; p = filepath.Dir(p) {
				if fi, err := os.Stat(p); err == nil && fi.Mode().Perm()&0o011 != 0o011 {
					defer os.Chmod(p, fi.Mode().Perm())
					if err := os.Chmod(p, fi.Mode().Perm()|0o011); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := os.Chmod(s.GitDir(), 0o755); err != nil {
				t.Fatal(err)
			}
			got := s.Exposure()
			if !strings.Contains(got, s.GitDir()+" (mode 0755)") || !strings.Contains(got, "chmod -R go-rwx "+s.GitDir()) {
				t.Errorf("an open store: %q", got)
			}
			if fi, _ := os.Stat(s.GitDir()); fi.Mode().Perm() != 0o755 {
				t.Errorf("Exposure changed the store's mode: %v", fi.Mode().Perm())
			}
		})
	}
}

// A store cairn creates is sealed by the in-process engine from its second
// checkpoint: making it private must not set anything in its config that
// engine refuses (core.sharedRepository turned it off for every new store).
func TestNewStoreSealsInProcess(t *testing.T) {
	dir, st := newTestStore(t, Options{Engine: EngineInproc})
	writeTree(t, dir, map[string]string{"a.txt": "a"})
	mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
	writeFile(t, dir, "a.txt", "b", 0o644)
	mustSeal(t, st, SealRequest{Kind: ckpt.KindAutosave, Changed: []string{"a.txt"}})
	if st.lastEngine != EngineInproc {
		t.Fatalf("a new store's incremental seal was %s's", st.lastEngine)
	}
}
