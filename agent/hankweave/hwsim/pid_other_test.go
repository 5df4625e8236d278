//go:build !unix

package hwsim

func pidGone(pid int) bool { return pid == DeadPID() }
