//go:build cairnfault

package gitobj

// idxFault, set by tests built with -tags cairnfault, fails the write of a
// pack's index. The shipped build has no such hook (hooks_off.go).
var idxFault func() error

func idxFaultHook() func() error { return idxFault }
