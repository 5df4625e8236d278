package replicate

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/restore/ckpt"
	"github.com/cairn-dev/cairn/snapshot"
)

// plainGit runs git outside cairn (the other writer, and checks).
func plainGit(t *testing.T, gitDir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Env = []string{"GIT_DIR=" + gitDir, "HOME=" + t.TempDir(), "GIT_CONFIG_NOSYSTEM=1", "PATH=" + os.Getenv("PATH"), "LC_ALL=C",
		"GIT_AUTHOR_NAME=o", "GIT_AUTHOR_EMAIL=o@o", "GIT_COMMITTER_NAME=o", "GIT_COMMITTER_EMAIL=o@o"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func TestReplicatePusher(t *testing.T) {
	ctx := context.Background()
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("one"), 0o644)
	st, err := snapshot.Open(ctx, ws, snapshot.Options{Layout: snapshot.LayoutPlain, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	seal := func(req snapshot.SealRequest) ckpt.Record {
		t.Helper()
		rec, err := st.Seal(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	seal(snapshot.SealRequest{Kind: ckpt.KindBaseline})
	seal(snapshot.SealRequest{Kind: ckpt.KindCompleted, RunID: "r1", CodonID: "c1"})
	manual := seal(snapshot.SealRequest{Kind: ckpt.KindManual})

	remoteDir := filepath.Join(t.TempDir(), "fleet.git")
	plainGit(t, remoteDir, "init", "-q", "--bare", remoteDir)
	if _, _, err := snapshot.FindGit(ctx); err != nil {
		t.Fatal(err)
	}
	real, _ := filepath.EvalSymlinks(ws)
	newPusher := func() *Pusher {
		return &Pusher{Store: st.ObjectsGit(),
			Remote: "file://" + remoteDir, Host: "h1", Key: Key(real), Home: t.TempDir()}
	}
	p := newPusher()
	m := Manifest{Workspace: real, Layout: "plain"}
	res, err := p.Sync(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	base := p.Base()
	if res.Updated != 4 || res.Pushes != 1 || res.Manifest == "" {
		t.Fatalf("first sync %+v", res)
	}
	if got := plainGit(t, remoteDir, "rev-parse", base+"cairn/manual/"+manual.ID); got != manual.SHA {
		t.Errorf("manual checkpoint on the remote: %s, want %s", got, manual.SHA)
	}
	body := plainGit(t, remoteDir, "show", ManifestRef("h1", Key(real))+":"+ManifestFile)
	if !strings.Contains(body, `"host": "h1"`) || !strings.Contains(body, `"refs": 4`) {
		t.Errorf("manifest %s", body)
	}
	if res, err := p.Sync(ctx, m); err != nil || !res.Nothing {
		t.Errorf("second sync %+v %v", res, err)
	}

	// Another writer moves the run branch on the remote: it is left alone and
	// reported; the other refs still go.
	other := plainGit(t, remoteDir, "commit-tree", "-m", "other", plainGit(t, remoteDir, "mktree"))
	plainGit(t, remoteDir, "update-ref", base+"heads/run-r1", other)
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("two"), 0o644)
	seal(snapshot.SealRequest{Kind: ckpt.KindCompleted, RunID: "r1", CodonID: "c2"})
	m2 := seal(snapshot.SealRequest{Kind: ckpt.KindManual})
	res, err = p.Sync(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Conflicts) != 1 || res.Conflicts[0].Ref != base+"heads/run-r1" || !res.Retried {
		t.Errorf("conflicts %+v", res)
	}
	if got := plainGit(t, remoteDir, "rev-parse", base+"heads/run-r1"); got != other {
		t.Errorf("the other writer's ref was overwritten: %s", got)
	}
	if got := plainGit(t, remoteDir, "rev-parse", base+"cairn/manual/"+m2.ID); got != m2.SHA {
		t.Errorf("new checkpoint not pushed beside the conflict")
	}

	// Retention drops a checkpoint: its ref is deleted on the remote, by lease.
	plainGit(t, st.GitDir(), "update-ref", "-d", "refs/cairn/manual/"+manual.ID)
	if res, err = p.Sync(ctx, m); err != nil || res.Deleted != 1 {
		t.Fatalf("deletion %+v %v", res, err)
	}
	if out, _ := exec.Command("git", "--git-dir", remoteDir, "rev-parse", "--verify", "-q", base+"cairn/manual/"+manual.ID).Output(); len(out) > 0 {
		t.Errorf("dropped ref still on the remote")
	}

	// A lost state is learned again from the remote: nothing is deleted
	// there for being unknown, nothing pushed twice (the manifest, whose
	// content sum went with the state, is written again).
	os.Remove(p.statePath())
	dataRefs := func() string {
		var keep []string
		for _, l := range strings.Split(plainGit(t, remoteDir, "for-each-ref"), "\n") {
			if !strings.HasSuffix(l, "/"+ManifestName) {
				keep = append(keep, l)
			}
		}
		return strings.Join(keep, "\n")
	}
	before := dataRefs()
	p2 := newPusher()
	res, err = p2.Sync(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	if res.Updated != 0 || res.Deleted != 0 {
		t.Errorf("after a lost state %+v", res)
	}
	if after := dataRefs(); after != before {
		t.Errorf("refs changed after a lost state:\n%s\n---\n%s", before, after)
	}
	if len(p2.Conflicts()) != 1 {
		t.Errorf("the other writer's ref is not known as a conflict: %+v", p2.Conflicts())
	}
}

func TestReplicateRedact(t *testing.T) {
	for in, want := range map[string]string{
		"https://user:s3cret@git.example/r.git": "https://git.example/r.git",
		"https://tok3n@git.example/r.git":       "https://git.example/r.git",
		"git@git.example:r.git":                 "git@git.example:r.git",
		"file:///srv/r.git":                     "file:///srv/r.git",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
	msg := RedactIn("fatal: unable to access 'https://user:s3cret@git.example/r.git/': 403 s3cret", "https://user:s3cret@git.example/r.git")
	if strings.Contains(msg, "s3cret") || strings.Contains(msg, "user@") {
		t.Errorf("RedactIn left a secret: %s", msg)
	}
}
