package replicate

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fleetGitT runs the machine's git on the bare repository dir for fixtures.
func fleetGitT(t *testing.T, dir string, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	home := t.TempDir()
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "XDG_CONFIG_HOME=" + home, "GIT_CONFIG_NOSYSTEM=1",
		"LC_ALL=C", "GIT_DIR=" + dir, "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com"}
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("git %q: %v\n%s", args, err, errOut.String())
	}
	return strings.TrimSpace(out.String())
}

// fleetCommitFile makes a parentless commit whose tree holds one file.
func fleetCommitFile(t *testing.T, dir, name, content string) string {
	blob := fleetGitT(t, dir, content, "hash-object", "-w", "--stdin")
	tree := fleetGitT(t, dir, "100644 blob "+blob+"\t"+name+"\n", "mktree")
	return fleetGitT(t, dir, "m\n", "commit-tree", tree)
}

// TestFleetListManifests: every workspace on the remote is listed, those
// whose manifest is missing, unreadable or odd with a note that says so.
func TestFleetListManifests(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	remote := filepath.Join(t.TempDir(), "fleet.git")
	fleetGitT(t, "", "", "init", "--quiet", "--bare", remote)
	c := fleetCommitFile(t, remote, "x", "x\n")
	manifest := func(m Manifest) string {
		b, _ := json.Marshal(m)
		return string(b)
	}
	for ref, sha := range map[string]string{
		Base("alpha", "good-1") + "heads/main":       c,
		Base("alpha", "good-1") + "cairn/manual/c1":  c,
		ManifestRef("alpha", "good-1"):               fleetCommitFile(t, remote, ManifestFile, manifest(Manifest{Version: 1, Host: "alpha", Key: "good-1", Workspace: "/srv/good", Checkpoints: 1})),
		ManifestRef("alpha", "bad-2"):                fleetCommitFile(t, remote, ManifestFile, "{not json"),
		ManifestRef("alpha", "nofile-3"):             fleetCommitFile(t, remote, "other.json", "{}"),
		ManifestRef("beta", "odd-4"):                 fleetCommitFile(t, remote, ManifestFile, manifest(Manifest{Version: 9, Host: "gamma", Key: "odd-4", Workspace: "/srv/odd"})),
		Base("beta", "none-5") + "heads/run-1-abcde": c,
		"refs/heads/unrelated":                       c,
	} {
		fleetGitT(t, remote, "", "update-ref", ref, sha)
	}
	list, err := ListFleet(context.Background(), remote, "", ReadAs{Home: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		name, note string
		refs       int
		manifest   bool
	}
	want := []row{
		{"alpha/good-1", "", 3, true},
		{"alpha/bad-2", "manifest unreadable", 1, false},
		{"alpha/nofile-3", "no readable manifest.json", 1, false},
		{"beta/odd-4", "manifest version 9 (this cairn reads 1); manifest names gamma/odd-4", 1, true},
		{"beta/none-5", "no manifest", 1, false},
	}
	if len(list) != len(want) {
		t.Fatalf("listed %d workspaces: %+v", len(list), list)
	}
	for i, w := range want {
		g := list[i]
		if g.Name() != w.name || !strings.Contains(g.Note, w.note) || (w.note == "") != (g.Note == "") || g.Refs != w.refs || (g.Manifest != nil) != w.manifest {
			t.Errorf("%d: %s refs %d manifest %v note %q; want %+v", i, g.Name(), g.Refs, g.Manifest != nil, g.Note, w)
		}
	}
	// One host only.
	beta, err := ListFleet(context.Background(), remote, "beta", ReadAs{})
	if err != nil || len(beta) != 2 || beta[0].Host != "beta" {
		t.Errorf("beta only: %v %+v", err, beta)
	}
	if _, err := ListFleet(context.Background(), remote, "../x", ReadAs{}); err == nil {
		t.Error("a host that cannot name a ref was accepted")
	}
}

func TestFleetFindWorkspace(t *testing.T) {
	list := []FleetWorkspace{
		{Host: "a", Key: "exec-1-0000000000000001", Manifest: &Manifest{Workspace: "/srv/runs/exec-1"}},
		{Host: "a", Key: "exec-1-0000000000000002", Manifest: &Manifest{Workspace: "/home/u/exec-1"}},
		{Host: "a", Key: "solo-0000000000000003", Manifest: &Manifest{Workspace: "/srv/solo"}},
		{Host: "b", Key: "exec-1-0000000000000004"},
	}
	for _, c := range []struct{ from, key, err string }{
		{"a/exec-1-0000000000000002", "exec-1-0000000000000002", ""},
		{"a//srv/runs/exec-1", "exec-1-0000000000000001", ""},
		{"a/srv/runs/exec-1/", "exec-1-0000000000000001", ""},
		{"a/solo", "solo-0000000000000003", ""},
		{"b/exec-1", "exec-1-0000000000000004", ""},
		{"a/exec-1", "", "names 2 workspaces"},
		{"a/nope", "", `host a has no workspace "nope"`},
		{"c/x", "", `no host "c" has replicated workspaces there (hosts: a, b)`},
		{"a", "", "want <host>/"},
	} {
		w, err := FindWorkspace(list, c.from)
		switch {
		case c.err == "" && (err != nil || w.Key != c.key):
			t.Errorf("%q: %v %q, want %q", c.from, err, w.Key, c.key)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%q: %v, want an error saying %q", c.from, err, c.err)
		}
	}
}

func TestFleetNormalizeRemote(t *testing.T) {
	wd, _ := os.Getwd()
	for in, want := range map[string]string{
		"ssh://git@host/fleet.git":  "ssh://git@host/fleet.git",
		"git@host:fleet.git":        "git@host:fleet.git",
		"file:///srv/fleet.git":     "file:///srv/fleet.git",
		"/srv/fleet.git":            "/srv/fleet.git",
		"fleet.git":                 filepath.Join(wd, "fleet.git"),
		"./a:b/fleet.git":           filepath.Join(wd, "a:b/fleet.git"),
		"https://u:p@h/x?y#z":       "https://u:p@h/x?y#z",
		"host.example:/srv/x.git":   "host.example:/srv/x.git",
		"../up/with:colon/late.git": filepath.Join(filepath.Dir(wd), "up/with:colon/late.git"),
	} {
		if got, err := NormalizeRemote(in); err != nil || got != want {
			t.Errorf("%q: %q %v, want %q", in, got, err, want)
		}
	}
}
