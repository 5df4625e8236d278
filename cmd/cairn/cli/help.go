package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/rs/zerolog"
)

// exitCodes is the one table of exit codes (README.md, "Exit codes"): the
// usage, the man page and README show it.
var exitCodes = []struct {
	code int
	what string
}{
	{ExitOK, "done"},
	{ExitFailure, "the operation failed (the message says why); status: the daemon is unreachable or a workspace reports errors"},
	{ExitUsage, "bad command line or config file (unknown command or flag, a bad value)"},
	{ExitNoGit, "git missing or too old: checkpoints disabled"},
	{ExitIncomplete, "a checkpoint was sealed but is partial or racy; restore, verify: the work tree differs from the checkpoint"},
	{ExitRefused, "refused: no such checkpoint or path, an ambiguous target, a codon running, a restore in progress"},
	{ExitDoctor, "cairn doctor found problems; each is printed with its fix"},
}

// usageError is a bad command line: printed as it is, one line, exit 2.
type usageError struct{ msg string }

func (u *usageError) Error() string { return u.msg }

// flagSpec is one flag set newFlags made, with its usage line.
type flagSpec struct {
	usageLine string
	fs        *flag.FlagSet
	e         *env
}

// specs maps each flag set newFlags made to its spec, for parse.
var specs sync.Map // *flag.FlagSet → flagSpec

// newFlags makes a flag set for the command name ("list", "fleet fetch")
// that reports errors instead of exiting. Its help lists flags GNU-style
// (--flag VALUE); flags whose usage starts with "internal" are hidden.
// fs.Usage prints the usage line to stderr, for commands' own usage errors.
func newFlags(name, usageLine string, e *env) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() { fmt.Fprintf(e.stderr, "usage: cairn %s\n", usageLine) }
	sp := flagSpec{usageLine, fs, e}
	specs.Store(fs, sp)
	e.sets = append(e.sets, sp)
	return fs
}

// parse parses flags that may come before or after positional arguments.
// --help prints the help to stdout (flag.ErrHelp: exit 0); a bad flag is one
// line naming the flag with its two dashes (exit 2).
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	usage := fs.Usage
	fs.Usage = func() {} // flag calls it on every error: the message is ours
	defer func() { fs.Usage = usage }()
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				if v, ok := specs.Load(fs); ok {
					sp := v.(flagSpec)
					printHelp(sp.e.stdout, sp)
				}
				return nil, err
			}
			return nil, flagError(fs.Name(), err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// singleDash is a flag named with one dash in flag's messages ("-json").
var singleDash = regexp.MustCompile(`(^|[\s:])-([A-Za-z][A-Za-z0-9-]*)`)

// flagError turns flag's message into one line with the flag's two dashes
// and where to read more.
func flagError(cmd string, err error) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		msg = "unknown flag " + dashes(name)
	} else {
		msg = singleDash.ReplaceAllString(msg, "$1--$2")
	}
	return &usageError{fmt.Sprintf("cairn %s: %s; see 'cairn help %s'", cmd, msg, cmd)}
}

// dashes writes a flag as given on a command line ("-bogus", "bogus") with
// two dashes, one for a single letter.
func dashes(name string) string {
	name = strings.TrimLeft(name, "-")
	if name, _, ok := strings.Cut(name, "="); ok {
		return dashes(name)
	}
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// hidden reports whether a flag is internal: set by cairn itself, not by users.
func hidden(f *flag.Flag) bool { return strings.HasPrefix(f.Usage, "internal") }

// flagInfo is one flag as help, completion and the man page show it.
type flagInfo struct {
	name, value, usage, def string
	bool                    bool
}

// visibleFlags are a flag set's flags, sorted, without the hidden ones.
func visibleFlags(sp flagSpec) []flagInfo {
	var out []flagInfo
	sp.fs.VisitAll(func(f *flag.Flag) {
		if hidden(f) {
			return
		}
		fi := flagInfo{name: f.Name, usage: f.Usage}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			fi.bool = true
		} else {
			fi.value = valueName(sp.usageLine, f)
			if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "0s" && !strings.Contains(f.Usage, "default") {
				fi.def = f.DefValue
			}
		}
		out = append(out, fi)
	})
	return out
}

// commonValues name the values of the flags many commands share.
var commonValues = map[string]string{"socket": "PATH", "state-dir": "DIR", "layout": "LAYOUT", "max-file-size": "SIZE", "config": "FILE"}

// valueName is what a flag takes, as its usage line names it
// ("--socket PATH"), else from its type.
func valueName(usageLine string, f *flag.Flag) string {
	if m := regexp.MustCompile(`--` + regexp.QuoteMeta(f.Name) + `[ =]([A-Za-z<][^\s\]|)]*)`).FindStringSubmatch(usageLine); m != nil {
		return m[1]
	}
	if v, ok := commonValues[f.Name]; ok {
		return v
	}
	if name, _ := flag.UnquoteUsage(f); name != "" && name != "value" && name != "string" {
		return strings.ToUpper(name)
	}
	switch f.Value.(type) {
	case *stringList:
		return "VALUE"
	}
	if name, _ := flag.UnquoteUsage(f); name == "int" || name == "uint" {
		return "N"
	}
	return "VALUE"
}

// printHelp writes a command's help: usage line, summary, flags.
func printHelp(w io.Writer, sp flagSpec) {
	fmt.Fprintf(w, "usage: cairn %s\n", sp.usageLine)
	if c := commands[strings.Fields(sp.fs.Name())[0]]; c != nil {
		fmt.Fprintf(w, "\n%s\n", c.summary)
	}
	fmt.Fprintln(w, "\nflags:")
	for _, f := range append(visibleFlags(sp), flagInfo{name: "help", bool: true, usage: "show this help"}) {
		left := "--" + f.name
		if f.value != "" {
			left += " " + f.value
		}
		usage := f.usage
		if f.def != "" {
			usage += fmt.Sprintf(" (default: %s)", f.def)
		}
		if len(left) > 22 {
			fmt.Fprintf(w, "  %s\n  %-22s  %s\n", left, "", usage)
		} else {
			fmt.Fprintf(w, "  %-22s  %s\n", left, usage)
		}
	}
}

// usage is cairn's own help: every command, then the exit codes.
func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: cairn <command> [arguments]\n       cairn help <command>\n       cairn --version\n\ncommands:")
	for _, n := range visibleCommands() {
		fmt.Fprintf(w, "  %-12s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\n'cairn help <command>' (or 'cairn <command> --help') shows a command's flags.\n\nexit codes:")
	for _, c := range exitCodes {
		fmt.Fprintf(w, "  %d  %s\n", c.code, c.what)
	}
	fmt.Fprintln(w, "  (cairn service status answers as systemctl does: 0 running, 3 stopped, 4 not installed)")
}

// visibleCommands are the commands users see, sorted.
func visibleCommands() []string {
	var names []string
	for n, c := range commands {
		if !c.hidden {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// runHelp is `cairn help [<command> [<subcommand>]]`.
func runHelp(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		usage(e.stdout)
		return nil
	}
	c, ok := commands[args[0]]
	if !ok {
		return &usageError{fmt.Sprintf("cairn help: unknown command %q; see 'cairn help'", args[0])}
	}
	return c.run(ctx, e, append(args[1:len(args):len(args)], "--help"))
}

// flagsOf is the flag set a command (and subcommand) parses, learned by
// asking it for its help with the output discarded: the same table the
// help shows feeds completion and the man page.
func flagsOf(name, sub string) (flagSpec, bool) {
	c, ok := commands[name]
	if !ok {
		return flagSpec{}, false
	}
	e := &env{stdout: io.Discard, stderr: io.Discard, log: zerolog.Nop()}
	args := []string{"--help"}
	if sub != "" {
		args = []string{sub, "--help"}
	}
	_ = c.run(context.Background(), e, args)
	if len(e.sets) == 0 {
		return flagSpec{}, false
	}
	return e.sets[len(e.sets)-1], true
}
