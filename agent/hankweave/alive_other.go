//go:build !unix

package hankweave

// pidAlive cannot tell on this platform: the heartbeat alone decides.
func pidAlive(pid int) (alive, known bool) {
	if pid <= 0 {
		return false, true
	}
	return true, false
}
