package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/config"
	"github.com/cairn-dev/cairn/agent/workspace"
	"github.com/cairn-dev/cairn/platform/printable"
	"github.com/cairn-dev/cairn/restore/ckpt"
	"github.com/cairn-dev/cairn/snapshot/retain"
)

func init() {
	register("prune", "apply the retention policies and the size budget now", runPrune)
}

// runPrune is `cairn prune <dir> [--dry-run] [--max-store-size S] [--json]`
// (docs/operating.md, "Budgets and disk space"): through the daemon that watches dir
// (its policies and budgets), else on the store with the built-in policies
// and --max-store-size.
func runPrune(ctx context.Context, e *env, args []string) error {
	fs := newFlags("prune", "prune <dir> [--dry-run] [--max-store-size SIZE] [--json]", e)
	var sf storeFlags
	sf.register(fs, reading)
	dry := fs.Bool("dry-run", false, "only say what would go and what it would free")
	maxSize := fs.String("max-store-size", "", "a size budget for the store (e.g. 500MiB); default: the daemon's max_store_size, none without a daemon")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		fs.Usage()
		return usageErr("prune takes a workspace directory")
	}
	req := api.PruneRequest{DryRun: *dry}
	if *maxSize != "" {
		var sz config.Size
		if err := sz.UnmarshalText([]byte(*maxSize)); err != nil {
			return usageErr("--max-store-size: %v", err)
		}
		req.MaxStoreSize = int64(sz)
	}
	res, err := via(ctx, &sf, pos[0], true, func(b backend) (api.PruneResult, error) { return b.prune(ctx, req) })
	if err != nil {
		return refusal(err)
	}
	if *asJSON {
		b, _ := json.MarshalIndent(res, "", "  ")
		fmt.Fprintln(e.stdout, string(printable.JSON(b)))
		return nil
	}
	verb := "dropped"
	if res.DryRun {
		verb = "would drop"
	}
	n := 0
	for _, d := range res.Drops {
		what := strings.Join(d.IDs, ",")
		if d.Unit == string(retain.UnitRun) {
			what = fmt.Sprintf("run %s (%s)", strings.TrimPrefix(d.Ref, "refs/heads/run-"), plural(len(d.IDs), "checkpoint", ""))
		}
		p := printable.String // run ids and reasons may come from the user's tree
		what = p(what)
		if d.Skipped != "" {
			fmt.Fprintf(e.stdout, "kept     %-28s %-11s %s  %s: %s\n", what, p(d.Kind), d.Time.Local().Format(time.DateTime), p(d.Rule), p(d.Skipped))
			continue
		}
		n += len(d.IDs)
		fmt.Fprintf(e.stdout, "%-8s %-28s %-11s %s  %s\n", map[bool]string{true: "drop", false: "dropped"}[res.DryRun], what, p(d.Kind), d.Time.Local().Format(time.DateTime), p(d.Rule))
	}
	hb := ckpt.HumanBytes
	switch {
	case res.DryRun:
		fmt.Fprintf(e.stdout, "%s %s; store %s, about %s once maintenance collects them (frees about %s; an estimate)\n",
			verb, plural(n, "checkpoint", ""), hb(res.BytesBefore), hb(res.Projected), hb(max(res.BytesBefore-res.Projected, 0)))
	default:
		fmt.Fprintf(e.stdout, "%s %s; store %s before, %s after maintenance (freed %s)\n",
			verb, plural(n, "checkpoint", ""), hb(res.BytesBefore), hb(res.BytesAfter), hb(max(res.BytesBefore-res.BytesAfter, 0)))
		if res.Maintenance != nil && res.Maintenance.Skipped != "" {
			fmt.Fprintf(e.stdout, "maintenance skipped: %s\n", printable.String(res.Maintenance.Skipped))
		}
	}
	if res.MaxStoreBytes > 0 {
		fmt.Fprintf(e.stdout, "budget %s\n", hb(res.MaxStoreBytes))
	}
	if res.ProtectedOver != "" {
		fmt.Fprintf(e.stdout, "over budget: %s\n", printable.String(res.ProtectedOver))
	}
	return nil
}

func (b daemonBackend) prune(ctx context.Context, req api.PruneRequest) (api.PruneResult, error) {
	req.Workspace = b.real
	return b.c.Prune(ctx, req)
}

func (b localBackend) prune(ctx context.Context, req api.PruneRequest) (api.PruneResult, error) {
	st, err := b.f.openExisting(ctx, b.real)
	if err != nil {
		return api.PruneResult{}, err
	}
	defer st.Close()
	opts := workspace.PruneOptions{Policies: retain.Defaults(), MaxStoreSize: req.MaxStoreSize, DryRun: req.DryRun}
	return workspace.Prune(ctx, st, opts, time.Now(), true)
}
