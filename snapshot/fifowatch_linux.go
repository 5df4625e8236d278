package snapshot

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// fifoWatchEvery is how often a running git is looked at. git never opens a
// named pipe for cairn, so the first look may as well wait this long.
const fifoWatchEvery = 500 * time.Millisecond

// watchFIFO watches the git process pid for the one way the work tree can
// stop it for good: opening a named pipe (a FIFO at .gitignore or
// .gitattributes, which git opens without looking first), which waits for
// a writer that never comes. git's own `git status` hangs there too. Linux
// tells a process waiting in that open by its wait channel
// (wait_for_partner); the watch then kills git's process group and keeps
// why, naming the pipe when the process's memory says which.
func watchFIFO(pid int) *fifoWatch {
	w := &fifoWatch{pid: pid}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.timer = time.AfterFunc(fifoWatchEvery, w.look) // look waits for the lock
	return w
}

// fifoWatch is the watch of one git process (watchFIFO).
type fifoWatch struct {
	pid     int
	mu      sync.Mutex
	stopped bool
	why     string
	timer   *time.Timer
}

func (w *fifoWatch) look() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	if why := blockedOnFIFO(w.pid); why != "" {
		w.why = why
		_ = killGroup(w.pid)
		return
	}
	w.timer = time.AfterFunc(fifoWatchEvery, w.look)
}

// stop ends the watch and returns why it killed git ("" when it did not).
func (w *fifoWatch) stop() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	w.timer.Stop()
	return w.why
}

// reason is why the watch killed git, so far ("" when it did not).
func (w *fifoWatch) reason() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.why
}

// blockedOnFIFO reports why pid is stuck opening a named pipe ("" when it
// is not). Only a child of this process is judged: git reaped just before
// the watch stopped leaves its pid free for another process, never killed.
func blockedOnFIFO(pid int) string {
	if f := procStatFields(pid); len(f) < 2 || f[1] != strconv.Itoa(os.Getpid()) {
		return ""
	}
	dir := "/proc/" + strconv.Itoa(pid)
	wchan, err := os.ReadFile(dir + "/wchan")
	if err != nil {
		return ""
	}
	if w := strings.TrimSpace(string(wchan)); w != "wait_for_partner" {
		// A pipe some process holds open for writing lets the open
		// through; git then waits in read (reading .gitattributes) for
		// bytes that do not come.
		if strings.Contains(w, "pipe") {
			if name := readingFIFO(dir); name != "" {
				return fmt.Sprintf("git is blocked reading %q, a named pipe (FIFO) that another process holds open, which it cannot read as a file: remove or rename it", name)
			}
		}
		return ""
	}
	name := openingPath(dir)
	if name == "" {
		return "git is blocked opening a named pipe (FIFO) in the work tree, which it cannot read as a file: remove it"
	}
	return fmt.Sprintf("git is blocked opening %q, a named pipe (FIFO), which it cannot read as a file: remove or rename it", name)
}

// openingPath is the path the process behind dir (/proc/<pid>) is opening,
// read from its memory through the open's arguments ("" when unknown).
func openingPath(dir string) string {
	f := procSyscall(dir)
	if len(f) < 3 {
		return ""
	}
	arg := 0
	switch runtime.GOARCH + " " + f[0] {
	case "amd64 257", "arm64 56", "386 295", "arm 322", "riscv64 56", "ppc64le 286", "s390x 288", "loong64 56": // openat(dirfd, path, …)
		arg = 2
	case "amd64 2", "386 5", "arm 5", "ppc64le 5", "s390x 5": // open(path, …)
		arg = 1
	default:
		return ""
	}
	addr, err := strconv.ParseUint(strings.TrimPrefix(f[arg], "0x"), 16, 64)
	if err != nil || addr == 0 {
		return ""
	}
	mem, err := os.Open(dir + "/mem")
	if err != nil {
		return ""
	}
	defer mem.Close()
	buf := make([]byte, 4096)
	n, _ := mem.ReadAt(buf, int64(addr))
	if i := bytes.IndexByte(buf[:n], 0); i > 0 {
		return string(buf[:i])
	}
	return ""
}

// readingFIFO is the named pipe the process behind dir (/proc/<pid>) is
// reading, by the read's descriptor ("" when it is not reading one: an
// unnamed pipe, such as the one cairn feeds git's input through, is none).
func readingFIFO(dir string) string {
	f := procSyscall(dir)
	if len(f) < 2 {
		return ""
	}
	switch runtime.GOARCH + " " + f[0] {
	case "amd64 0", "arm64 63", "386 3", "arm 3", "riscv64 63", "ppc64le 3", "s390x 3", "loong64 63": // read(fd, …)
	default:
		return ""
	}
	fd, err := strconv.ParseUint(strings.TrimPrefix(f[1], "0x"), 16, 31)
	if err != nil {
		return ""
	}
	link := dir + "/fd/" + strconv.FormatUint(fd, 10)
	name, err := os.Readlink(link)
	if err != nil || !strings.HasPrefix(name, "/") {
		return "" // "pipe:[…]": an unnamed pipe
	}
	if fi, err := os.Stat(link); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		return ""
	}
	return name
}

// procSyscall is the system call the process behind dir (/proc/<pid>) is
// blocked in: its number, then its arguments, in hexadecimal (nil when
// unknown, or when it is running).
func procSyscall(dir string) []string {
	b, err := os.ReadFile(dir + "/syscall")
	if err != nil {
		return nil
	}
	return strings.Fields(string(b))
}
