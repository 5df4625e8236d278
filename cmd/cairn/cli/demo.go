package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/agent/config"
	"github.com/cairn-dev/cairn/agent/hankweave/hwsim"
	"github.com/cairn-dev/cairn/snapshot"
)

func init() {
	register("demo", "run the daemon on a demo execution directory while a scripted codon run plays into it", runDemo)
}

// runDemo starts the daemon on a fresh Hankweave-layout execution directory,
// plays a small codon run into it (the runtime's own state.json, journal and
// lock protocol, as the tests' simulator writes them), and prints each
// checkpoint as the daemon seals it.
func runDemo(ctx context.Context, e *env, args []string) error {
	fs := newFlags("demo", "demo [--dir D] [--keep]", e)
	dir := fs.String("dir", "", "folder to create the demo in (default: a new temporary folder)")
	keep := fs.Bool("keep", true, "leave the demo folder for inspection")
	pace := fs.Duration("pace", 700*time.Millisecond, "pause between the run's steps")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	if *dir == "" {
		d, err := os.MkdirTemp("", "cairn-demo-")
		if err != nil {
			return err
		}
		*dir = d
	}
	if !*keep {
		defer os.RemoveAll(*dir)
	}
	exec := filepath.Join(*dir, "exec")
	state := filepath.Join(*dir, "state")
	for _, d := range []string{filepath.Join(exec, ".hankweave"), filepath.Join(exec, "agentRoot")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	cfg, err := config.Parse("demo", "[defaults]\nautosave_quiet = \"500ms\"\n")
	if err != nil {
		return err
	}
	daemonCtx, stop := context.WithCancel(ctx)
	d := agent.New(cfg, agent.Options{Watch: []string{exec}, StateDir: state, Socket: filepath.Join(state, "cairn.sock"), Version: Version}, e.log)
	done := make(chan error, 1)
	go func() { done <- d.Run(daemonCtx) }()
	defer func() {
		stop()
		<-done
	}()
	fmt.Fprintf(e.stdout, "cairn daemon watching %s (socket %s)\n\n", exec, filepath.Join(state, "cairn.sock"))

	st, err := waitStore(ctx, exec)
	if err != nil {
		return err
	}
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
		fmt.Fprintf(e.stdout, "» %s\n", what)
		recs := st.Records()
		for _, r := range recs[shown:] {
			fmt.Fprintf(e.stdout, "    sealed %s %-11s %s %s\n", r.ID, r.Kind, short(r.SHA), strings.TrimSpace(r.CodonID+" "+string(r.State)))
		}
		shown = len(recs)
		time.Sleep(*pace)
	}
	show("workspace first watched")

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
	if err := step("the runtime crashes during review (lock left, process gone)",
		sim.StartCodon("review"),
		sim.WriteFile("REVIEW.md", "looks good\n"),
		sim.Crash()); err != nil {
		return err
	}

	fmt.Fprintf(e.stdout, "\ncairn list %s:\n", exec)
	recs := st.Records()
	for i, j := 0, len(recs)-1; i < j; i, j = i+1, j-1 {
		recs[i], recs[j] = recs[j], recs[i]
	}
	printList(e.stdout, recs, "", time.Now())
	fmt.Fprintf(e.stdout, "\ninspect with plain git:\n  git --git-dir=%s log --oneline --all\n", st.GitDir())
	return nil
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
