package cli

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/checkpoints"
	"github.com/cairn-dev/cairn/platform/printable"
)

func init() {
	register("pin", "keep a checkpoint from every retention policy", func(ctx context.Context, e *env, args []string) error {
		return runPin(ctx, e, args, false)
	})
	register("unpin", "let retention policies drop a pinned checkpoint again", func(ctx context.Context, e *env, args []string) error {
		return runPin(ctx, e, args, true)
	})
}

func runPin(ctx context.Context, e *env, args []string, unpin bool) error {
	name := map[bool]string{false: "pin", true: "unpin"}[unpin]
	fs := newFlags(name, name+" <dir> <target> [--json]", e)
	var sf storeFlags
	sf.register(fs, reading)
	asJSON := fs.Bool("json", false, "print the result as JSON")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		fs.Usage()
		return usageErr("%s takes a workspace directory and a checkpoint", name)
	}
	res, err := via(ctx, &sf, pos[0], true, func(b backend) (api.PinResult, error) { return b.pin(ctx, pos[1], unpin) })
	if err != nil {
		return refusal(err)
	}
	if *asJSON {
		b, _ := json.MarshalIndent(res, "", "  ")
		fmt.Fprintln(e.stdout, string(printable.JSON(b)))
		return nil
	}
	what := short(res.SHA)
	if res.Record != nil {
		what = res.Record.ID + " (" + what + ")"
	}
	what = printable.String(what)
	switch {
	case !unpin && res.Changed:
		fmt.Fprintf(e.stdout, "pinned %s: no retention policy drops it\n", what)
	case !unpin:
		fmt.Fprintf(e.stdout, "%s was pinned already\n", what)
	case res.Changed:
		fmt.Fprintf(e.stdout, "unpinned %s\n", what)
	default:
		fmt.Fprintf(e.stdout, "%s was not pinned\n", what)
	}
	return nil
}

func (b daemonBackend) pin(ctx context.Context, target string, unpin bool) (api.PinResult, error) {
	return b.c.Pin(ctx, b.real, target, unpin)
}

func (b localBackend) pin(ctx context.Context, target string, unpin bool) (api.PinResult, error) {
	st, err := b.f.openExisting(ctx, b.real)
	if err != nil {
		return api.PinResult{}, err
	}
	defer st.Close()
	return checkpoints.Pin(ctx, st, target, unpin)
}
