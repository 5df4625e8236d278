// Command cairn-demo shows cairn at work: it starts the daemon in this
// process on a fresh Hankweave-layout execution directory, plays a small
// scripted codon run into it with the simulated runtime (agent/hankweave/hwsim:
// the runtime's own state.json, journal and lock protocol), and prints each
// checkpoint as the daemon seals it.
//
// It is a development tool, not part of the shipped cairn binary (the
// simulator stays out of it): run it from the source tree with
// `go run ./cmd/cairn-demo [--dir D] [--keep] [--pace P]`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/agent/config"
	"github.com/cairn-dev/cairn/agent/hankweave/hwsim"
	"github.com/cairn-dev/cairn/cmd/cairn/cli"
	"github.com/cairn-dev/cairn/snapshot"
)

// Exit codes, as cairn's own: 0 done, 1 failure, 2 bad command line.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// options are the command line's flags.
type options struct {
	dir  string        // the folder to create the demo in; "" for a new temporary one
	keep bool          // leave the folder for inspection
	pace time.Duration // the pause between the run's steps
}

// run runs the command line and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o options
	fs := flag.NewFlagSet("cairn-demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: cairn-demo [--dir D] [--keep] [--pace P]")
		fs.PrintDefaults()
	}
	fs.StringVar(&o.dir, "dir", "", "folder to create the demo in (default: a new temporary folder)")
	fs.BoolVar(&o.keep, "keep", true, "leave the demo folder for inspection")
	fs.DurationVar(&o.pace, "pace", 700*time.Millisecond, "pause between the run's steps")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "cairn-demo: takes no arguments, got %q\n", fs.Args())
		fs.Usage()
		return exitUsage
	}
	if err := demo(ctx, o, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "cairn-demo: %v\n", err)
		return exitFailure
	}
	return exitOK
}

// demo starts the daemon on a fresh Hankweave-layout execution directory,
// plays the scripted codon run into it, and prints each checkpoint as the
// daemon seals it; the daemon's warnings go to stderr.
func demo(ctx context.Context, o options, stdout, stderr io.Writer) error {
	if o.dir == "" {
		d, err := os.MkdirTemp("", "cairn-demo-")
		if err != nil {
			return err
		}
		o.dir = d
	}
	if !o.keep {
		defer os.RemoveAll(o.dir)
	}
	exec := filepath.Join(o.dir, "exec")
	state := filepath.Join(o.dir, "state")
	socket := filepath.Join(state, "cairn.sock")
	for _, d := range []string{filepath.Join(exec, ".hankweave"), filepath.Join(exec, "agentRoot")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	cfg, err := config.Parse("demo", "[defaults]\nautosave_quiet = \"500ms\"\n")
	if err != nil {
		return err
	}
	log := zerolog.New(stderr).Level(zerolog.WarnLevel).With().Timestamp().Logger()
	daemonCtx, stop := context.WithCancel(ctx)
	d := agent.New(cfg, agent.Options{Watch: []string{exec}, StateDir: state, Socket: socket, Version: cli.Version}, log)
	done := make(chan error, 1)
	go func() { done <- d.Run(daemonCtx) }()
	defer func() {
		stop()
		<-done
	}()
	fmt.Fprintf(stdout, "cairn daemon watching %s (socket %s)\n\n", exec, socket)

	st, err := waitStore(ctx, exec)
	if err != nil {
		return err
	}
	defer st.Close()
	shown := 0
	show := func(what string) {
		// Let the daemon catch up with the step, then print what it sealed.
		deadline := time.Now().Add(5 * time.Second)
		for {
			_ = st.Reload(ctx)
			if recs := st.Records(); len(recs) > shown || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		fmt.Fprintf(stdout, "» %s\n", what)
		recs := st.Records()
		for _, r := range recs[shown:] {
			fmt.Fprintf(stdout, "    sealed %s %-11s %s %s\n", r.ID, r.Kind, short(r.SHA), strings.TrimSpace(r.CodonID+" "+string(r.State)))
		}
		shown = len(recs)
		time.Sleep(o.pace)
	}
	show("workspace first watched")

	if err := play(exec, show); err != nil {
		return err
	}

	fmt.Fprintf(stdout, "\ncairn list %s:\n", exec)
	if code := cli.Run(ctx, []string{"list", "--socket", socket, exec}, stdout, stderr); code != cli.ExitOK {
		return fmt.Errorf("cairn list %s: exit code %d", exec, code)
	}
	fmt.Fprintf(stdout, "\ninspect with plain git:\n  git --git-dir=%s log --oneline --all\n", st.GitDir())
	return nil
}

// play plays the scripted codon run into the execution directory exec with
// the simulated runtime, calling show after each step.
func play(exec string, show func(what string)) error {
	plan := hwsim.Plan(
		hwsim.Codon{ID: "plan", Name: "Plan the work", Files: []string{"PLAN.md"},
			RigSetup: []hwsim.RigStep{hwsim.Copy("templates/PLAN.md", "PLAN.md", map[string]string{"PLAN.md": "# plan\n"})}},
		hwsim.Codon{ID: "write", Name: "Write the code", Files: []string{"src"}},
		hwsim.Codon{ID: "review", Name: "Review", Files: []string{"REVIEW.md"}},
	)
	sim, err := hwsim.New(exec, plan)
	if err != nil {
		return err
	}
	if _, err := sim.StartRun(); err != nil {
		return err
	}
	// step shows what the daemon sealed after one scripted step; errs are the
	// step's simulator calls, which do nothing once one has failed.
	step := func(what string, errs ...error) error {
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		show(what)
		return nil
	}
	if err := step("codon plan: rig set up, agent starts",
		sim.StartCodon("plan")); err != nil {
		return err
	}
	if err := step("codon plan completed",
		sim.WriteFile("PLAN.md", "# plan\n1. write main.go\n2. review\n"),
		sim.CompleteCodon("plan")); err != nil {
		return err
	}
	if err := step("agent writes src/main.go (autosave after a quiet period)",
		sim.StartCodon("write"),
		sim.WriteFile("src/main.go", "package main\n\nfunc main() {}\n")); err != nil {
		return err
	}
	if err := step("codon write fails",
		sim.EditFile("src/main.go", "func main() {}", "func main() { oops"),
		sim.FailCodon("write", "build failed", true)); err != nil {
		return err
	}
	if err := step("codon write retried and completed",
		sim.StartCodon("write"),
		sim.EditFile("src/main.go", "func main() { oops", "func main() {}"),
		sim.CompleteCodon("write")); err != nil {
		return err
	}
	return step("the runtime crashes during review (lock left, process gone)",
		sim.StartCodon("review"),
		sim.WriteFile("REVIEW.md", "looks good\n"),
		sim.Crash())
}

// short is a commit id's first 7 characters, as cairn prints them.
func short(sha string) string {
	if len(sha) > 7 {
		return sha[:7]
	}
	return sha
}

// waitStore opens the workspace's store once the daemon has created it.
func waitStore(ctx context.Context, exec string) (*snapshot.Store, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(exec, ".hankweave/checkpoints/.hankweavecheckpoints/HEAD")); err == nil {
			return snapshot.Open(ctx, exec, snapshot.Options{})
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the daemon did not create the store in %s", exec)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
