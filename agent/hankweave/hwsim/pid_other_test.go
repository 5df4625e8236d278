//go:build !unix

package hwsim_test

import . "github.com/cairn-dev/cairn/agent/hankweave/hwsim"

func pidGone(pid int) bool { return pid == DeadPID() }
