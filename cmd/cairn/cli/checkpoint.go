package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/client"
	"github.com/cairn-dev/cairn/platform"
	"github.com/cairn-dev/cairn/snapshot"
)

// stringList is a repeatable flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// storeFlags are how a command finds a workspace's store without a daemon.
type storeFlags struct {
	layout   string
	stateDir string
	maxSize  int64
}

func (f *storeFlags) register(fs interface {
	StringVar(*string, string, string, string)
	Int64Var(*int64, string, int64, string)
}) {
	fs.StringVar(&f.layout, "layout", "auto", "workspace layout: auto, hankweave or plain")
	fs.StringVar(&f.stateDir, "state-dir", "", "where plain-layout stores live (default: per-user state directory)")
	fs.Int64Var(&f.maxSize, "max-file-size", 100<<20, "files larger than this many bytes are skipped and named")
}

func (f *storeFlags) open(ctx context.Context, dir string, patterns []string) (*snapshot.Store, error) {
	if err := notAsRootFor(dir); err != nil {
		return nil, err
	}
	return snapshot.Open(ctx, dir, snapshot.Options{
		Layout: snapshot.Layout(f.layout), StateDir: f.stateDir, MaxFileSize: f.maxSize, Patterns: patterns,
	})
}

// openExisting opens the store for a reading command (list, show, diff):
// it never creates one, and says there are no checkpoints yet instead.
func (f *storeFlags) openExisting(ctx context.Context, dir string) (*snapshot.Store, error) {
	if err := notAsRootFor(dir); err != nil {
		return nil, err
	}
	return snapshot.Open(ctx, dir, snapshot.Options{
		Layout: snapshot.Layout(f.layout), StateDir: f.stateDir, MaxFileSize: f.maxSize, NoCreate: true,
	})
}

func init() {
	register("checkpoint", "seal one checkpoint of a workspace", runCheckpoint)
}

func runCheckpoint(ctx context.Context, e *env, args []string) error {
	fs := newFlags("checkpoint", "checkpoint <dir> [--label L] [--codon ID --status S --codon-name N --run R] [--json]", e)
	var sf storeFlags
	sf.register(fs)
	label := fs.String("label", "", "label of the checkpoint")
	codon := fs.String("codon", "", "codon id (with --status)")
	codonName := fs.String("codon-name", "", "codon name (default: the codon id)")
	status := fs.String("status", "", "lifecycle status: rig-setup, completed, error, skipped or exit (default: a manual checkpoint)")
	run := fs.String("run", "", "run id; the checkpoint goes on branch run-<id>")
	asJSON := fs.Bool("json", false, "print the ledger record as JSON")
	sock := fs.String("socket", "", "daemon socket (default: $CAIRN_SOCKET or the per-user default)")
	var patterns, paths stringList
	fs.Var(&patterns, "pattern", "select files by this pattern (repeatable; default **)")
	fs.Var(&paths, "path", "seal incrementally: only these paths changed (repeatable; default: a full reconcile)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		fs.Usage()
		return usageErr("checkpoint takes one workspace directory")
	}
	req := snapshot.SealRequest{Kind: snapshot.KindManual, Label: *label, RunID: *run}
	if *status != "" {
		req.Kind = snapshot.Kind(*status)
		if !req.Kind.IsLifecycle() {
			return usageErr("--status %q: want rig-setup, completed, error, skipped or exit", *status)
		}
		if *codon == "" || *run == "" {
			return usageErr("--status needs --codon and --run")
		}
		req.CodonID, req.CodonName = *codon, *codonName
		if req.CodonName == "" {
			req.CodonName = *codon
		}
	} else if *codon != "" {
		return usageErr("--codon needs --status")
	}
	if len(patterns) > 0 {
		req.Patterns = patterns
	}
	if len(paths) > 0 {
		req.Changed = paths
	}
	rec, viaDaemon, err := checkpointViaDaemon(ctx, socketPath(*sock, sf.stateDir), pos[0], req)
	if !viaDaemon {
		var st *snapshot.Store
		st, err = sf.open(ctx, pos[0], nil)
		if err != nil {
			return err
		}
		defer st.Close()
		rec, err = st.Seal(ctx, req)
	}
	if *asJSON && rec.ID != "" {
		b, _ := json.MarshalIndent(rec, "", "  ")
		fmt.Fprintln(e.stdout, string(b))
	} else if err == nil {
		fmt.Fprintf(e.stdout, "%s %s %s %s (+%d ~%d -%d) %s\n", mark(rec.Kind), rec.ID, short(rec.SHA), rec.Kind,
			rec.Added, rec.Changed, rec.Removed, rec.State)
		for _, is := range rec.Issues {
			fmt.Fprintf(e.stdout, "  %s: %q: %s\n", rec.State, is.Path, is.Reason)
		}
		for _, is := range rec.Skipped {
			fmt.Fprintf(e.stdout, "  skipped: %q: %s\n", is.Path, is.Reason)
		}
	}
	if err != nil {
		return err
	}
	if rec.State == snapshot.StatePartial || rec.State == snapshot.StateRacy {
		return &exitError{ExitIncomplete, fmt.Errorf("checkpoint %s is %s", rec.ID, rec.State)}
	}
	return nil
}

func short(sha string) string {
	if len(sha) > 7 {
		return sha[:7]
	}
	return sha
}

// checkpointViaDaemon hands the request to a running daemon that watches the
// workspace, so the seal joins its dirty set and lifecycle. ok is false when
// no daemon runs or it does not act on this workspace for us: the caller then
// seals directly, under the store's lock.
func checkpointViaDaemon(ctx context.Context, sock, dir string, req snapshot.SealRequest) (snapshot.Record, bool, error) {
	if req.Patterns != nil || req.Changed != nil {
		return snapshot.Record{}, false, nil // selections are the daemon's own
	}
	c := client.New(sock)
	if !c.Running(ctx) {
		return snapshot.Record{}, false, nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return snapshot.Record{}, false, err
	}
	ar, err := c.Checkpoint(ctx, api.CheckpointRequest{Workspace: abs, Label: req.Label, Status: statusOf(req),
		CodonID: req.CodonID, CodonName: req.CodonName, RunID: req.RunID})
	var ce *client.Error
	if errors.As(err, &ce) && ce.Status == http.StatusForbidden {
		return snapshot.Record{}, false, nil
	}
	var rec snapshot.Record
	if b, jerr := json.Marshal(ar); jerr == nil {
		_ = json.Unmarshal(b, &rec)
	}
	if ce != nil {
		err = daemonError{ce}
	}
	return rec, true, err
}

// daemonError prints the daemon's reason as the direct path prints its own
// (the message alone), and unwraps to the daemon's {code, message}.
type daemonError struct{ ce *client.Error }

func (e daemonError) Error() string { return e.ce.Message }
func (e daemonError) Unwrap() error { return e.ce }

func statusOf(req snapshot.SealRequest) string {
	if req.Kind == snapshot.KindManual {
		return ""
	}
	return string(req.Kind)
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
