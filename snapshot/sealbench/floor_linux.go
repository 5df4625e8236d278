//go:build linux

package sealbench

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// walkFloor lists every folder under root and lstats every entry that is not
// a folder, on every core, and does nothing else: no index, no ignore rules,
// no hashing. Any restore that must know what the whole work tree holds (a
// pre-restore checkpoint no watch vouches for) costs at least this. It
// returns the entries it stat'ed.
func walkFloor(root string) (int, error) {
	top, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("walk floor: %w", err)
	}
	var (
		mu      sync.Mutex
		queue   = []int{top}
		cond    = sync.NewCond(&mu)
		pending = 1 // folders queued or being listed
		stats   atomic.Int64
		errOnce atomic.Value
	)
	worker := func() {
		buf := make([]byte, 32<<10)
		var st unix.Stat_t
		for {
			mu.Lock()
			for len(queue) == 0 && pending > 0 {
				cond.Wait()
			}
			if pending == 0 {
				mu.Unlock()
				return
			}
			fd := queue[len(queue)-1]
			queue = queue[:len(queue)-1]
			mu.Unlock()
			var subs []int
			for {
				n, err := unix.Getdents(fd, buf)
				if err != nil {
					errOnce.CompareAndSwap(nil, err)
				}
				if n <= 0 {
					break
				}
				for b := buf[:n]; len(b) >= 19; {
					reclen := int(binary.NativeEndian.Uint16(b[16:18]))
					if reclen < 19 || reclen > len(b) {
						break
					}
					typ, nb := b[18], b[19:reclen]
					b = b[reclen:]
					l := 0
					for l < len(nb) && nb[l] != 0 {
						l++
					}
					name := string(nb[:l])
					if name == "." || name == ".." {
						continue
					}
					if typ == unix.DT_DIR {
						sfd, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
						if err != nil {
							errOnce.CompareAndSwap(nil, err)
							continue
						}
						subs = append(subs, sfd)
						continue
					}
					if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
						errOnce.CompareAndSwap(nil, err)
					}
					stats.Add(1)
				}
			}
			unix.Close(fd)
			mu.Lock()
			queue = append(queue, subs...)
			pending += len(subs) - 1
			mu.Unlock()
			cond.Broadcast()
		}
	}
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			worker()
		}()
	}
	wg.Wait()
	if err, ok := errOnce.Load().(error); ok {
		return int(stats.Load()), fmt.Errorf("walk floor: %w", err)
	}
	return int(stats.Load()), nil
}
