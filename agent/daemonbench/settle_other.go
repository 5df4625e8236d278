//go:build !unix

package daemonbench

func settle() {}
