package cli

import (
	"context"
	"fmt"
	"runtime"
)

func init() {
	register("version", "print cairn's version", func(ctx context.Context, e *env, args []string) error {
		fmt.Fprintf(e.stdout, "cairn %s %s/%s %s\n", Version, runtime.GOOS, runtime.GOARCH, runtime.Version())
		return nil
	})
}
