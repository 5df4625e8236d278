// Command cairn is the checkpoint service and the command that talks to it.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/cairn-dev/cairn/cmd/cairn/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
