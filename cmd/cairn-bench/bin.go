package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

const binUsage = "cairn binary to run as the daemon (default: cairn beside this program, else one built from this source tree with go build)"

// cairnBinary is the cairn binary the daemon benchmarks run: bin when given;
// else a cairn beside this program (an installed pair); else one built from
// the module's source with go build into a temporary folder, which cleanup
// removes. cairn-bench no longer contains the daemon, so it cannot run itself.
func cairnBinary(ctx context.Context, e *env, bin string) (path string, cleanup func(), err error) {
	nothing := func() {}
	if bin != "" {
		return bin, nothing, nil
	}
	name := "cairn"
	if runtime.GOOS == "windows" {
		name += ".exe"
	}
	if exe, err := os.Executable(); err == nil {
		beside := filepath.Join(filepath.Dir(exe), name)
		if fi, err := os.Stat(beside); err == nil && fi.Mode().IsRegular() {
			// A cairn left beside a newly built cairn-bench measures old code.
			if self, err := os.Stat(exe); err == nil && fi.ModTime().Before(self.ModTime()) {
				fmt.Fprintf(e.stderr, "warning: %s is older than this cairn-bench: its daemon may not be this source's (--bin chooses one)\n", beside)
			}
			return beside, nothing, nil
		}
	}
	dir, err := os.MkdirTemp("", "cairn-bench-bin-")
	if err != nil {
		return "", nil, err
	}
	out := filepath.Join(dir, name)
	fmt.Fprintf(e.stderr, "building cairn for the daemon (--bin skips this)\n")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "github.com/cairn-dev/cairn/cmd/cairn")
	if msg, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("go build cairn (or give --bin): %w\n%s", err, msg)
	}
	return out, func() { os.RemoveAll(dir) }, nil
}
