package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/config"
	"github.com/cairn-dev/cairn/agent/hankweave"
	"github.com/cairn-dev/cairn/platform"
	"github.com/cairn-dev/cairn/platform/printable"
	"github.com/cairn-dev/cairn/restore/ckpt"
	"github.com/cairn-dev/cairn/snapshot"
)

func init() {
	register("gc", "maintain a workspace's store now: pack refs and objects, prune unreachable objects", runGC)
}

func runGC(ctx context.Context, e *env, args []string) error {
	fs := newFlags("gc", "gc <dir> [--full] [--prune-grace D] [--json]", e)
	var sf storeFlags
	sf.register(fs, reading)
	full := fs.Bool("full", false, "repack everything and drop unreachable packed objects past the grace (slower)")
	grace := fs.Duration("prune-grace", 0, "keep unreachable objects younger than this (default: the config's gc_prune_grace, else 2 weeks; without a daemon only)")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		fs.Usage()
		return usageErr("gc takes one workspace directory")
	}
	if *grace != 0 && *grace < time.Minute {
		return usageErr("--prune-grace %s is too short (at least 1m)", *grace)
	}
	// A --prune-grace is the direct path's alone: the daemon uses its own.
	ctx = withProgress(ctx, newProgress(e, *asJSON))
	res, err := via(ctx, &sf, pos[0], *grace == 0, func(b backend) (api.MaintenanceResult, error) { return b.gc(ctx, *full, *grace) })
	if err != nil {
		return err
	}
	if *asJSON {
		out, _ := json.MarshalIndent(res, "", "  ")
		fmt.Fprintln(e.stdout, string(printable.JSON(out)))
	} else {
		fmt.Fprintln(e.stdout, printable.String(maintenanceOutcome(res)))
	}
	if res.Error != "" {
		return fmt.Errorf("maintenance failed: %s", res.Error)
	}
	return nil
}

func (b daemonBackend) gc(ctx context.Context, full bool, _ time.Duration) (api.MaintenanceResult, error) {
	defer b.watchProgress(ctx, b.real)()
	return b.c.GC(ctx, api.GCRequest{Workspace: b.real, Full: full})
}

// gc maintains the store directly, as the daemon would: never while a
// Hankweave runtime holds its lock.
func (b localBackend) gc(ctx context.Context, full bool, grace time.Duration) (api.MaintenanceResult, error) {
	st, err := b.f.openExisting(ctx, b.real)
	if err != nil {
		return api.MaintenanceResult{}, err
	}
	defer st.Close()
	if grace == 0 {
		if cfg, err := config.Load(platform.DefaultPaths().Config); err == nil {
			grace = cfg.GCPruneGrace.Duration
		}
	}
	busy := func() string {
		if st.Layout() != snapshot.LayoutHankweave {
			return ""
		}
		lk, err := hankweave.ReadLock(st.Dir())
		if err != nil {
			return "the runtime's lock cannot be read: " + err.Error()
		}
		if lk != nil && lk.Alive(time.Now()) {
			return "the runtime is running (its lock is live)"
		}
		return ""
	}
	opts := snapshot.MaintainOptions{PruneGrace: grace, Full: full, Busy: busy}
	if pl := progressOf(ctx); pl != nil {
		began := time.Now()
		opts.Step = func(i, n int, name string) {
			pl.show(api.Progress{Op: "maintenance: " + name, Done: i - 1, Total: n, Unit: "steps", Since: began})
		}
		defer pl.done()
	}
	res, err := st.Maintain(ctx, opts)
	if err != nil {
		return api.MaintenanceResult{}, err
	}
	return api.MaintenanceResult{Workspace: st.Dir(), Start: res.Start, DurationMS: res.Duration.Milliseconds(),
		Steps: res.Steps, Skipped: res.Skipped,
		Before: api.StoreStats(res.Before), After: api.StoreStats(res.After)}, nil
}

// maintenanceOutcome is one line about a maintenance run.
func maintenanceOutcome(m api.MaintenanceResult) string {
	var b strings.Builder
	switch {
	case m.Error != "":
		fmt.Fprintf(&b, "failed: %s", m.Error)
	case m.Skipped != "" && len(m.Steps) == 0:
		fmt.Fprintf(&b, "skipped: %s", m.Skipped)
	default:
		fmt.Fprintf(&b, "done in %s (%s)", (time.Duration(m.DurationMS) * time.Millisecond).String(), strings.Join(m.Steps, ", "))
		if m.Skipped != "" {
			fmt.Fprintf(&b, ", stopped: %s", m.Skipped)
		}
	}
	fmt.Fprintf(&b, "; store %s → %s, loose objects %d → %d, packs %d",
		ckpt.HumanBytes(m.Before.Bytes), ckpt.HumanBytes(m.After.Bytes), m.Before.LooseObjects, m.After.LooseObjects, m.After.Packs)
	return b.String()
}
