package hwsim

import (
	"fmt"
	"sort"
)

// Codon configures one codon of a simulated plan.
type Codon struct {
	ID   string
	Name string // defaults to ID
	// Files is the codon's checkpointedFiles.
	Files []string
	// RigSetup is the codon's rigSetup; the simulator plays each step's Writes
	// into agentRoot/ while the codon is preparing.
	RigSetup []RigStep
}

// RigStep is one rigSetup operation.
type RigStep struct {
	Type string // "copy" or "command"
	From string // copy
	To   string // copy
	Run  string // command
	// Writes are files (agentRoot-relative slash path → content) the step
	// leaves in the work tree when the simulator plays it.
	Writes map[string]string
}

// Copy is a rigSetup copy step: {"type":"copy","copy":{"from","to"}}.
func Copy(from, to string, writes map[string]string) RigStep {
	return RigStep{Type: "copy", From: from, To: to, Writes: writes}
}

// Command is a rigSetup command step: {"type":"command","command":{"run"}}.
func Command(run string, writes map[string]string) RigStep {
	return RigStep{Type: "command", Run: run, Writes: writes}
}

// Entry is one entry of the flattened execution plan.
type Entry struct {
	CodonID string // "review#1" for iteration 1 of loop codon "review"
	Codon   Codon
	Loop    *LoopContext
}

// LoopContext places an entry in a loop iteration (iterations count from 0,
// as the runtime's planner does: review#0 is the first).
type LoopContext struct {
	LoopID           string
	Iteration        int
	CodonIndexInLoop int
}

// Part is a piece of a plan: a Codon, or a Loop.
type Part interface{ entries() []Entry }

func (c Codon) entries() []Entry { return []Entry{{CodonID: c.ID, Codon: c}} }

// LoopPart is a loop expanded over a number of iterations.
type LoopPart struct {
	ID         string
	Iterations int
	Codons     []Codon
}

// Loop expands codons over iterations the way the runtime's planner does:
// codon ids "<id>#<iteration>", iteration from 0, with a loopContext.
func Loop(loopID string, iterations int, codons ...Codon) LoopPart {
	return LoopPart{ID: loopID, Iterations: iterations, Codons: codons}
}

func (l LoopPart) entries() []Entry {
	var out []Entry
	for it := 0; it < l.Iterations; it++ {
		for i, c := range l.Codons {
			out = append(out, Entry{
				CodonID: fmt.Sprintf("%s#%d", c.ID, it),
				Codon:   c,
				Loop:    &LoopContext{LoopID: l.ID, Iteration: it, CodonIndexInLoop: i},
			})
		}
	}
	return out
}

// Plan flattens parts into an execution plan.
func Plan(parts ...Part) []Entry {
	var out []Entry
	for _, p := range parts {
		out = append(out, p.entries()...)
	}
	return out
}

// json renders a plan entry as the runtime stores it in executionPlan.
func (e Entry) json() *obj {
	c := e.Codon
	name := c.Name
	if name == "" {
		name = c.ID
	}
	codon := newObj(
		"id", c.ID,
		"name", name,
		"type", "codon",
		"model", "sonnet",
		"continuationMode", "fresh",
		"promptText", "Simulated codon "+c.ID+".",
	)
	if len(c.RigSetup) > 0 {
		var steps []any
		for _, s := range c.RigSetup {
			switch s.Type {
			case "copy":
				steps = append(steps, newObj("type", "copy", "copy", newObj("from", s.From, "to", s.To)))
			default:
				steps = append(steps, newObj("type", "command", "command", newObj("run", s.Run)))
			}
		}
		codon.set("rigSetup", steps)
	}
	if c.Files != nil {
		codon.set("checkpointedFiles", append([]string{}, c.Files...))
	}
	o := newObj("codon", codon, "codonId", e.CodonID)
	if e.Loop != nil {
		o.set("loopContext", e.Loop.json())
	}
	return o
}

func (l *LoopContext) json() *obj {
	return newObj("loopId", l.LoopID, "iteration", l.Iteration, "codonIndexInLoop", l.CodonIndexInLoop)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
