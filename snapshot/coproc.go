package snapshot

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// coproc is a git command kept running for one store, answering over its
// stdin and stdout (check-ignore --stdin, cat-file --batch): the in-process
// engine asks it questions without starting a process per seal. It starts
// no goroutine of its own; stop ends and reaps it.
type coproc struct {
	cmd *exec.Cmd
	in  *os.File
	out *os.File
	r   *bufio.Reader
}

// coprocTimeout bounds one exchange: git answers in microseconds, so a
// stall means it is stuck and is killed.
const coprocTimeout = 30 * time.Second

func startCoproc(g *Git, args ...string) (*coproc, error) {
	full := append(append([]string(nil), baseArgs...), args...)
	cmd := exec.Command(g.Path, full...)
	// GIT_FLUSH: answer each question at once even if stdout were a file.
	cmd.Env = append(g.env(), "GIT_FLUSH=1")
	cmd.Dir = g.Home
	if g.WorkTree != "" {
		cmd.Dir = g.WorkTree
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	cmd.Stdin, cmd.Stdout = inR, outW
	// Read-only: it never gets the store lock, which it would outlive.
	err = startChild(cmd)
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, &GitError{Args: args, ExitCode: -1, Err: err}
	}
	return &coproc{cmd: cmd, in: inW, out: outR, r: bufio.NewReaderSize(outR, 64<<10)}, nil
}

// stop closes git's stdin (it exits at EOF), kills its process group if
// need be and reaps it.
func (c *coproc) stop() {
	if c == nil {
		return
	}
	c.in.Close()
	done := make(chan struct{})
	timer := time.AfterFunc(2*time.Second, func() {
		select {
		case <-done:
		default:
			_ = killGroup(c.cmd.Process.Pid)
			c.cmd.Process.Kill()
		}
	})
	_ = waitChild(c.cmd)
	close(done)
	timer.Stop()
	c.out.Close()
}

// exchange writes req and reads the answer with read, within coprocTimeout
// or until ctx ends. Writing and reading overlap: a long request would
// otherwise fill both pipes.
func (c *coproc) exchange(ctx context.Context, req []byte, read func(*bufio.Reader) error) error {
	if err := ctx.Err(); err != nil { // ended already: ask nothing
		return err
	}
	deadline := time.Now().Add(coprocTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = c.out.SetReadDeadline(deadline)
	_ = c.in.SetWriteDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = c.out.SetReadDeadline(time.Now()) })
	defer stop()
	// An answer that reads a named pipe as an ignore file never comes.
	watch := watchFIFO(c.cmd.Process.Pid)
	defer watch.stop()
	werr := make(chan error, 1)
	if len(req) <= 32<<10 { // fits the pipe: no writer needed
		_, err := c.in.Write(req)
		werr <- err
	} else {
		go func() {
			_, err := c.in.Write(req)
			werr <- err
		}()
	}
	rerr := read(c.r)
	if rerr != nil {
		_ = c.in.SetWriteDeadline(time.Now()) // unblock the writer
	}
	if err := <-werr; rerr == nil {
		rerr = err
	}
	if rerr != nil && ctx.Err() != nil {
		rerr = fmt.Errorf("%w (%v)", ctx.Err(), rerr)
	} else if why := watch.reason(); rerr != nil && why != "" {
		rerr = fmt.Errorf("%s (%v)", why, rerr)
	}
	return rerr
}

// ignoreChecker is `git check-ignore --stdin -z -v -n --no-index`: one
// answer per path, ignored or not. git reads each folder's .gitignore as it
// first descends into it and keeps it, so the engine restarts the checker
// when an ignore file may have changed (docs/cairn-formats.md).
type ignoreChecker struct{ c *coproc }

func startIgnoreChecker(g *Git) (*ignoreChecker, error) {
	c, err := startCoproc(g, "check-ignore", "--no-index", "-z", "-v", "-n", "--stdin")
	if err != nil {
		return nil, err
	}
	return &ignoreChecker{c: c}, nil
}

// ignored returns which of the work-tree paths git's ignore rules cover.
// Each goes as "./path", as considerUnignored sends them.
func (ic *ignoreChecker) ignored(ctx context.Context, paths []string) (map[string]bool, error) {
	var req strings.Builder
	for _, p := range paths {
		req.WriteString("./")
		req.WriteString(p)
		req.WriteByte(0)
	}
	out := map[string]bool{}
	err := ic.c.exchange(ctx, []byte(req.String()), func(r *bufio.Reader) error {
		for _, p := range paths {
			// <source> NUL <line> NUL <pattern> NUL <path> NUL; all but the
			// path empty when no pattern matches (-n).
			var f [4]string
			for i := range f {
				s, err := r.ReadString(0)
				if err != nil {
					return fmt.Errorf("check-ignore: %w", err)
				}
				f[i] = s[:len(s)-1]
			}
			if f[3] != "./"+p { // an answer left from an exchange cut short
				return fmt.Errorf("check-ignore: answer for %q where %q was asked", f[3], "./"+p)
			}
			// The last matching pattern decides; a negated one re-includes.
			if f[2] != "" && !strings.HasPrefix(f[2], "!") {
				out[strings.TrimPrefix(f[3], "./")] = true
			}
		}
		return nil
	})
	return out, err
}

func (ic *ignoreChecker) stop() {
	if ic != nil {
		ic.c.stop()
	}
}

// catFile is `git cat-file --batch`, for objects stored in packs.
type catFile struct{ c *coproc }

func startCatFile(g *Git) (*catFile, error) {
	c, err := startCoproc(g, "cat-file", "--batch")
	if err != nil {
		return nil, err
	}
	return &catFile{c: c}, nil
}

// errMissing is an object git does not have.
var errMissing = errors.New("object missing")

func (cf *catFile) read(ctx context.Context, id string) (typ string, data []byte, err error) {
	err = cf.c.exchange(ctx, []byte(id+"\n"), func(r *bufio.Reader) error {
		typ, data, err = readCatAnswer(r, id)
		return err
	})
	return typ, data, err
}

// readMany asks for every object of ids in one exchange, git answering as
// a stream rather than one round trip each, and calls fn with each answer
// in order (errMissing for one git lacks). It returns how many were
// answered: fewer, with the error, when git's answer broke off (git stops
// at an object it cannot read).
func (cf *catFile) readMany(ctx context.Context, ids []string, fn func(i int, typ string, data []byte, err error)) (int, error) {
	var req strings.Builder
	for _, id := range ids {
		req.WriteString(id)
		req.WriteByte('\n')
	}
	done := 0
	err := cf.c.exchange(ctx, []byte(req.String()), func(r *bufio.Reader) error {
		for ; done < len(ids); done++ {
			typ, data, err := readCatAnswer(r, ids[done])
			if err != nil && !errors.Is(err, errMissing) {
				return err
			}
			fn(done, typ, data, err)
		}
		return nil
	})
	return done, err
}

// readCatAnswer reads `cat-file --batch`'s answer for id: its header line,
// then its content and the newline after it.
func readCatAnswer(r *bufio.Reader, id string) (typ string, data []byte, err error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", nil, fmt.Errorf("cat-file: %w", err)
	}
	f := strings.Fields(line)
	if len(f) == 2 && f[1] == "missing" && f[0] == id {
		return "", nil, errMissing
	}
	if len(f) != 3 || f[0] != id {
		return "", nil, fmt.Errorf("cat-file: unexpected answer %q for %s", strings.TrimSpace(line), id)
	}
	n, err := strconv.Atoi(f[2])
	if err != nil || n < 0 {
		return "", nil, fmt.Errorf("cat-file: bad size in %q", strings.TrimSpace(line))
	}
	data = make([]byte, n+1)
	if _, err := io.ReadFull(r, data); err != nil {
		return "", nil, fmt.Errorf("cat-file: %w", err)
	}
	if data[n] != '\n' {
		return "", nil, fmt.Errorf("cat-file: no newline after the content of %s", id)
	}
	return f[1], data[:n], nil
}

func (cf *catFile) stop() {
	if cf != nil {
		cf.c.stop()
	}
}
