//go:build !linux

package snapshot

import "context"

// inprocFullReady: the in-process full seal walks with Linux's lstat data
// (firstseal_linux.go); elsewhere git seals every full reconcile.
func (s *Store) inprocFullReady(context.Context) (*inproc, bool) { return nil, false }

func (e *inproc) sealFull(context.Context, *sealJob) (sealOutcome, error) {
	return sealOutcome{}, errFallback
}
