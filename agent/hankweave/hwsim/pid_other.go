//go:build !unix

package hwsim

// DeadPID returns a process id unlikely to be in use.
func DeadPID() int { return 0x3ffffff0 }
