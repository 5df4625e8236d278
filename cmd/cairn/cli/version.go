package cli

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// Version is stamped by the release build (-ldflags "-X ...cli.Version=...");
// a source build reports the module's version from its build info, or
// "(devel)".
var Version = "dev"

// BuildDate is stamped by the release build (packaging/build.sh); a source
// build has none and reports its commit's time instead.
var BuildDate = ""

// Commit is stamped by the release build (packaging/build.sh) from git, for
// builds where go's own VCS stamp is missing (a git worktree, -buildvcs=false).
var Commit = ""

func init() {
	register("version", "print cairn's version, commit and build date (also: cairn --version)", func(ctx context.Context, e *env, args []string) error {
		fs := newFlags("version", "version", e)
		if _, err := parse(fs, args); err != nil {
			return err
		}
		bi, _ := debug.ReadBuildInfo()
		printVersion(e.stdout, versionOf(bi))
		return nil
	})
}

// buildVersion is what `cairn version` says.
type buildVersion struct {
	version           string
	revision, vcsTime string
	modified          bool
	built, goVersion  string
	goos, goarch      string
}

// versionOf reads the version, commit and dates from the stamped variables
// and the build info (nil when there is none).
func versionOf(bi *debug.BuildInfo) buildVersion {
	v := buildVersion{version: Version, built: BuildDate, goVersion: runtime.Version(), goos: runtime.GOOS, goarch: runtime.GOARCH}
	if bi == nil {
		v.revision = Commit
		if v.version == "dev" {
			v.version = "(devel)"
		}
		return v
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.revision = s.Value
		case "vcs.time":
			v.vcsTime = s.Value
		case "vcs.modified":
			v.modified = s.Value == "true"
		}
	}
	if v.revision == "" {
		v.revision = Commit
	}
	if v.version == "dev" {
		// A build in a checkout (VCS settings present) is a development
		// build whatever version go derived; `go install …@v1.2.3` has none.
		v.version = bi.Main.Version
		if v.revision != "" || v.version == "" {
			v.version = "(devel)"
		}
	}
	return v
}

// printVersion writes the version line (the same first line as always:
// scripts read "cairn VERSION OS/ARCH GO"), then the commit and build date
// when known.
func printVersion(w io.Writer, v buildVersion) {
	fmt.Fprintf(w, "cairn %s %s/%s %s\n", v.version, v.goos, v.goarch, v.goVersion)
	if v.revision != "" {
		line := "commit " + v.revision
		if v.modified {
			line += " (modified)"
		}
		if v.vcsTime != "" {
			line += " " + v.vcsTime
		}
		fmt.Fprintln(w, line)
	}
	if v.built != "" {
		fmt.Fprintln(w, "built  "+v.built)
	}
}
