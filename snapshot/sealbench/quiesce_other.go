//go:build !linux

package sealbench

// quiesce is settle where the disks' counters cannot be read.
func quiesce() { settle() }
