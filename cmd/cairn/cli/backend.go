package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/checkpoints"
	"github.com/cairn-dev/cairn/agent/client"
	"github.com/cairn-dev/cairn/agent/config"
	"github.com/cairn-dev/cairn/platform"
	"github.com/cairn-dev/cairn/restore"
	"github.com/cairn-dev/cairn/snapshot"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// daemonFlags find the daemon: --socket, else $CAIRN_SOCKET, else the
// default for this user (which depends on --state-dir).
type daemonFlags struct {
	sock     string
	stateDir string
}

func (f *daemonFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.sock, "socket", "", "daemon socket (default: $CAIRN_SOCKET or the per-user default)")
	fs.StringVar(&f.stateDir, "state-dir", "", "state directory: plain-layout stores and the default socket (default: $CAIRN_STATE_DIR or the per-user default)")
}

// socketPath is --socket, else CAIRN_SOCKET, else the default for this user.
func socketPath(flagVal, stateDir string) string {
	if flagVal != "" {
		return flagVal
	}
	if stateDir == "" {
		stateDir = platform.DefaultStateDir()
	}
	return platform.DefaultSocket(stateDir)
}

func (f *daemonFlags) client() *client.Client { return client.New(socketPath(f.sock, f.stateDir)) }

// access is whether a command may write to the store.
type access bool

const (
	reading access = false // list, show, diff: never create or write a store
	writing access = true  // checkpoint, restore, rollback, undo: may seal
)

// storeFlags are how a command reaches a workspace: the daemon, else the
// store directly. Only writing commands take --max-file-size.
type storeFlags struct {
	daemonFlags
	layout  string
	maxSize int64 // 0 (the store's default) for reading commands
}

func (f *storeFlags) register(fs *flag.FlagSet, a access) {
	f.daemonFlags.register(fs)
	fs.StringVar(&f.layout, "layout", "auto", "workspace layout: auto, hankweave, plain, or autodev (commits in the folder's own repository)")
	if a == writing {
		f.maxSize = 100 << 20
		fs.Var(sizeFlag{&f.maxSize}, "max-file-size", "files larger than this are skipped and named: bytes, or with a unit (500KB, 100MiB, 2GiB)")
	}
}

// open opens (or creates) the store of the workspace at dir, for a writing command.
func (f *storeFlags) open(ctx context.Context, dir string) (*snapshot.Store, error) {
	if err := notAsRootFor(dir); err != nil {
		return nil, err
	}
	return snapshot.Open(ctx, dir, snapshot.Options{
		Layout: snapshot.Layout(f.layout), StateDir: f.stateDir, MaxFileSize: f.maxSize,
	})
}

// openExisting opens the store for a reading command (list, show, diff):
// it never creates one, and says there are no checkpoints yet instead.
func (f *storeFlags) openExisting(ctx context.Context, dir string) (*snapshot.Store, error) {
	if err := notAsRootFor(dir); err != nil {
		return nil, err
	}
	return snapshot.Open(ctx, dir, snapshot.Options{
		Layout: snapshot.Layout(f.layout), StateDir: f.stateDir, NoCreate: true,
	})
}

// restoreOpts are what every restoring command (restore, rollback, undo) adds.
type restoreOpts struct {
	paths    []string
	dry      bool
	progress func(step, total int, msg string) // the store's own restores only
}

// ledger is a workspace's records, newest first, and the id marked ← HEAD.
type ledger struct {
	recs []ckpt.Record
	head string
	// layout is "autodev" for the in-repository layout; off then says why
	// checkpoints are off (no repository).
	layout, off string
	// pins are the pinned SHAs (cairn pin).
	pins []string
}

// backend does one command's work on one workspace: through a running daemon
// that acts on it for us (daemonBackend), or on the store itself, under its
// lock (localBackend).
type backend interface {
	list(ctx context.Context) (ledger, error)
	show(ctx context.Context, id string, limit int) (api.Diff, error)
	// diff compares refs[0] with refs[1], or with the work tree.
	diff(ctx context.Context, refs []string, patch bool) (api.Diff, error)
	// verify compares checkpoint id (empty: the newest) with the work tree (verify.go).
	verify(ctx context.Context, id string) (api.Verification, error)
	// checkpoint may return a record with an error (a seal recorded as failed).
	checkpoint(ctx context.Context, req snapshot.SealRequest) (ckpt.Record, error)
	// restore goes to t, which the daemon parses from raw itself.
	restore(ctx context.Context, raw string, t restore.Target, o restoreOpts) (api.RestoreResult, error)
	// rollback sends cmd to the daemon; the store restores to t.
	rollback(ctx context.Context, cmd api.Command, t restore.Target, o restoreOpts) (api.RestoreResult, error)
	undo(ctx context.Context, o restoreOpts) (api.RestoreResult, error)
	// pin pins (unpin: unpins) the checkpoint target names (pin.go).
	pin(ctx context.Context, target string, unpin bool) (api.PinResult, error)
	// prune applies retention and the size budget now (prune.go).
	prune(ctx context.Context, req api.PruneRequest) (api.PruneResult, error)
	// gc maintains the store now; grace is the direct path's only (gc.go).
	gc(ctx context.Context, full bool, grace time.Duration) (api.MaintenanceResult, error)
}

// via runs op on the command's backend, chosen here and only here: the daemon
// when one answers on the socket and acts on the workspace for us; the store
// when none answers, when the daemon answers 403 (not a workspace it watches
// for us: someone else's, or not watched), or when daemonOK is false.
func via[T any](ctx context.Context, f *storeFlags, dir string, daemonOK bool, op func(backend) (T, error)) (T, error) {
	var zero T
	real, err := realAbs(dir)
	if err != nil {
		return zero, err
	}
	if daemonOK {
		if c := f.client(); c.Running(ctx) {
			v, err := op(daemonBackend{c: c, dir: dir, real: real})
			if !notWatched(err) {
				return v, err
			}
		}
	}
	if f.layout == layoutAutodev {
		return op(autodevBackend{f: f, real: real})
	}
	return op(localBackend{f: f, dir: dir, real: real})
}

// realAbs is dir absolute, with its links resolved where it exists.
func realAbs(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	return abs, nil
}

// notWatched reports whether a daemon's answer means "not a workspace it
// watches for you": the command then works on the store directly.
func notWatched(err error) bool {
	var ce *client.Error
	return errors.As(err, &ce) && ce.Status == http.StatusForbidden
}

// daemonBackend asks a running daemon about the workspace at real (its
// absolute path, links resolved).
type daemonBackend struct {
	c    *client.Client
	dir  string // as given: a checkpoint is asked about it made absolute, links kept
	real string
}

func (b daemonBackend) list(ctx context.Context) (ledger, error) {
	l, err := b.c.List(ctx, b.real)
	if err != nil {
		return ledger{}, err
	}
	return ledger{head: l.Head, recs: l.Records, layout: l.Layout, off: l.Off, pins: l.Pins}, nil
}

func (b daemonBackend) show(ctx context.Context, id string, limit int) (api.Diff, error) {
	return b.c.ShowPage(ctx, b.real, id, 0, limit)
}

func (b daemonBackend) diff(ctx context.Context, refs []string, patch bool) (api.Diff, error) {
	second := ""
	if len(refs) == 2 {
		second = refs[1]
	}
	return b.c.Diff(ctx, b.real, refs[0], second, patch)
}

// watchProgress draws the workspace's progress, read from the daemon's
// status twice a second, while a request runs (when the command draws
// progress: withProgress); the function it returns stops it.
func (b daemonBackend) watchProgress(ctx context.Context, dir string) (stop func()) {
	pl := progressOf(ctx)
	if pl == nil {
		return func() {}
	}
	return pl.every(ctx, 500*time.Millisecond, func() {
		st, err := b.c.Status(ctx)
		if err != nil {
			return
		}
		for _, w := range st.Workspaces {
			if w.Dir == dir && w.Progress != nil {
				pl.show(*w.Progress)
			}
		}
	})
}

func (b daemonBackend) checkpoint(ctx context.Context, req snapshot.SealRequest) (ckpt.Record, error) {
	abs, err := filepath.Abs(b.dir)
	if err != nil {
		return ckpt.Record{}, err
	}
	defer b.watchProgress(ctx, abs)()
	ar, err := b.c.Checkpoint(ctx, api.CheckpointRequest{Workspace: abs, Label: req.Label, Status: statusOf(req),
		CodonID: req.CodonID, CodonName: req.CodonName, RunID: req.RunID})
	var ce *client.Error
	if errors.As(err, &ce) {
		err = daemonError{ce}
	}
	return ar, err
}

func (b daemonBackend) restore(ctx context.Context, raw string, _ restore.Target, o restoreOpts) (api.RestoreResult, error) {
	return b.c.Restore(ctx, api.RestoreRequest{Workspace: b.real, Target: raw, Paths: o.paths, DryRun: o.dry})
}

func (b daemonBackend) rollback(ctx context.Context, cmd api.Command, _ restore.Target, _ restoreOpts) (api.RestoreResult, error) {
	var res api.RestoreResult
	cmd.Workspace = b.real
	err := b.c.Command(ctx, cmd, &res)
	return res, err
}

func (b daemonBackend) undo(ctx context.Context, o restoreOpts) (api.RestoreResult, error) {
	return b.c.UndoWith(ctx, api.UndoRequest{Workspace: b.real, Paths: o.paths, DryRun: o.dry})
}

// daemonError prints the daemon's reason as the direct path prints its own
// (the message alone), and unwraps to the daemon's {code, message}.
type daemonError struct{ ce *client.Error }

func (e daemonError) Error() string { return e.ce.Message }
func (e daemonError) Unwrap() error { return e.ce }

func statusOf(req snapshot.SealRequest) string {
	if req.Kind == ckpt.KindManual {
		return ""
	}
	return string(req.Kind)
}

// localBackend works on the workspace's store itself, under the store's lock,
// refusing (as root) a workspace another user owns. list and checkpoint open
// it at the path as given; the others at its real path.
type localBackend struct {
	f    *storeFlags
	dir  string
	real string
}

func (b localBackend) list(ctx context.Context) (ledger, error) {
	st, err := b.f.openExisting(ctx, b.dir)
	if errors.Is(err, snapshot.ErrNoStore) {
		return ledger{}, nil // an empty ledger ("no checkpoints yet", or [] with --json), and no store made
	}
	if err != nil {
		return ledger{}, err
	}
	defer st.Close()
	recs := st.Records()
	head := restore.HeadMarker(recs, st.Position())
	slices.Reverse(recs)
	pins, err := st.Pins()
	if err != nil {
		return ledger{}, err
	}
	return ledger{recs: recs, head: head, pins: pins}, nil
}

// resolve opens the store for reading and finds each ref's record.
func (b localBackend) resolve(ctx context.Context, refs ...string) (*snapshot.Store, []ckpt.Record, error) {
	st, err := b.f.openExisting(ctx, b.real)
	if err != nil {
		return nil, nil, err
	}
	var recs []ckpt.Record
	for _, ref := range refs {
		t, err := restore.ParseTarget(ref)
		if err != nil {
			st.Close()
			return nil, nil, usageErr("%v", err)
		}
		rec, err := checkpoints.ResolveTarget(ctx, st, t)
		if err != nil {
			st.Close()
			return nil, nil, err
		}
		recs = append(recs, rec)
	}
	return st, recs, nil
}

func (b localBackend) show(ctx context.Context, id string, limit int) (api.Diff, error) {
	st, recs, err := b.resolve(ctx, id)
	if err != nil {
		return api.Diff{}, err
	}
	defer st.Close()
	return checkpoints.ShowWith(ctx, st, recs[0], snapshot.DiffOptions{}, checkpoints.Paging{Limit: limit, Folders: true})
}

func (b localBackend) diff(ctx context.Context, refs []string, patch bool) (api.Diff, error) {
	st, recs, err := b.resolve(ctx, refs...)
	if err != nil {
		return api.Diff{}, err
	}
	defer st.Close()
	d := api.Diff{A: recs[0].SHA}
	if len(recs) == 2 {
		d.B = recs[1].SHA
	}
	d.Stat, d.Patch, err = st.Diff(ctx, d.A, d.B, patch)
	return d, err
}

func (b localBackend) checkpoint(ctx context.Context, req snapshot.SealRequest) (ckpt.Record, error) {
	st, err := b.f.open(ctx, b.dir)
	if err != nil {
		return ckpt.Record{}, err
	}
	defer st.Close()
	return st.Seal(ctx, req)
}

// restoring runs fn on the store, with the restore the options ask for, to t.
func (b localBackend) restoring(ctx context.Context, t restore.Target, o restoreOpts,
	fn func(context.Context, *snapshot.Store, string, restore.Op) (api.RestoreResult, error)) (api.RestoreResult, error) {
	st, err := b.f.open(ctx, b.real)
	if err != nil {
		return api.RestoreResult{}, err
	}
	defer st.Close()
	return fn(ctx, st, st.Dir(), restore.Op{Target: t, Paths: o.paths, DryRun: o.dry, Continue: true, Progress: o.progress})
}

func (b localBackend) restore(ctx context.Context, _ string, t restore.Target, o restoreOpts) (api.RestoreResult, error) {
	return b.restoring(ctx, t, o, checkpoints.RunRestore)
}

func (b localBackend) rollback(ctx context.Context, _ api.Command, t restore.Target, o restoreOpts) (api.RestoreResult, error) {
	return b.restoring(ctx, t, o, checkpoints.RunRestore)
}

func (b localBackend) undo(ctx context.Context, o restoreOpts) (api.RestoreResult, error) {
	return b.restoring(ctx, restore.Target{}, o, checkpoints.Undo)
}

// notAsRootFor refuses to work, as root, on a workspace another user owns:
// root never acts on a user's files itself (README "Security"). The daemon's
// worker for that user, or the user, does it.
func notAsRootFor(dir string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	f, err := platform.OpenDirNoFollow(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // the store's own open says what is missing
	}
	if err != nil {
		return &exitError{ExitRefused, fmt.Errorf("%s: %w; as root cairn works only on real paths", abs, err)}
	}
	defer f.Close()
	uid, _, _, _, err := platform.DirInfo(f)
	if err != nil || uid == 0 {
		return err
	}
	who := strconv.FormatUint(uint64(uid), 10)
	if u, err := user.LookupId(who); err == nil {
		who = u.Username
	}
	return &exitError{ExitRefused, fmt.Errorf("%s belongs to %s: as root, cairn does not work on a user's files itself; "+
		"go through the running daemon (--socket), or run it as the owner (sudo -u %s cairn COMMAND)", abs, who, who)}
}

// sizeFlag is a byte count given as config files give it: 104857600,
// 100MiB, 500KB, 2GiB.
type sizeFlag struct{ n *int64 }

func (s sizeFlag) String() string {
	if s.n == nil {
		return "0"
	}
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if *s.n >= u.mult && *s.n%u.mult == 0 {
			return strconv.FormatInt(*s.n/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(*s.n, 10)
}

func (s sizeFlag) Set(v string) error {
	var sz config.Size
	if err := sz.UnmarshalText([]byte(v)); err != nil {
		return err
	}
	*s.n = int64(sz)
	return nil
}
