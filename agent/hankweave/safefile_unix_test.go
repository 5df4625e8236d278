//go:build unix

package hankweave

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/agent/hankweave/hwsim"
	"github.com/cairn-dev/cairn/agent/hankweave/hwsim/hwsimtest"
	"github.com/cairn-dev/cairn/platform"
)

// What a local attacker who owns the workspace can plant in .hankweave/, with
// cairn running as root: links to files only root may read or write, FIFOs,
// devices and huge files. Nothing may be followed, block, or be read whole.

// stoppedSim leaves a valid state.json and state.json.bak and no live lock.
func stoppedSim(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	sim := hwsimtest.New(t, dir, hwsim.Plan(hwsim.Codon{ID: "a", Files: []string{"a.md"}}, hwsim.Codon{ID: "b"}))
	sim.StartRun()
	sim.StartCodon("a")
	sim.CompleteCodon("a")
	sim.Stop()
	return dir
}

// rootOnly writes a mode-0600 file outside the workspace and returns its path.
func rootOnly(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func replaceWithLink(t *testing.T, path, target string) {
	t.Helper()
	_ = os.Remove(path)
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
}

func replaceWithFIFO(t *testing.T, path string) {
	t.Helper()
	_ = os.Remove(path)
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
}

// within fails the test when f has not returned after 5 s (a blocked open).
func within(t *testing.T, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("still blocked after 5 s")
		return nil
	}
}

func unchanged(t *testing.T, path, want string) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("%s: %v %v", path, fi, err)
	}
	if b, _ := os.ReadFile(path); string(b) != want {
		t.Fatalf("%s changed: %q", path, b)
	}
}

// A secret in the shape of a state file: were it read, it would parse.
const secretState = `{"runs":[{"runId":"SECRET-RUN","codons":[]}],"currentRunId":"SECRET-RUN","executionPlan":[]}`

func TestStateLinkToRootOnlyFileIsRefused(t *testing.T) {
	dir := stoppedSim(t)
	st, err := ReadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	bakPath := filepath.Join(dir, HankweaveDir, StateBackupFile)
	bak, _ := os.ReadFile(bakPath)
	if _, err := ParseState(bak); err != nil {
		t.Fatalf("the backup should be valid: %v", err)
	}
	secret := rootOnly(t, secretState)
	replaceWithLink(t, StatePath(dir), secret)

	got, err := ReadState(dir)
	if !errors.Is(err, platform.ErrSymlink) {
		t.Fatalf("ReadState = %+v, %v; want ErrSymlink", got, err)
	}
	if strings.Contains(err.Error(), "SECRET") {
		t.Fatalf("the secret leaked into the error: %v", err)
	}
	// The continuation write refuses too, and copies nothing into the backup.
	if err := WriteState(dir, st); !errors.Is(err, platform.ErrSymlink) {
		t.Fatalf("WriteState = %v, want ErrSymlink", err)
	}
	unchanged(t, secret, secretState)
	unchanged(t, bakPath, string(bak))
	if fi, err := os.Lstat(StatePath(dir)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("state.json should still be the planted link: %v %v", fi, err)
	}
}

func TestWriteStateNeverWritesThroughPlantedFiles(t *testing.T) {
	for _, tc := range []struct {
		name  string
		plant func(t *testing.T, path, victim string)
		file  string
	}{
		{"bak symlink", replaceWithLink, StateBackupFile},
		{"bak hard link", func(t *testing.T, path, victim string) {
			_ = os.Remove(path)
			if err := os.Link(victim, path); err != nil {
				t.Skipf("hard link: %v", err)
			}
		}, StateBackupFile},
		{"tmp symlink", replaceWithLink, StateTempFile},
		{"tmp dangling symlink", func(t *testing.T, path, victim string) {
			replaceWithLink(t, path, victim+".created")
		}, StateTempFile},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := stoppedSim(t)
			st, err := ReadState(dir)
			if err != nil {
				t.Fatal(err)
			}
			before, _ := os.ReadFile(StatePath(dir))
			victim := rootOnly(t, "victim bytes\n")
			tc.plant(t, filepath.Join(dir, HankweaveDir, tc.file), victim)

			st.Runs[0].Status = RunCompleted
			if err := WriteState(dir, st); err != nil {
				t.Fatal(err)
			}
			unchanged(t, victim, "victim bytes\n")
			if _, err := os.Lstat(victim + ".created"); err == nil {
				t.Fatal("a file was created through a dangling link")
			}
			unchanged(t, filepath.Join(dir, HankweaveDir, StateBackupFile), string(before))
			if back, err := ReadState(dir); err != nil || back.Runs[0].Status != RunCompleted {
				t.Fatalf("reread: %v", err)
			}
		})
	}
}

func TestRuntimeFilesAsFIFOsDoNotBlock(t *testing.T) {
	t.Run("state.json", func(t *testing.T) {
		dir := stoppedSim(t)
		replaceWithFIFO(t, StatePath(dir))
		if err := within(t, func() error { _, err := ReadState(dir); return err }); !errors.Is(err, platform.ErrNotRegular) {
			t.Fatalf("ReadState = %v, want ErrNotRegular", err)
		}
		if err := within(t, func() error { return WriteState(dir, &State{}) }); !errors.Is(err, platform.ErrNotRegular) {
			t.Fatalf("WriteState = %v, want ErrNotRegular", err)
		}
	})
	t.Run("state.json.bak", func(t *testing.T) {
		dir := stoppedSim(t)
		if err := os.WriteFile(StatePath(dir), []byte("{"), 0o644); err != nil { // torn: the backup is read
			t.Fatal(err)
		}
		replaceWithFIFO(t, filepath.Join(dir, HankweaveDir, StateBackupFile))
		if err := within(t, func() error { _, err := ReadState(dir); return err }); !errors.Is(err, platform.ErrNotRegular) {
			t.Fatalf("ReadState = %v, want ErrNotRegular", err)
		}
	})
	t.Run("runtime.lock", func(t *testing.T) {
		dir := stoppedSim(t)
		replaceWithFIFO(t, LockPath(dir))
		if err := within(t, func() error { _, err := ReadLock(dir); return err }); !errors.Is(err, platform.ErrNotRegular) {
			t.Fatalf("ReadLock = %v, want ErrNotRegular", err)
		}
	})
	t.Run("journal", func(t *testing.T) {
		dir := stoppedSim(t)
		replaceWithFIFO(t, JournalPath(dir))
		j := NewJournal(dir)
		if err := within(t, func() error { _, err := j.Read(); return err }); !errors.Is(err, platform.ErrNotRegular) {
			t.Fatalf("journal Read = %v, want ErrNotRegular", err)
		}
	})
}

func TestRuntimeFilesAsLinksAreRefused(t *testing.T) {
	t.Run("runtime.lock", func(t *testing.T) {
		dir := stoppedSim(t)
		lock := rootOnly(t, `{"pid":1,"lastHeartbeat":"2999-01-01T00:00:00.000Z"}`)
		replaceWithLink(t, LockPath(dir), lock)
		if lk, err := ReadLock(dir); !errors.Is(err, platform.ErrSymlink) {
			t.Fatalf("ReadLock = %+v, %v; want ErrSymlink", lk, err)
		}
	})
	t.Run("journal", func(t *testing.T) {
		dir := stoppedSim(t)
		elsewhere := rootOnly(t, line("secret"))
		replaceWithLink(t, JournalPath(dir), elsewhere)
		evs, err := NewJournal(dir).Read()
		if !errors.Is(err, platform.ErrSymlink) || len(evs) != 0 {
			t.Fatalf("journal Read = %v, %v; want ErrSymlink and nothing", ids(evs), err)
		}
	})
	t.Run("journal to a device", func(t *testing.T) {
		dir := stoppedSim(t)
		replaceWithLink(t, JournalPath(dir), "/dev/zero")
		if err := within(t, func() error { _, err := NewJournal(dir).Read(); return err }); !errors.Is(err, platform.ErrSymlink) {
			t.Fatalf("journal Read = %v, want ErrSymlink", err)
		}
	})
}

// A link to /dev/zero or a 200 MB state.json must not be read into memory.
func TestStateFileTooLargeIsNotRead(t *testing.T) {
	t.Run("link to /dev/zero", func(t *testing.T) {
		dir := stoppedSim(t)
		replaceWithLink(t, StatePath(dir), "/dev/zero")
		if err := within(t, func() error { _, err := ReadState(dir); return err }); !errors.Is(err, platform.ErrSymlink) {
			t.Fatalf("ReadState = %v, want ErrSymlink", err)
		}
	})
	t.Run("sparse 200 MB", func(t *testing.T) {
		dir := stoppedSim(t)
		bakPath := filepath.Join(dir, HankweaveDir, StateBackupFile)
		bak, _ := os.ReadFile(bakPath)
		if err := os.Truncate(StatePath(dir), 200<<20); err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, rerr := ReadState(dir)
		werr := WriteState(dir, &State{})
		runtime.ReadMemStats(&after)
		if !errors.Is(rerr, platform.ErrTooLarge) {
			t.Fatalf("ReadState = %v, want ErrTooLarge", rerr)
		}
		if !errors.Is(werr, platform.ErrTooLarge) {
			t.Fatalf("WriteState = %v, want ErrTooLarge", werr)
		}
		if d := after.TotalAlloc - before.TotalAlloc; d > 16<<20 {
			t.Fatalf("allocated %d MiB refusing it", d>>20)
		}
		unchanged(t, bakPath, string(bak))
	})
}

func TestRestoreArchiveRefusesPlantedManifest(t *testing.T) {
	const manifest = `{"entries": [{"sourcePath": "out.md", "archivePath": "rigArchive/c2/out.md", "codonId": "c2", "checkpointSha": "orphan"}]}`
	setup := func(t *testing.T) (exec, root, archived string) {
		exec = t.TempDir()
		root = filepath.Join(exec, AgentRootDir)
		archived = filepath.Join(exec, "rigArchive", "c2", "out.md")
		for _, d := range []string{root, filepath.Dir(archived), filepath.Join(exec, HankweaveDir)} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(archived, []byte("archived"), 0o644); err != nil {
			t.Fatal(err)
		}
		return exec, root, archived
	}
	all := func(string) bool { return true }
	for _, tc := range []struct {
		name  string
		plant func(t *testing.T, exec string) (kept string)
		want  error
	}{
		{"symlink", func(t *testing.T, exec string) string {
			target := rootOnly(t, manifest)
			replaceWithLink(t, filepath.Join(exec, HankweaveDir, ArchiveManifestFile), target)
			return target
		}, platform.ErrSymlink},
		{"fifo", func(t *testing.T, exec string) string {
			replaceWithFIFO(t, filepath.Join(exec, HankweaveDir, ArchiveManifestFile))
			return ""
		}, platform.ErrNotRegular},
		{"linked .hankweave", func(t *testing.T, exec string) string {
			other := t.TempDir()
			target := filepath.Join(other, ArchiveManifestFile)
			if err := os.WriteFile(target, []byte(manifest), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(filepath.Join(exec, HankweaveDir)); err != nil {
				t.Fatal(err)
			}
			replaceWithLink(t, filepath.Join(exec, HankweaveDir), other)
			return target
		}, platform.ErrSymlink},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exec, root, archived := setup(t)
			kept := tc.plant(t, exec)
			var res ArchiveResult
			err := within(t, func() (err error) { res, err = RestoreArchive(exec, root, all); return err })
			if !errors.Is(err, tc.want) || len(res.Restored) != 0 {
				t.Fatalf("RestoreArchive = %+v, %v; want %v", res, err, tc.want)
			}
			unchanged(t, archived, "archived")
			if _, err := os.Lstat(filepath.Join(root, "out.md")); err == nil {
				t.Fatal("the archived file was moved")
			}
			if kept != "" {
				unchanged(t, kept, manifest)
			}
		})
	}
}

// A regular manifest still works after the checks (the refusals are not blanket).
func TestRestoreArchiveRegularManifest(t *testing.T) {
	exec := t.TempDir()
	root := filepath.Join(exec, AgentRootDir)
	archived := filepath.Join(exec, "rigArchive", "c2", "out.md")
	for _, d := range []string{root, filepath.Dir(archived), filepath.Join(exec, HankweaveDir)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(archived, []byte("archived"), 0o644); err != nil {
		t.Fatal(err)
	}
	mpath := filepath.Join(exec, HankweaveDir, ArchiveManifestFile)
	if err := os.WriteFile(mpath, []byte(`{"entries": [{"sourcePath": "out.md", "archivePath": "rigArchive/c2/out.md", "codonId": "c2", "checkpointSha": "orphan"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	// A stale temporary file that is a link to a victim is replaced, not written through.
	victim := rootOnly(t, "victim")
	replaceWithLink(t, mpath+".tmp", victim)
	res, err := RestoreArchive(exec, root, func(string) bool { return true })
	if err != nil || len(res.Restored) != 1 {
		t.Fatalf("RestoreArchive = %+v, %v", res, err)
	}
	unchanged(t, filepath.Join(root, "out.md"), "archived")
	unchanged(t, victim, "victim")
	if b, _ := os.ReadFile(mpath); !bytes.Contains(b, []byte(`"entries": []`)) {
		t.Fatalf("manifest after: %s", b)
	}
}
