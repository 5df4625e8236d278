package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/cairn-dev/cairn/snapshot"
)

func init() {
	register("demo", "seal checkpoints of a demo workspace as a scripted codon run changes it", runDemo)
}

// runDemo plays a small codon run into a Hankweave-layout execution
// directory and seals the checkpoints the daemon would seal at each step.
func runDemo(ctx context.Context, e *env, args []string) error {
	fs := newFlags("demo", "demo [--dir D]", e)
	dir := fs.String("dir", "", "execution directory to create (default: a new temporary folder)")
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
	root := filepath.Join(*dir, "agentRoot")
	for _, d := range []string{filepath.Join(*dir, ".hankweave"), filepath.Join(root, "src")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	write := func(rel, content string) error {
		return os.WriteFile(filepath.Join(root, rel), []byte(content), 0o644)
	}
	st, err := snapshot.Open(ctx, *dir, snapshot.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	fmt.Fprintf(e.stdout, "demo execution directory: %s\nstore: %s\n\n", *dir, st.GitDir())
	runID := fmt.Sprintf("%d-demo0", time.Now().UnixMilli())
	patterns := []string{"src", "*.md"}
	steps := []struct {
		what    string
		change  func() error
		changed []string
		req     snapshot.SealRequest
	}{
		{"workspace first seen", func() error { return write("README.md", "# demo\n") }, nil,
			snapshot.SealRequest{Kind: snapshot.KindBaseline, Label: "first seen", Patterns: patterns}},
		{"codon plan: rig set up", func() error { return write("src/main.go", "package main\n") }, []string{"src/main.go"},
			snapshot.SealRequest{Kind: snapshot.KindRigSetup, CodonID: "plan", CodonName: "Plan the work", RunID: runID, Patterns: patterns}},
		{"codon plan: completed", func() error { return write("PLAN.md", "1. write\n2. review\n") }, []string{"PLAN.md"},
			snapshot.SealRequest{Kind: snapshot.KindCompleted, CodonID: "plan", CodonName: "Plan the work", RunID: runID, Patterns: patterns, Duration: 1500 * time.Millisecond}},
		{"codon write: breaks a file and fails", func() error {
			if err := write("src/main.go", "package main\nfunc main() { oops\n"); err != nil {
				return err
			}
			return os.Remove(filepath.Join(root, "PLAN.md"))
		}, []string{"src/main.go", "PLAN.md"},
			snapshot.SealRequest{Kind: snapshot.KindError, CodonID: "write", CodonName: "Write the code", RunID: runID, Patterns: patterns}},
	}
	for _, s := range steps {
		if err := s.change(); err != nil {
			return err
		}
		s.req.Changed = s.changed
		rec, err := st.Seal(ctx, s.req)
		if err != nil {
			return fmt.Errorf("%s: %w", s.what, err)
		}
		fmt.Fprintf(e.stdout, "%-40s sealed %s %s (+%d ~%d -%d) in %d ms\n", s.what, rec.ID, short(rec.SHA), rec.Added, rec.Changed, rec.Removed, rec.DurationMS)
	}
	fmt.Fprintln(e.stdout, "\ncairn list "+*dir+":")
	recs := st.Records()
	for i, j := 0, len(recs)-1; i < j; i, j = i+1, j-1 {
		recs[i], recs[j] = recs[j], recs[i]
	}
	printList(e.stdout, recs, time.Now())
	fmt.Fprintf(e.stdout, "\ninspect with plain git:\n  git --git-dir=%s log --oneline --all\n", st.GitDir())
	return nil
}
