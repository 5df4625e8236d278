//go:build unix

package agent

// dropsOf is what the supervisor counts as refused from wk, by kind.
func dropsOf(wk *worker) map[string]int64 { return wk.snapshot().Dropped }
