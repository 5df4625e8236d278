package sealbench

import (
	"bufio"
	"bytes"
	"os"
	"strings"
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
	last, quietSince := diskActivity(), time.Now()
	for time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		n := diskActivity()
		if n != last || strings.Contains(n, "busy") {
			last, quietSince = n, time.Now()
			continue
		}
		if time.Since(quietSince) >= 300*time.Millisecond {
			return
		}
	}
}

// diskActivity is, for every block device, its writes and discards
// completed, and "busy" when it has I/O in flight (/proc/diskstats): two
// equal readings without "busy" mean nothing was written in between.
func diskActivity() string {
	data, err := os.ReadFile("/proc/diskstats")
	if err != nil {
		return ""
	}
	var b strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		// major minor name, then reads (4 fields), writes completed (index
		// 7), …, in flight (index 11), …, discards completed (index 14).
		f := strings.Fields(sc.Text())
		if len(f) < 12 {
			continue
		}
		b.WriteString(f[2] + " " + f[7])
		if len(f) > 14 {
			b.WriteString(" " + f[14])
		}
		if f[11] != "0" {
			b.WriteString(" busy")
		}
		b.WriteByte('\n')
	}
	return b.String()
}
