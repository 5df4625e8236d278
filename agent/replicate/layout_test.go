package replicate

import (
	"os/exec"
	"strings"
	"testing"
)

// TestRefNamesAreValid: every key, host and mapped ref is a name git accepts,
// and the mapping goes both ways.
func TestRefNamesAreValid(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git")
	}
	valid := func(ref string) bool {
		return exec.Command(git, "check-ref-format", ref).Run() == nil
	}
	for _, path := range []string{"/srv/runs/exec-1", "/srv/a b/we:ird~^name?*[x]", "/x/..lock", "/x/.hidden.lock", "/", "/srv/日本語", "/x/" + strings.Repeat("long", 30)} {
		k := Key(path)
		for _, host := range []string{"build-07", SafeHost("my host.local"), SafeHost("..evil/host")} {
			if _, err := Host(host); err != nil {
				t.Fatalf("%q: %v", host, err)
			}
			for _, local := range []string{"refs/heads/main", "refs/heads/run-1753110463686-yayna", "refs/cairn/autosave/c12", "refs/heads/recovery/2026-01-02T03-04-05-678Z-c3-0a1b2c3d"} {
				r, ok := RemoteRef(host, k, local)
				if !ok || !valid(r) {
					t.Errorf("%q on %q: remote ref %q (ok %v) is not a valid ref", local, path, r, ok)
				}
				if back, ok := LocalRef(host, k, r); !ok || back != local {
					t.Errorf("%q maps back to %q (%v)", r, back, ok)
				}
			}
			m := ManifestRef(host, k)
			if !valid(m) {
				t.Errorf("manifest ref %q is not valid", m)
			}
			if h, kk, ok := SplitManifestRef(m); !ok || h != host || kk != k {
				t.Errorf("split %q: %q %q %v", m, h, kk, ok)
			}
			if _, ok := LocalRef(host, k, m); ok {
				t.Errorf("the manifest %q maps to a local ref", m)
			}
		}
	}
	if Key("/a/x") == Key("/b/x") {
		t.Error("two paths, one key")
	}
	for _, bad := range []string{"", ".x", "-x", "a/b", "a b", "x.lock", strings.Repeat("h", 64)} {
		if _, err := Host(bad); err == nil {
			t.Errorf("host %q accepted", bad)
		}
	}
	if _, ok := RemoteRef("h", "k", "refs/cairn/fleet/h/k/heads/main"); ok {
		t.Error("a fleet ref would be replicated again")
	}
	if _, ok := RemoteRef("h", "k", "HEAD"); ok {
		t.Error("HEAD replicated")
	}
}

func TestLocalPath(t *testing.T) {
	for _, tc := range []struct {
		remote, path string
		local        bool
	}{
		{"file:///srv/fleet.git", "/srv/fleet.git", true},
		{"file://localhost/srv/a%20b.git", "/srv/a b.git", true},
		{"/srv/fleet.git", "/srv/fleet.git", true},
		{"fleet.git", "fleet.git", true},
		{"./x:y", "./x:y", true},
		{"git@host:fleet.git", "", false},
		{"host:/srv/fleet.git", "", false},
		{"ssh://git@host/fleet.git", "", false},
		{"https://u:p@host/fleet.git", "", false},
		{"git://host/fleet.git", "", false},
		{"ext::sh -c x", "", false},
	} {
		p, ok := LocalPath(tc.remote)
		if p != tc.path || ok != tc.local {
			t.Errorf("LocalPath(%q) = %q, %v; want %q, %v", tc.remote, p, ok, tc.path, tc.local)
		}
	}
}
