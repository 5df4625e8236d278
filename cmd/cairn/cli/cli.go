// Package cli implements the cairn command, one file per subcommand.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
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
	ExitRefused    = 5 // refused: no such checkpoint or path, a codon is running, a rollback is in progress, an ambiguous or unusable target
	ExitDoctor     = 6 // cairn doctor found problems; each is printed with its fix
)

// exitError carries an exit code other than ExitFailure.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// errSilent is an exit code's only cause: the output already said it all.
var errSilent = errors.New("(printed)")

func usageErr(format string, a ...any) error {
	return &exitError{ExitUsage, fmt.Errorf(format, a...)}
}

// env is what every subcommand gets.
type env struct {
	stdout, stderr io.Writer
	log            zerolog.Logger
	// sets are the flag sets the command made (newFlags), for help's tables.
	sets []flagSpec
}

type command struct {
	summary string
	run     func(ctx context.Context, e *env, args []string) error
	// subs are the command's own subcommands (service install, fleet list):
	// completion offers them, the man page lists each one's flags.
	subs []string
	// hidden commands are not listed in the usage, completion or man page.
	hidden bool
}

var commands = map[string]*command{}

func register(name, summary string, run func(ctx context.Context, e *env, args []string) error) *command {
	c := &command{summary: summary, run: run}
	commands[name] = c
	return c
}

// Run runs the command line and returns the process exit code.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	e := &env{stdout: stdout, stderr: stderr, log: newLogger(stderr)}
	ctx = e.log.WithContext(ctx)
	switch {
	case len(args) == 0 || args[0] == "-h" || args[0] == "--help":
		usage(stdout)
		return ExitOK
	case args[0] == "help":
		return report(stderr, runHelp(ctx, e, args[1:]))
	case args[0] == "--version" || args[0] == "-version" || args[0] == "-V":
		args = []string{"version"}
	}
	cmd, ok := commands[args[0]]
	if !ok {
		if strings.HasPrefix(args[0], "-") {
			fmt.Fprintf(stderr, "cairn: unknown flag %s; see 'cairn help'\n", printable.String(dashes(args[0])))
		} else {
			fmt.Fprintf(stderr, "cairn: unknown command %q; see 'cairn help'\n", args[0]) // %q escapes
		}
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
	if errors.Is(err, errSilent) {
		var ee *exitError
		if errors.As(err, &ee) {
			return ee.code
		}
		return ExitFailure
	}
	var bare bareError
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintln(stderr, printable.String(ue.Error()))
		return ExitUsage
	}
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
