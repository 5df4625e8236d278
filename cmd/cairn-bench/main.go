// Command cairn-bench measures cairn: sealing and restoring against git's own
// pipelines, the daemon's latency and footprint, store growth and fleet
// replication. It is a development tool, not part of the shipped cairn
// binary: run it from the source tree with `go run ./cmd/cairn-bench seal`.
// README.md's figures say which run produced each number.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Exit codes, as cairn's own: 0 done, 1 failure, 2 bad command line.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

const usageText = `usage: cairn-bench seal [--sizes 1k,10k,100k] [--runs 5] [--skip-slow] [--incremental-only | --reconcile-only | --first-only] [--dir D] [--json]
       cairn-bench restore [--files 100000] [--changed 1000] [--runs 5] [--json]
       cairn-bench daemon [--files 10000] [--watch-files 100000] [--runs 3] [--bin B] [--json]
       cairn-bench replicate [--files 10000] [--samples 30] [--backlog 1000] [--runs 3] [--bin B] [--json]
       cairn-bench store [--files 10000] [--checkpoints 10000] [--sample 1000] [--dir D]`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// env is what every subcommand gets.
type env struct {
	stdout, stderr io.Writer
}

var subcommands = map[string]func(ctx context.Context, e *env, args []string) error{
	"seal":      runBenchSeal,
	"restore":   runBenchRestore,
	"daemon":    runBenchDaemon,
	"replicate": runBenchReplicate,
	"store":     runBenchStore,
	sealOnceCmd: runSealOnce, // not in the usage: what seal --first-only runs in a child
}

// run runs the command line and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	e := &env{stdout: stdout, stderr: stderr}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(stdout, usageText)
		return exitOK
	}
	sub, ok := subcommands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "cairn-bench: unknown benchmark %q\n%s\n", args[0], usageText)
		return exitUsage
	}
	err := sub(ctx, e, args[1:])
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return exitOK
	}
	fmt.Fprintf(stderr, "cairn-bench: %v\n", err)
	var ue usageError
	if errors.As(err, &ue) {
		return exitUsage
	}
	return exitFailure
}

// usageError is a bad command line (exit code 2).
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

func usageErr(format string, a ...any) error {
	return usageError{fmt.Errorf(format, a...)}
}

// newFlags makes a flag set that reports errors instead of exiting.
func newFlags(name, usageLine string, e *env) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "usage: cairn-bench %s\n", usageLine)
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
			return nil, usageError{err}
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
