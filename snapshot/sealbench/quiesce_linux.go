package sealbench

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"time"
)

// quiesce waits, after a step that deleted hundreds of MB (the fresh stores
// of firstSeals), until the disks have written nothing for 300 ms, at most
// 30 s: on a file system mounted with online discard, the deletions' trims
// and journal work go on after sync(2) returns, and would fall into the next
// run's incremental seals, which are what this benchmark is about.
func quiesce() {
	settle()
	deadline := time.Now().Add(30 * time.Second)
	last, quietSince := diskWrites(), time.Now()
	for time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		n := diskWrites()
		if n != last {
			last, quietSince = n, time.Now()
			continue
		}
		if time.Since(quietSince) >= 300*time.Millisecond {
			return
		}
	}
}

// diskWrites sums, over every block device, the writes and discards
// completed and the I/Os in flight (/proc/diskstats); -1 when unreadable.
func diskWrites() int64 {
	data, err := os.ReadFile("/proc/diskstats")
	if err != nil {
		return -1
	}
	var sum int64
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		// major minor name, then reads (4 fields), writes completed, …,
		// in flight (index 11), …, discards completed (index 14).
		for _, i := range []int{7, 11, 14} {
			if i < len(f) {
				v, _ := strconv.ParseInt(string(f[i]), 10, 64)
				sum += v
			}
		}
	}
	return sum
}
