// Package cli implements the cairn command, one file per subcommand.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"

	"github.com/cairn-dev/cairn/platform/printable"
	"github.com/cairn-dev/cairn/snapshot"
)

// Exit codes, decided here once.
const (
	ExitOK         = 0 // done
	ExitFailure    = 1 // the operation failed; the message says why
	ExitUsage      = 2 // bad command line
	ExitNoGit      = 3 // git missing or too old: checkpoints disabled
	ExitIncomplete = 4 // a checkpoint was sealed but is partial or racy (a restore, verify: the work tree differs from the checkpoint)
	ExitRefused    = 5 // refused: a codon is running, a rollback is in progress, an ambiguous or unusable target
	ExitDoctor     = 6 // cairn doctor found problems; each is printed with its fix
)

// Version is stamped by the build (-ldflags "-X ...cli.Version=...").
var Version = "dev"

// exitError carries an exit code other than ExitFailure.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageErr(format string, a ...any) error {
	return &exitError{ExitUsage, fmt.Errorf(format, a...)}
}

// env is what every subcommand gets.
type env struct {
	stdout, stderr io.Writer
	log            zerolog.Logger
}

type command struct {
	summary string
	run     func(ctx context.Context, e *env, args []string) error
}

var commands = map[string]command{}

func register(name, summary string, run func(ctx context.Context, e *env, args []string) error) {
	commands[name] = command{summary, run}
}

// Run runs the command line and returns the process exit code.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	e := &env{stdout: stdout, stderr: stderr, log: newLogger(stderr)}
	ctx = e.log.WithContext(ctx)
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		return ExitOK
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "cairn: unknown command %q\n", args[0]) // %q escapes
		usage(stderr)
		return ExitUsage
	}
	err := cmd.run(ctx, e, args[1:])
	return report(stderr, err)
}

func report(stderr io.Writer, err error) int {
	if err == nil {
		return ExitOK
	}
	if errors.Is(err, flag.ErrHelp) {
		return ExitOK
	}
	var bare bareError
	if errors.As(err, &bare) {
		fmt.Fprintln(stderr, printable.String(bare.msg))
	} else {
		fmt.Fprintf(stderr, "cairn: %s\n", printable.String(err.Error()))
	}
	var ee *exitError
	switch {
	case errors.As(err, &ee):
		return ee.code
	case errors.Is(err, snapshot.ErrGitNotFound), errors.Is(err, snapshot.ErrGitTooOld):
		return ExitNoGit
	}
	return ExitFailure
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: cairn <command> [arguments]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-12s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nexit codes: 0 ok, 1 failure, 2 usage, 3 git missing or too old, 4 checkpoint sealed but partial or racy (verify: differences or missing objects), 5 refused, 6 doctor found problems")
}

// newLogger writes JSON, or the console format on a terminal; CAIRN_LOG_LEVEL sets the level.
// Either way no control character from a user's tree reaches w raw.
func newLogger(w io.Writer) zerolog.Logger {
	var out io.Writer = jsonLog{w}
	if f, ok := w.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
		out = consoleLog(w)
	}
	lvl := zerolog.WarnLevel
	if v := os.Getenv("CAIRN_LOG_LEVEL"); v != "" {
		lvl = parseLevel(v)
	}
	return zerolog.New(out).Level(lvl).With().Timestamp().Logger()
}

// jsonLog writes zerolog's JSON lines with the DEL, C1 and bidirectional
// controls zerolog leaves raw escaped as \uXXXX (it escapes C0 itself):
// the same JSON, safe to read with cat or less. zerolog writes one event a
// Write.
type jsonLog struct{ w io.Writer }

func (j jsonLog) Write(p []byte) (int, error) {
	if _, err := j.w.Write(printable.JSON(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// consoleLog is the console format for a terminal. zerolog quotes a string
// field holding a control character, but prints the message, field names
// and values inside arrays or objects raw: those are escaped first.
func consoleLog(w io.Writer) zerolog.ConsoleWriter {
	return zerolog.ConsoleWriter{Out: w, TimeFormat: "15:04:05", FormatPrepare: func(evt map[string]any) error {
		for k, v := range evt {
			if k == zerolog.MessageFieldName {
				if s, ok := v.(string); ok {
					v = printable.String(s)
				}
			} else if _, ok := v.(string); !ok {
				v = printableValue(v)
			}
			if pk := printable.String(k); pk != k {
				delete(evt, k)
				k = pk
			}
			evt[k] = v
		}
		return nil
	}}
}

// printableValue is v (decoded JSON) with every string in it escaped.
func printableValue(v any) any {
	switch v := v.(type) {
	case string:
		return printable.String(v)
	case []any:
		for i := range v {
			v[i] = printableValue(v[i])
		}
	case map[string]any:
		for k, x := range v {
			x = printableValue(x)
			if pk := printable.String(k); pk != k {
				delete(v, k)
				k = pk
			}
			v[k] = x
		}
	}
	return v
}

func parseLevel(s string) zerolog.Level {
	if l, err := zerolog.ParseLevel(strings.ToLower(s)); err == nil && l != zerolog.NoLevel {
		return l
	}
	return zerolog.InfoLevel
}

// newFlags makes a flag set that reports errors instead of exiting.
func newFlags(name, usageLine string, e *env) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "usage: cairn %s\n", usageLine)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses flags that may come before or after positional arguments.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, &exitError{ExitUsage, err}
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
