package snapshot

import (
	"sync/atomic"
	"time"
)

// grains are the timestamp granularities a file system may keep, each a
// multiple of the one before: nanoseconds (ext4 with large inodes, XFS,
// btrfs, tmpfs), 100 ns (NTFS), microseconds, milliseconds, 10 ms, whole
// seconds (ext4 with 128-byte inodes, ext3, HFS+, many network file
// systems) and 2 s (FAT, exFAT).
var grains = []int64{1, 10, 100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000, 1_000_000_000, 2_000_000_000}

// grain learns one timestamp's granularity on one file system from the
// times it sees: the coarsest of grains that divides every one of them.
// It starts at the coarsest and only ever gets finer, so it is never finer
// than the file system's own (every time the file system writes is a
// multiple of its granularity, so that granularity divides them all).
type grain struct{ ns atomic.Int64 }

func newGrain() *grain {
	g := &grain{}
	g.ns.Store(grains[len(grains)-1])
	return g
}

// see takes in one timestamp (nanoseconds since the epoch).
func (g *grain) see(t int64) {
	for {
		cur := g.ns.Load()
		if cur <= 1 || t%cur == 0 {
			return
		}
		next := int64(1)
		for _, c := range grains {
			if c < cur && t%c == 0 {
				next = c
			}
		}
		if g.ns.CompareAndSwap(cur, next) {
			return
		}
	}
}

func (g *grain) get() int64 { return g.ns.Load() }

// clockSlack covers the kernel stamping a file with its coarse clock, up to
// a scheduler tick behind the clock cairn reads.
const clockSlack = 50 * time.Millisecond

// settled reports whether a file with stamp st, read at readAt (cairn's
// clock, taken before the file was opened), can be vouched for by its stamp
// later: git's racy rule in the work tree's own units. Its modification and
// change times must be older than the read by more than their granularity,
// so any change after the read gives the file other times. A file as young
// as that is read again at every seal until it settles.
func settled(st fileStamp, readAt int64, mtime, ctime *grain) bool {
	slack := clockSlack.Nanoseconds()
	return st.Mtime+mtime.get()+slack <= readAt && st.Ctime+ctime.get()+slack <= readAt
}
