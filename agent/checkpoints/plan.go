package checkpoints

import "github.com/cairn-dev/cairn/agent/hankweave"

// A Hankweave workspace's selection is its plan's: the checkpointedFiles of
// its codons (docs/runtime-formats.md).

// CurrentPatterns is the selection of the codon running now (or last run)
// in the runtime's state st: the union of checkpointedFiles through it in
// plan order. ok is false before there is a plan.
func CurrentPatterns(st *hankweave.State) ([]string, bool) {
	if st == nil || len(st.ExecutionPlan) == 0 {
		return nil, false
	}
	codon := ""
	if _, rec, _ := hankweave.Active(st); rec != nil {
		codon = rec.CodonID
	} else if run := st.CurrentRun(); run != nil && len(run.Codons) > 0 {
		codon = run.Codons[len(run.Codons)-1].CodonID
	} else if len(st.Runs) > 0 && len(st.Runs[0].Codons) > 0 {
		codon = st.Runs[0].Codons[len(st.Runs[0].Codons)-1].CodonID
	}
	return PlanUnion(st, codon), true
}

// PlanUnion is the union of checkpointedFiles of the plan's entries through
// codon's, in plan order (all of them when the plan lacks codon).
func PlanUnion(st *hankweave.State, codon string) []string {
	var pats []string
	seen := map[string]bool{}
	for _, e := range st.ExecutionPlan {
		for _, p := range e.Codon.CheckpointedFiles {
			if !seen[p] {
				seen[p] = true
				pats = append(pats, p)
			}
		}
		if e.CodonID == codon {
			break
		}
	}
	return pats
}
