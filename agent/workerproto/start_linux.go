package workerproto

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Attr runs a worker in its own session, killed if the supervisor
// dies. It starts as root: it takes its owner's ids itself (BecomeWorker),
// so that it is never, for an instant, a process its owner may attach to.
func Attr(uid, gid uint32, groups []uint32) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGTERM}
}

// KeepInherited marks every descriptor above stderr close-on-exec, so that a
// worker inherits none of what the supervisor was itself started with (a
// descriptor its own parent left open), only what spawn hands it.
func KeepInherited() {
	if err := unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC); err == nil {
		return
	}
	ents, err := os.ReadDir("/proc/self/fd") // before Linux 5.11
	if err != nil {
		return
	}
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC)
		}
	}
}

// IDArgs are the ids a worker takes at its start (BecomeWorker).
func IDArgs(uid, gid uint32, groups []uint32) []string {
	gs := make([]string, len(groups))
	for i, g := range groups {
		gs[i] = strconv.FormatUint(uint64(g), 10)
	}
	return []string{"--uid", strconv.FormatUint(uint64(uid), 10), "--gid", strconv.FormatUint(uint64(gid), 10),
		"--groups", strings.Join(gs, ",")}
}

// BecomeWorker is the first thing a worker does, before it opens its socket
// or any workspace (docs/worker-protocol.md). Started as root by its
// supervisor, it takes its owner's groups, gid and uid, and makes itself not
// dumpable while its saved ids are still root's: the kernel lets a user
// ptrace a process (or take its descriptors with pidfd_getfd) only when
// every real, effective and saved id is theirs and it is dumpable, so at no
// moment can the owner reach it. Dropping the saved ids last changes no
// effective id, so the kernel does not reset dumpability then (it would, to
// fs.suid_dumpable, on an effective id's change). The parent-death signal,
// which a change of ids clears, is set again.
func BecomeWorker(uid, gid uint32, groups []uint32) error {
	if os.Geteuid() != 0 {
		return errors.New("a worker that changes its ids is started by a root supervisor")
	}
	if uid == 0 {
		return errors.New("a worker never runs as root")
	}
	ppid := os.Getppid()
	gs := make([]int, len(groups))
	for i, g := range groups {
		gs[i] = int(g)
	}
	u, g := int(uid), int(gid)
	steps := []struct {
		what string
		do   func() error
	}{
		{"setgroups", func() error { return syscall.Setgroups(gs) }},
		{"setresgid", func() error { return syscall.Setresgid(g, g, 0) }},
		{"setresuid", func() error { return syscall.Setresuid(u, u, 0) }},
		{"PR_SET_DUMPABLE", func() error { return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0) }},
		{"setresgid (saved)", func() error { return syscall.Setresgid(-1, -1, g) }},
		{"setresuid (saved)", func() error { return syscall.Setresuid(-1, -1, u) }},
		{"PR_SET_PDEATHSIG", func() error { return unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGTERM), 0, 0, 0) }},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			return fmt.Errorf("worker for uid %d: %s: %w", uid, s.what, err)
		}
	}
	if os.Getppid() != ppid {
		return errors.New("the supervisor is gone")
	}
	return checkIDs(uid, gid)
}

// checkIDs verifies what BecomeWorker did: every uid and gid the
// owner's, no capability left, not dumpable.
func checkIDs(uid, gid uint32) error {
	r, e, s := unix.Getresuid()
	rg, eg, sg := unix.Getresgid()
	for _, id := range []int{r, e, s} {
		if id != int(uid) {
			return fmt.Errorf("worker: uids are %d %d %d, want %d", r, e, s, uid)
		}
	}
	for _, id := range []int{rg, eg, sg} {
		if id != int(gid) {
			return fmt.Errorf("worker: gids are %d %d %d, want %d", rg, eg, sg, gid)
		}
	}
	if n, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0); err != nil || n != 0 {
		return fmt.Errorf("worker: still dumpable (%d, %v)", n, err)
	}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return fmt.Errorf("worker: read its capabilities: %w", err)
	}
	for _, l := range bytes.Split(b, []byte("\n")) {
		f := strings.Fields(string(l))
		if len(f) == 2 && (f[0] == "CapPrm:" || f[0] == "CapEff:" || f[0] == "CapAmb:") && strings.Trim(f[1], "0") != "" {
			return fmt.Errorf("worker: capabilities left: %s", l)
		}
	}
	return nil
}

// HardenWorker makes a worker that was started with its owner's ids
// already not dumpable (see BecomeWorker for the start that leaves no gap).
func HardenWorker() error {
	return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
}

// ExePath runs the executable inherited as fd 4, so it starts even
// when its folder is closed to the owner.
func ExePath(string) string { return "/proc/self/fd/4" }

// KillSession kills what a worker that has exited left in its session: the
// git processes it started (each in its own process group, all in the
// worker's session) and whatever they started. A session's id stays taken
// while any member lives, so no other process can match.
func KillSession(sid int) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == sid {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp session ...; comm may hold anything.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(b[i+1:])
		if len(f) > 3 && string(f[3]) == strconv.Itoa(sid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
