// Package replbench measures fleet replication (`cairn bench replicate`):
// (a) the lag from a lifecycle checkpoint sealed to its ref on a loopback
// `git daemon` remote, through the real daemon; (b) the push of a backlog
// of checkpoints after an outage, cairn's Pusher against a hand-written
// `git push --atomic` of the same refs into a remote in the same state.
package replbench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/client"
	"github.com/cairn-dev/cairn/agent/replicate"
	"github.com/cairn-dev/cairn/restore/ckpt"
	"github.com/cairn-dev/cairn/snapshot"
)

// Config is what to measure.
type Config struct {
	Bin      string // cairn binary run as the daemon (default: this executable)
	Files    int    // files in the workspace (default 10,000)
	Samples  int    // lifecycle checkpoints timed for the lag (default 30)
	Backlog  int    // checkpoints in the backlog (default 1,000)
	Runs     int    // timed runs of the backlog push, each side (default 3)
	Parts    []string
	Dir      string // scratch folder (default: a temporary one)
	Keep     bool
	JSON     bool
	Progress io.Writer
}

// Report is the outcome.
type Report struct {
	Files   int        `json:"files"`
	Lag     *LagReport `json:"lag,omitempty"`
	Backlog *Backlog   `json:"backlog,omitempty"`
	Git     string     `json:"git"`
}

// LagReport is part (a): seconds from the ledger time of a lifecycle
// checkpoint to its ref seen on the remote (ls-remote polled every 10ms).
type LagReport struct {
	Samples int       `json:"samples"`
	P50     float64   `json:"p50Seconds"`
	P99     float64   `json:"p99Seconds"`
	Max     float64   `json:"maxSeconds"`
	All     []float64 `json:"allSeconds"`
}

// Backlog is part (b): medians over the runs.
type Backlog struct {
	Checkpoints int       `json:"checkpoints"`
	Refs        int       `json:"refs"`
	Cairn       float64   `json:"cairnSeconds"`
	Hand        float64   `json:"handSeconds"`
	Ratio       float64   `json:"ratio"`
	CairnRuns   []float64 `json:"cairnRuns"`
	HandRuns    []float64 `json:"handRuns"`
	Pushes      int       `json:"cairnPushes"`
}

type bench struct {
	cfg     Config
	scratch string
	git     *snapshot.Git // for calls outside any store (ls-remote, the server)
	srvBase string
	port    int
	stop    []func()
}

// Run measures and writes the report to out.
func Run(ctx context.Context, cfg Config, out io.Writer) error {
	if cfg.Files <= 0 {
		cfg.Files = 10000
	}
	if cfg.Samples <= 0 {
		cfg.Samples = 30
	}
	if cfg.Backlog <= 0 {
		cfg.Backlog = 1000
	}
	if cfg.Runs <= 0 {
		cfg.Runs = 3
	}
	if len(cfg.Parts) == 0 {
		cfg.Parts = []string{"lag", "backlog"}
	}
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	if cfg.Bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		cfg.Bin = exe
	}
	gitPath, ver, err := snapshot.FindGit(ctx)
	if err != nil {
		return err
	}
	scratch := cfg.Dir
	if scratch == "" {
		if scratch, err = os.MkdirTemp("", "cairn-bench-replicate-"); err != nil {
			return err
		}
	}
	if !cfg.Keep {
		defer os.RemoveAll(scratch)
	}
	b := &bench{cfg: cfg, scratch: scratch, srvBase: filepath.Join(scratch, "server")}
	b.git = snapshot.NewGit(gitPath, ver, filepath.Join(scratch, "none.git"), scratch)
	if _, err := b.git.Run(ctx, nil, "init", "-q", "--bare"); err != nil {
		return err
	}
	defer func() {
		for i := len(b.stop) - 1; i >= 0; i-- {
			b.stop[i]()
		}
	}()
	if err := os.MkdirAll(b.srvBase, 0o755); err != nil {
		return err
	}
	if err := b.startServer(ctx); err != nil {
		return err
	}
	rep := Report{Files: cfg.Files, Git: ver.String()}
	if slices.Contains(cfg.Parts, "lag") {
		if rep.Lag, err = b.lag(ctx); err != nil {
			return fmt.Errorf("lag: %w", err)
		}
	}
	if slices.Contains(cfg.Parts, "backlog") {
		if rep.Backlog, err = b.backlog(ctx); err != nil {
			return fmt.Errorf("backlog: %w", err)
		}
	}
	if cfg.JSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	fmt.Fprintf(out, "replication, loopback git daemon, %d-file workspace, git %s\n", rep.Files, rep.Git)
	if l := rep.Lag; l != nil {
		fmt.Fprintf(out, "  lifecycle checkpoint sealed -> ref on the remote: p50 %.3fs  p99 %.3fs  max %.3fs  (%d samples)\n", l.P50, l.P99, l.Max, l.Samples)
	}
	if k := rep.Backlog; k != nil {
		fmt.Fprintf(out, "  backlog of %d checkpoints (%d refs): cairn %.3fs (%d push)  hand-written git push --atomic %.3fs  ratio %.2fx  (median of %d)\n",
			k.Checkpoints, k.Refs, k.Cairn, k.Pushes, k.Hand, k.Ratio, len(k.CairnRuns))
	}
	return nil
}

func (b *bench) progress(format string, a ...any) {
	fmt.Fprintf(b.cfg.Progress, "bench replicate: "+format+"\n", a...)
}

// startServer runs `git daemon --enable=receive-pack` on a free loopback port.
func (b *bench) startServer(ctx context.Context) error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	b.port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	// Detached, with its pid in a file: git runs git-daemon as a child of
	// its own, which outlives a killed parent.
	pidFile := filepath.Join(b.scratch, "git-daemon.pid")
	if _, err := b.git.Run(ctx, nil, "daemon", "--detach", "--pid-file="+pidFile, "--export-all", "--reuseaddr", "--enable=receive-pack",
		"--base-path="+b.srvBase, "--listen=127.0.0.1", "--port="+strconv.Itoa(b.port)); err != nil {
		return fmt.Errorf("start git daemon: %w", err)
	}
	b.stop = append(b.stop, func() {
		if raw, err := os.ReadFile(pidFile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(raw))); err == nil && pid > 1 {
				if p, err := os.FindProcess(pid); err == nil {
					_ = p.Kill()
				}
			}
		}
	})
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", b.port)); err == nil {
			c.Close()
			return nil
		}
	}
	return errors.New("git daemon did not listen")
}

// remote makes a fresh bare repository on the server and returns its URL.
func (b *bench) remote(ctx context.Context, name string) (string, error) {
	g := *b.git
	g.Dir = filepath.Join(b.srvBase, name)
	if _, err := g.Run(ctx, nil, "init", "-q", "--bare"); err != nil {
		return "", err
	}
	return fmt.Sprintf("git://127.0.0.1:%d/%s", b.port, name), nil
}

// tree writes a workspace of n files, 100 a folder.
func tree(dir string, n int) error {
	for i := range n {
		p := filepath.Join(dir, fmt.Sprintf("d%03d", i/100), fmt.Sprintf("f%05d.txt", i))
		if i%100 == 0 {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
		}
		if err := os.WriteFile(p, fmt.Appendf(nil, "file %d\n%s\n", i, strings.Repeat("x", 200+i%300)), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// lag runs the real daemon on a workspace replicating to the server, seals
// lifecycle checkpoints through its socket, and times each one's arrival.
func (b *bench) lag(ctx context.Context) (*LagReport, error) {
	ws := filepath.Join(b.scratch, "lag-ws")
	b.progress("writing a %d-file workspace", b.cfg.Files)
	if err := tree(ws, b.cfg.Files); err != nil {
		return nil, err
	}
	ws, _ = filepath.EvalSymlinks(ws)
	remote, err := b.remote(ctx, "lag.git")
	if err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(b.scratch, "lag.toml")
	conf := fmt.Sprintf("[defaults]\nautosave = false\n[defaults.replicate]\nremote = %q\nhost = \"bench\"\n", remote)
	if err := os.WriteFile(cfgPath, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	state := filepath.Join(b.scratch, "lag-state")
	sock := filepath.Join(state, "cairn.sock")
	if err := os.MkdirAll(state, 0o700); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(b.scratch, "lag-daemon.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(b.cfg.Bin, "daemon", "--state-dir", state, "--socket", sock, "--config", cfgPath, "--watch", ws)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	c := client.New(sock)
	key := replicate.Key(ws)
	base := replicate.Base("bench", key)
	// Ready: the baseline sealed and replicated.
	b.progress("waiting for the baseline to be sealed and replicated")
	if err := waitUntil(ctx, 10*time.Minute, func() bool {
		st, err := c.Status(ctx)
		if err != nil || len(st.Workspaces) == 0 {
			return false
		}
		r := st.Workspaces[0].Replication
		return r != nil && r.State == "idle" && r.LastPushed != "" && r.LagCheckpoints == 0
	}); err != nil {
		return nil, fmt.Errorf("the daemon never replicated its baseline (log in %s): %w", logf.Name(), err)
	}
	rep := &LagReport{Samples: b.cfg.Samples}
	for i := range b.cfg.Samples {
		// A few edited files, as an agent's codon leaves them.
		for j := range 5 {
			p := filepath.Join(ws, fmt.Sprintf("d%03d", (i*7+j)%max(b.cfg.Files/100, 1)), fmt.Sprintf("edit-%d.txt", j))
			if err := os.WriteFile(p, fmt.Appendf(nil, "sample %d\n", i), 0o644); err != nil {
				return nil, err
			}
		}
		rec, err := c.Checkpoint(ctx, api.CheckpointRequest{Workspace: ws, Status: string(ckpt.KindCompleted),
			CodonID: fmt.Sprintf("codon-%d", i), RunID: "bench"})
		if err != nil {
			return nil, err
		}
		ref := base + "heads/run-bench"
		var seen time.Time
		if err := waitUntil(ctx, 2*time.Minute, func() bool {
			out, err := b.git.Run(ctx, nil, "ls-remote", "--", remote, ref)
			if err == nil && strings.HasPrefix(string(out), rec.SHA) {
				seen = time.Now()
				return true
			}
			return false
		}); err != nil {
			return nil, fmt.Errorf("checkpoint %s never arrived: %w", rec.ID, err)
		}
		lag := seen.Sub(rec.Time).Seconds()
		rep.All = append(rep.All, lag)
		b.progress("sample %d/%d: %s %.3fs", i+1, b.cfg.Samples, rec.ID, lag)
	}
	sorted := slices.Sorted(slices.Values(rep.All))
	rep.P50, rep.P99, rep.Max = quantile(sorted, 0.50), quantile(sorted, 0.99), sorted[len(sorted)-1]
	return rep, nil
}

// backlog builds a store with a baseline already replicated to two remotes
// in the same state, then seals the backlog and pushes it: cairn's Pusher
// to one, a hand-written `git push --atomic` of the same refspecs to the
// other. Each run starts from fresh remotes.
func (b *bench) backlog(ctx context.Context) (*Backlog, error) {
	ws := filepath.Join(b.scratch, "backlog-ws")
	b.progress("writing a %d-file workspace", b.cfg.Files)
	if err := tree(ws, b.cfg.Files); err != nil {
		return nil, err
	}
	ws, _ = filepath.EvalSymlinks(ws)
	st, err := snapshot.Open(ctx, ws, snapshot.Options{Layout: snapshot.LayoutPlain, StateDir: filepath.Join(b.scratch, "backlog-state")})
	if err != nil {
		return nil, err
	}
	if _, err := st.Seal(ctx, snapshot.SealRequest{Kind: ckpt.KindBaseline}); err != nil {
		return nil, err
	}
	store := st.ObjectsGit()
	before, err := refs(ctx, store)
	if err != nil {
		return nil, err
	}
	b.progress("sealing %d checkpoints", b.cfg.Backlog)
	for i := range b.cfg.Backlog {
		rel := filepath.Join(fmt.Sprintf("d%03d", i%max(b.cfg.Files/100, 1)), fmt.Sprintf("backlog-%d.txt", i))
		if err := os.WriteFile(filepath.Join(ws, rel), fmt.Appendf(nil, "checkpoint %d\n", i), 0o644); err != nil {
			return nil, err
		}
		req := snapshot.SealRequest{Kind: ckpt.KindAutosave, Changed: []string{filepath.ToSlash(rel)}}
		if i%10 == 9 {
			req = snapshot.SealRequest{Kind: ckpt.KindCompleted, RunID: "bench", CodonID: fmt.Sprintf("codon-%d", i), Changed: req.Changed}
		}
		if _, err := st.Seal(ctx, req); err != nil {
			return nil, err
		}
	}
	after, err := refs(ctx, store)
	if err != nil {
		return nil, err
	}
	key := replicate.Key(ws)
	var backlogSpecs, baseSpecs []string
	for _, name := range slices.Sorted(maps.Keys(after)) {
		r, ok := replicate.RemoteRef("bench", key, name)
		if !ok {
			continue
		}
		if before[name] == after[name] {
			continue
		}
		backlogSpecs = append(backlogSpecs, after[name]+":"+r)
	}
	for _, name := range slices.Sorted(maps.Keys(before)) {
		if r, ok := replicate.RemoteRef("bench", key, name); ok {
			baseSpecs = append(baseSpecs, before[name]+":"+r)
		}
	}
	out := &Backlog{Checkpoints: b.cfg.Backlog, Refs: len(backlogSpecs)}
	m := replicate.Manifest{Workspace: ws, Layout: "plain", Checkpoints: b.cfg.Backlog + 1}
	for run := range b.cfg.Runs {
		// Both remotes hold the baseline, as before an outage.
		rc, err := b.remote(ctx, fmt.Sprintf("cairn-%d.git", run))
		if err != nil {
			return nil, err
		}
		rh, err := b.remote(ctx, fmt.Sprintf("hand-%d.git", run))
		if err != nil {
			return nil, err
		}
		for _, r := range []string{rc, rh} {
			if _, err := store.Run(ctx, nil, append([]string{"push", "--atomic", "--quiet", "--", r}, baseSpecs...)...); err != nil {
				return nil, err
			}
		}
		// cairn knows what the remote holds, as a daemon does from its pushes
		// before the outage (Learn is what it does without a state file).
		p := &replicate.Pusher{Store: store, Remote: rc, Host: "bench", Key: key, Home: b.scratch,
			StatePath: filepath.Join(b.scratch, fmt.Sprintf("state-%d.json", run))}
		if err := p.Learn(ctx); err != nil {
			return nil, err
		}
		began := time.Now()
		res, err := p.Sync(ctx, m)
		cairn := time.Since(began).Seconds()
		if err != nil {
			return nil, err
		}
		began = time.Now()
		if _, err := store.Run(ctx, nil, append([]string{"push", "--atomic", "--porcelain", "--", rh}, backlogSpecs...)...); err != nil {
			return nil, err
		}
		hand := time.Since(began).Seconds()
		out.CairnRuns, out.HandRuns, out.Pushes = append(out.CairnRuns, cairn), append(out.HandRuns, hand), res.Pushes
		b.progress("run %d/%d: cairn %.3fs (%d refs, %d push), hand %.3fs", run+1, b.cfg.Runs, cairn, res.Updated, res.Pushes, hand)
	}
	out.Cairn = quantile(slices.Sorted(slices.Values(out.CairnRuns)), 0.5)
	out.Hand = quantile(slices.Sorted(slices.Values(out.HandRuns)), 0.5)
	if out.Hand > 0 {
		out.Ratio = out.Cairn / out.Hand
	}
	return out, nil
}

func refs(ctx context.Context, g *snapshot.Git) (map[string]string, error) {
	out, err := g.Run(ctx, nil, "for-each-ref", "--format=%(objectname) %(refname)")
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, l := range strings.Split(string(out), "\n") {
		if sha, name, ok := strings.Cut(l, " "); ok {
			m[name] = sha
		}
	}
	return m, nil
}

func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted)-1) + 0.5)
	return sorted[min(i, len(sorted)-1)]
}

func waitUntil(ctx context.Context, within time.Duration, cond func() bool) error {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s", within)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}
