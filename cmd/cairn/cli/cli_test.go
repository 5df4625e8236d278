package cli_test

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var cairnBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "cairn-cli-test")
	if err != nil {
		panic(err)
	}
	cairnBin = filepath.Join(dir, "cairn")
	out, err := exec.Command("go", "build", "-o", cairnBin, "github.com/cairn-dev/cairn/cmd/cairn").CombinedOutput()
	if err != nil {
		panic(string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// cairn runs the real binary and returns stdout, stderr and the exit code.
func cairn(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(cairnBin, args...)
	cmd.Env = append(os.Environ(), env...)
	var so, se strings.Builder
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return so.String(), se.String(), code
}

type record struct {
	ID, SHA, Kind, Label, State, CodonID, RunID, Ref string
	Added, Changed, Removed                          int
}

func TestCheckpointAndList(t *testing.T) {
	ws, state := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("a\n"), 0o644)
	env := []string{"CAIRN_STATE_DIR=" + state}
	out, errOut, code := cairn(t, env, "checkpoint", ws, "--label", "first", "--json")
	if code != 0 {
		t.Fatalf("checkpoint: exit %d: %s", code, errOut)
	}
	var rec record
	if err := json.Unmarshal([]byte(out), &rec); err != nil || rec.ID != "c1" || rec.Kind != "manual" || rec.Label != "first" || rec.Added != 1 || rec.State != "ok" {
		t.Fatalf("record %+v (%v) from %s", rec, err, out)
	}
	os.WriteFile(filepath.Join(ws, "b.txt"), []byte("b\n"), 0o644)
	if _, errOut, code := cairn(t, env, "checkpoint", ws, "--status", "completed", "--codon", "write", "--run", "1-abcde"); code != 0 {
		t.Fatalf("lifecycle checkpoint: exit %d: %s", code, errOut)
	}
	out, _, code = cairn(t, env, "list", ws)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[0], "✔ c2") || !strings.Contains(lines[0], "write/1-abcde") ||
		!strings.HasPrefix(lines[1], "+ c1") || !strings.Contains(lines[1], "first") || !strings.Contains(lines[1], rec.SHA[:7]) {
		t.Fatalf("list (exit %d):\n%s", code, out)
	}
	out, _, _ = cairn(t, env, "list", ws, "--json")
	var recs []record
	if err := json.Unmarshal([]byte(out), &recs); err != nil || len(recs) != 2 || recs[0].ID != "c2" || recs[0].Ref != "refs/heads/run-1-abcde" {
		t.Fatalf("list --json: %v %+v", err, recs)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"nope"},
		{"checkpoint"},
		{"checkpoint", t.TempDir(), "--status", "bogus", "--codon", "a", "--run", "r"},
		{"checkpoint", t.TempDir(), "--status", "completed"},
	} {
		if _, errOut, code := cairn(t, nil, args...); code != 2 || errOut == "" {
			t.Errorf("cairn %v: exit %d, stderr %q; want exit 2 and a message", args, code, errOut)
		}
	}
}

func TestNoGit(t *testing.T) {
	ws := t.TempDir()
	// No git on PATH at all.
	_, errOut, code := cairn(t, []string{"PATH=" + t.TempDir(), "CAIRN_STATE_DIR=" + t.TempDir()}, "checkpoint", ws)
	if code != 3 || !strings.Contains(errOut, "git not found; checkpoints disabled") {
		t.Errorf("without git: exit %d, %q", code, errOut)
	}
	// A git older than 2.28 is refused by name.
	bin := t.TempDir()
	os.WriteFile(filepath.Join(bin, "git"), []byte("#!/bin/sh\necho 'git version 2.20.1'\n"), 0o755)
	_, errOut, code = cairn(t, []string{"PATH=" + bin, "CAIRN_STATE_DIR=" + t.TempDir()}, "checkpoint", ws)
	if code != 3 || !strings.Contains(errOut, "2.20.1") || !strings.Contains(errOut, "2.28") {
		t.Errorf("with git 2.20: exit %d, %q", code, errOut)
	}
}
