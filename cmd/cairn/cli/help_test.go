package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// run runs cairn's command line in process: stdout, stderr, exit code.
func run(args ...string) (string, string, int) {
	var out, errOut bytes.Buffer
	code := Run(context.Background(), args, &out, &errOut)
	return out.String(), errOut.String(), code
}

// helpGolden compares got with testdata/golden/name (rewritten with -update).
func helpGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run %s -update to write it)", err, t.Name())
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file (go test -run %s -update rewrites it):\n--- got\n%s\n--- want\n%s", path, t.Name(), got, want)
	}
}

// transcript is a command line, its exit code and its two outputs.
func transcript(args ...string) string {
	out, errOut, code := run(args...)
	return fmt.Sprintf("$ cairn %s\nexit %d\n--- stdout\n%s--- stderr\n%s", strings.Join(args, " "), code, out, errOut)
}

// Help and bad command lines, as users see them: GNU-style --flags, no
// internal flags, one line for a bad flag (exit 2), help on stdout (exit 0).
func TestHelpGolden(t *testing.T) {
	for name, args := range map[string][]string{
		"usage":             {"--help"},
		"help-list":         {"help", "list"},
		"list-help":         {"list", "--help"},
		"daemon-help":       {"daemon", "--help"},
		"restore-help":      {"restore", "-h"},
		"service-help":      {"help", "service"},
		"fleet-fetch-help":  {"help", "fleet", "fetch"},
		"bad-flag":          {"list", "--bogus"},
		"bad-flag-single":   {"list", "-bogus", "/tmp"},
		"bad-value":         {"restore", "/tmp", "c1", "--max-file-size", "lots"},
		"missing-value":     {"list", "/tmp", "--socket"},
		"unknown-command":   {"nope"},
		"unknown-top-flag":  {"--bogus"},
		"help-unknown":      {"help", "nope"},
		"missing-arguments": {"list"},
	} {
		t.Run(name, func(t *testing.T) { helpGolden(t, name, transcript(args...)) })
	}
}

// Every command's --help (and `cairn help <command>`) exits 0 with the help
// on stdout and nothing on stderr, and no help shows an internal flag.
func TestEveryHelpExitsZero(t *testing.T) {
	for name, c := range commands {
		for _, args := range [][]string{{name, "--help"}, {"help", name}} {
			out, errOut, code := run(args...)
			if code != 0 || errOut != "" || !strings.HasPrefix(out, "usage: cairn "+name) {
				t.Errorf("cairn %v: exit %d, stderr %q, stdout %q", args, code, errOut, out)
			}
			if strings.Contains(out, "internal") || strings.Contains(out, "--worker") {
				t.Errorf("cairn %v shows an internal flag:\n%s", args, out)
			}
		}
		for _, sub := range c.subs {
			if out, errOut, code := run("help", name, sub); code != 0 || errOut != "" || out == "" {
				t.Errorf("cairn help %s %s: exit %d, stderr %q", name, sub, code, errOut)
			}
		}
	}
}

// A bad flag is one line on stderr with the flag's two dashes, exit 2.
func TestBadFlagOneLine(t *testing.T) {
	for name := range commands {
		out, errOut, code := run(name, "--bogus")
		want := fmt.Sprintf("cairn %s: unknown flag --bogus; see 'cairn help %s'\n", name, name)
		if name == "fleet" {
			continue // fleet's flags belong to its subcommands
		}
		if code != ExitUsage || out != "" || errOut != want {
			t.Errorf("cairn %s --bogus: exit %d, stdout %q, stderr %q; want %q", name, code, out, errOut, want)
		}
	}
}

func TestVersion(t *testing.T) {
	defer func(v, d string) { Version, BuildDate = v, d }(Version, BuildDate)
	bi := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
		{Key: "vcs.time", Value: "2026-01-02T03:04:05Z"},
		{Key: "vcs.modified", Value: "true"},
	}}
	var b bytes.Buffer
	Version, BuildDate = "dev", ""
	printVersion(&b, versionOf(bi))
	if got := b.String(); !strings.HasPrefix(got, "cairn (devel) ") ||
		!strings.Contains(got, "\ncommit 0123456789abcdef0123456789abcdef01234567 (modified) 2026-01-02T03:04:05Z\n") {
		t.Errorf("source build:\n%s", got)
	}
	// go install …@v1.2.3: the module's version, no VCS settings.
	b.Reset()
	printVersion(&b, versionOf(&debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}))
	if got := b.String(); !strings.HasPrefix(got, "cairn v1.2.3 ") || strings.Contains(got, "commit") {
		t.Errorf("go install build:\n%s", got)
	}
	// The release build stamps the version and date.
	b.Reset()
	Version, BuildDate = "1.2.3", "2026-02-03T04:05:06Z"
	printVersion(&b, versionOf(bi))
	if got := b.String(); !strings.HasPrefix(got, "cairn 1.2.3 ") || !strings.HasSuffix(got, "\nbuilt  2026-02-03T04:05:06Z\n") {
		t.Errorf("release build:\n%s", got)
	}
	// A release build in a git worktree: go stamped no VCS, build.sh the commit.
	defer func(c string) { Commit = c }(Commit)
	b.Reset()
	Commit = "0123abcd-dirty"
	printVersion(&b, versionOf(&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}))
	if got := b.String(); !strings.Contains(got, "\ncommit 0123abcd-dirty\n") {
		t.Errorf("stamped commit:\n%s", got)
	}
	for _, args := range [][]string{{"--version"}, {"version"}} {
		if out, _, code := run(args...); code != 0 || !strings.HasPrefix(out, "cairn 1.2.3 ") {
			t.Errorf("cairn %v: exit %d, %q", args, code, out)
		}
	}
}
