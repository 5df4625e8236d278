package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// bashComplete sources the generated script and completes words (the last
// one is the word under the cursor).
func bashComplete(t *testing.T, script string, words ...string) []string {
	t.Helper()
	var quoted []string
	for _, w := range words {
		quoted = append(quoted, "'"+w+"'")
	}
	cmd := exec.Command("bash", "-c", `source "$1"; COMP_WORDS=(`+strings.Join(quoted, " ")+`); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _cairn; printf '%s\n' "${COMPREPLY[@]}"`, "bash", script)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bash: %v\n%s", err, out)
	}
	return strings.Fields(string(out))
}

// The completion scripts come from the command table: bash completes
// commands, subcommands and each command's flags (never an internal one).
func TestCompletionBash(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	out, errOut, code := run("completion", "bash")
	if code != 0 || errOut != "" {
		t.Fatalf("completion bash: exit %d, %s", code, errOut)
	}
	script := filepath.Join(t.TempDir(), "cairn.bash")
	os.WriteFile(script, []byte(out), 0o644)
	for _, c := range []struct {
		words []string
		want  string
	}{
		{[]string{"cairn", "li"}, "list"},
		{[]string{"cairn", "list", "/tmp", "--a"}, "--all"},
		{[]string{"cairn", "service", "st"}, "start stop status"},
		{[]string{"cairn", "service", "status", "--j"}, "--json"},
		{[]string{"cairn", "fleet", "fetch", "--fr"}, "--from"},
		{[]string{"cairn", "completion", "z"}, "zsh"},
		{[]string{"cairn", "hook", "ge"}, "gemini"},
		{[]string{"cairn", "hook", "gemini", "--w"}, "--wait"},
		{[]string{"cairn", "help", "resto"}, "restore"},
		{[]string{"cairn", "restore", "/tmp", "c1", "--max"}, "--max-file-size"},
		{[]string{"cairn", "daemon", "--w"}, "--watch"}, // not --worker
	} {
		if got := strings.Join(bashComplete(t, script, c.words...), " "); got != c.want {
			t.Errorf("complete %q = %q, want %q", c.words, got, c.want)
		}
	}
}

func TestCompletionZshFishAndMan(t *testing.T) {
	for _, shell := range []string{"zsh", "fish"} {
		out, _, code := run("completion", shell)
		if code != 0 {
			t.Fatalf("completion %s: exit %d", shell, code)
		}
		for _, want := range []string{"list", "--all", "restore", "--max-file-size", "fetch", "--from", "install"} {
			if shell == "fish" {
				want = strings.Replace(want, "--", "-l ", 1)
			}
			if !strings.Contains(out, want) {
				t.Errorf("completion %s lacks %s", shell, want)
			}
		}
		if strings.Contains(out, "worker") || strings.Contains(out, "internal") {
			t.Errorf("completion %s offers an internal flag", shell)
		}
	}
	if _, errOut, code := run("completion", "tcsh"); code != ExitUsage || !strings.Contains(errOut, `"tcsh"`) {
		t.Errorf("completion tcsh: exit %d, %q", code, errOut)
	}
	man, _, code := run("man")
	if code != 0 || !strings.HasPrefix(man, ".TH CAIRN 1 ") {
		t.Fatalf("man: exit %d\n%s", code, man)
	}
	for _, want := range []string{".SH EXIT STATUS", `cairn list <dir> [\-\-all] [\-\-json]`, `\fB\-\-max\-file\-size\fR \fISIZE\fR`, ".B 5\nrefused", "CAIRN_SOCKET"} {
		if !strings.Contains(man, want) {
			t.Errorf("man page lacks %q", want)
		}
	}
	if strings.Contains(man, "worker") {
		t.Error("man page shows an internal flag")
	}
	if out, _, _ := run("--help"); strings.Contains(out, "  man ") {
		t.Error("the hidden man command is listed")
	}
	if _, err := exec.LookPath("groff"); err == nil {
		page := filepath.Join(t.TempDir(), "cairn.1")
		os.WriteFile(page, []byte(man), 0o644)
		if out, err := exec.Command("groff", "-man", "-Tutf8", "-ww", "-z", page).CombinedOutput(); err != nil || len(out) > 0 {
			t.Errorf("groff warns about the man page: %v\n%s", err, out)
		}
	}
}
