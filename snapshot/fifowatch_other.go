//go:build !linux

package snapshot

// watchFIFO: only Linux tells a process waiting to open a named pipe; git
// blocked there elsewhere runs until the call's context ends (a coprocess,
// until its exchange's timeout).
func watchFIFO(pid int) *fifoWatch { return &fifoWatch{} }

type fifoWatch struct{}

func (*fifoWatch) stop() string   { return "" }
func (*fifoWatch) reason() string { return "" }
