package sealbench

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// peakRSS is a finished process's peak resident set, in bytes.
func peakRSS(ps *os.ProcessState) int64 {
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss << 10 // KiB on Linux
	}
	return 0
}

// ownPeakRSS is this process's own peak resident set (VmHWM), in bytes:
// unlike a finished process's (wait4 reports the largest of the process
// and every child it waited for), no git it ran counts. 0 when unknown.
func ownPeakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range bytes.Lines(b) {
		if v, ok := bytes.CutPrefix(line, []byte("VmHWM:")); ok {
			kb, err := strconv.ParseInt(string(bytes.TrimSuffix(bytes.TrimSpace(v), []byte(" kB"))), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}
