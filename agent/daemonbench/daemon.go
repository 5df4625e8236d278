package daemonbench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cairn-dev/cairn/agent/api"
)

// daemon is a `cairn daemon` process watching one directory.
type daemon struct {
	cmd     *exec.Cmd
	started time.Time
	state   string // its state directory
	sock    string
	logPath string
	http    *http.Client
	exited  chan struct{}
	// answered is when the socket first answered a status request.
	answered time.Time
}

// startDaemon starts the binary on a fresh state directory named after name,
// watching dir; config may be "".
func (b *bench) startDaemon(name, dir, config string) (*daemon, error) {
	state := filepath.Join(b.scratch, name+"-state")
	sock := filepath.Join(b.sockDir, name+".sock")
	logPath := filepath.Join(b.scratch, name+"-daemon.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child has its own descriptor
	args := []string{"daemon", "--state-dir", state, "--socket", sock, "--watch", dir}
	if config != "" {
		args = append(args, "--config", config)
	}
	cmd := exec.Command(b.cfg.Bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	d := &daemon{cmd: cmd, state: state, sock: sock, logPath: logPath, exited: make(chan struct{}),
		http: &http.Client{
			Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var dl net.Dialer
				return dl.DialContext(ctx, "unix", sock)
			}},
			Timeout: 5 * time.Second,
		}}
	d.started = time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		_ = cmd.Wait()
		close(d.exited)
	}()
	return d, nil
}

func (d *daemon) pid() int { return d.cmd.Process.Pid }

// stop asks the daemon to finish (SIGTERM) and kills it after 15 s.
func (d *daemon) stop() error {
	select {
	case <-d.exited:
	default:
		_ = d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.exited:
		case <-time.After(15 * time.Second):
			_ = d.cmd.Process.Kill()
			<-d.exited
			return fmt.Errorf("daemon did not exit within 15 s of SIGTERM")
		}
	}
	if code := d.cmd.ProcessState.ExitCode(); code != 0 {
		return fmt.Errorf("daemon exited with %d; log: %s", code, d.logPath)
	}
	return nil
}

// status is GET /v1/status on the daemon's socket. (agent/client does this,
// but packages under agent/ may not import it.)
func (d *daemon) status(ctx context.Context) (api.Status, error) {
	var st api.Status
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://cairn"+api.PathPrefix+"status", nil)
	if err != nil {
		return st, err
	}
	req.Header.Set(api.VersionHeader, api.Version)
	resp, err := d.http.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if d.answered.IsZero() {
		d.answered = time.Now()
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return st, err
	}
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("status: daemon answered %s: %s", resp.Status, bytes.TrimSpace(body))
	}
	return st, json.Unmarshal(body, &st)
}

// waitFor polls the daemon's one workspace every `every` until cond holds,
// and returns that status and when it was seen. It fails when the daemon
// exits, or after within.
func (d *daemon) waitFor(ctx context.Context, what string, within, every time.Duration, cond func(api.WorkspaceStatus) bool) (api.WorkspaceStatus, time.Time, error) {
	deadline := time.Now().Add(within)
	var last api.WorkspaceStatus
	for {
		select {
		case <-d.exited:
			return last, time.Time{}, fmt.Errorf("daemon exited while waiting for %s; log:\n%s", what, d.logTail())
		default:
		}
		st, err := d.status(ctx)
		seen := time.Now()
		if err == nil && len(st.Workspaces) == 1 {
			last = st.Workspaces[0]
			if cond(last) {
				return last, seen, nil
			}
		}
		if ctx.Err() != nil {
			return last, time.Time{}, ctx.Err()
		}
		if seen.After(deadline) {
			return last, time.Time{}, fmt.Errorf("timed out after %s waiting for %s (last status %+v); log:\n%s", within, what, last, d.logTail())
		}
		time.Sleep(every)
	}
}

// logTail is the end of the daemon's log, for errors.
func (d *daemon) logTail() string {
	b, err := os.ReadFile(d.logPath)
	if err != nil {
		return err.Error()
	}
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// ---- /proc ----

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times: 100 on Linux.
const clockTicks = 100

// cpuTimes are a process's CPU times from /proc/<pid>/stat.
type cpuTimes struct {
	self     time.Duration // utime + stime
	children time.Duration // cutime + cstime: children it waited for (git)
}

func readCPU(pid int) (cpuTimes, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return cpuTimes{}, err
	}
	// The command name may hold spaces; fields count from after its ')'.
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 15 {
		return cpuTimes{}, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	tick := func(k int) time.Duration { // f[0] is field 3 (state): utime, field 14, is f[11]
		n, _ := strconv.ParseInt(f[k], 10, 64)
		return time.Duration(n) * time.Second / clockTicks
	}
	return cpuTimes{self: tick(11) + tick(12), children: tick(13) + tick(14)}, nil
}

// memory is VmRSS and VmHWM (peak RSS) from /proc/<pid>/status, in bytes.
type memory struct{ rss, hwm int64 }

func readMemory(pid int) (memory, error) {
	var m memory
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return m, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		kb := func() int64 {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n << 10
		}
		switch k {
		case "VmRSS":
			m.rss = kb()
		case "VmHWM":
			m.hwm = kb()
		}
	}
	return m, nil
}

// wakeups is the context switches of every thread of a process: how often it
// went to sleep and was woken (or was preempted).
func wakeups(pid int) (int64, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	if err != nil || len(tasks) == 0 {
		return 0, errors.New("no /proc task list")
	}
	var n int64
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue // the thread ended
		}
		for _, line := range strings.Split(string(b), "\n") {
			k, v, _ := strings.Cut(line, ":")
			if k == "voluntary_ctxt_switches" || k == "nonvoluntary_ctxt_switches" {
				c, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				n += c
			}
		}
	}
	return n, nil
}

// IdleResult is a daemon's cost while nothing happens.
type IdleResult struct {
	Seconds    float64 `json:"seconds"`
	CPUMS      float64 `json:"cpuMs"`      // its own utime+stime (10 ms resolution)
	ChildCPUMS float64 `json:"childCpuMs"` // children it waited for (git), utime+stime
	Wakeups    int64   `json:"wakeups"`    // context switches over all its threads
	// Timers are the periodic tasks that run while idle, by name.
	Timers []string `json:"timers"`
}

// measureIdle samples a daemon's CPU times and context switches before and
// after d of nothing happening.
func measureIdle(ctx context.Context, pid int, d time.Duration, timers []string) (IdleResult, error) {
	c0, err := readCPU(pid)
	if err != nil {
		return IdleResult{}, err
	}
	w0, _ := wakeups(pid)
	t0 := time.Now()
	if err := sleep(ctx, d); err != nil {
		return IdleResult{}, err
	}
	c1, err := readCPU(pid)
	if err != nil {
		return IdleResult{}, err
	}
	w1, _ := wakeups(pid)
	return IdleResult{Seconds: time.Since(t0).Seconds(), CPUMS: ms(c1.self - c0.self),
		ChildCPUMS: ms(c1.children - c0.children), Wakeups: w1 - w0, Timers: timers}, nil
}
