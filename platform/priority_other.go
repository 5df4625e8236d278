//go:build !linux

package platform

// Deprioritize does nothing here but lower the CPU priority where it can.
func Deprioritize(pid int) { deprioritize(pid) }
