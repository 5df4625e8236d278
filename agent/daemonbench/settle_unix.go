//go:build unix

package daemonbench

import "syscall"

// settle flushes dirty pages before a timed step, so writeback left by the
// previous one (a tree, a reference store) is not charged to the next: a
// seal's syncfs would otherwise wait for it.
func settle() { syscall.Sync() }
