package cli

import "context"

func runHookInstall(ctx context.Context, e *env, args []string, uninstall bool) error {
	return usageErr("not yet")
}
