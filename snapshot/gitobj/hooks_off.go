//go:build !cairnfault

package gitobj

// idxFaultHook is nil in a build without the cairnfault tag (hooks_on.go);
// the compiler removes the branch it guards.
func idxFaultHook() func() error { return nil }
