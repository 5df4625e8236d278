package cli

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/checkpoints"
	"github.com/cairn-dev/cairn/agent/hankweave/hwsim"
	"github.com/cairn-dev/cairn/agent/hankweave/hwsim/hwsimtest"
	"github.com/cairn-dev/cairn/restore"
	"github.com/cairn-dev/cairn/restore/ckpt"
	"github.com/cairn-dev/cairn/restore/timeline"
	"github.com/cairn-dev/cairn/snapshot"
	"github.com/cairn-dev/cairn/snapshot/retain"
)

var update = flag.Bool("update", false, "rewrite the testdata/ golden files")

// story plays a simulated runtime in an execution directory and seals what
// the daemon's lifecycle pass seals for it (agent/workspace/lifecycle.go), on the real
// store, with real git; restores go through checkpoints.RunRestore and checkpoints.Undo,
// as the CLI's direct path does.
type story struct {
	t    *testing.T
	ctx  context.Context
	sim  *hwsimtest.Sim
	st   *snapshot.Store
	cont *api.Continuation // the continuation the last rollback recorded
}

var storyPlan = hwsim.Plan(
	hwsim.Codon{ID: "setup", Name: "Set up", RigSetup: []hwsim.RigStep{hwsim.Command("npm ci", map[string]string{"package.json": "{}\n"})}},
	hwsim.Codon{ID: "write", Name: "Write the code"},
	hwsim.Codon{ID: "test", Name: "Run the tests"},
)

func newStory(t *testing.T) *story {
	t.Helper()
	exec := filepath.Join(t.TempDir(), "exec")
	s := &story{t: t, ctx: context.Background()}
	s.sim = hwsimtest.New(t, exec, storyPlan, hwsim.WithRunIDs("1753110463686-yayna", "1753111000000-kcont"))
	st, err := snapshot.Open(s.ctx, exec, snapshot.Options{Layout: snapshot.LayoutHankweave})
	if err != nil {
		t.Fatal(err)
	}
	s.st = st
	t.Cleanup(func() { s.st.Close() })
	s.seal(snapshot.SealRequest{Kind: ckpt.KindBaseline, Label: "first watched"})
	return s
}

func (s *story) seal(req snapshot.SealRequest) ckpt.Record {
	s.t.Helper()
	rec, err := s.st.Seal(s.ctx, req)
	if err != nil || rec.ID == "" {
		s.t.Fatalf("seal %s %s: %+v %v", req.Kind, req.CodonID, rec, err)
	}
	return rec
}

// marker seals a lifecycle checkpoint of the current run, on the source
// checkpoint of a continuation as the daemon does.
func (s *story) marker(kind ckpt.Kind, codon string, attempt int) ckpt.Record {
	s.t.Helper()
	req := snapshot.SealRequest{Kind: kind, CodonID: codon, CodonName: nameOf(codon), RunID: s.sim.RunID(), Attempt: attempt}
	if s.cont != nil && s.cont.ToRun == req.RunID {
		req.StartSHA = s.cont.CheckpointSHA
	}
	return s.seal(req)
}

func nameOf(codon string) string {
	for _, e := range storyPlan {
		if e.CodonID == codon {
			return e.Codon.Name
		}
	}
	return codon
}

// codon plays one codon to its end and seals its markers; the agent writes
// file while it runs.
func (s *story) codon(id, file string, fail bool, attempt int) {
	s.t.Helper()
	s.sim.StartCodon(id)
	if id == "setup" {
		s.marker(ckpt.KindRigSetup, id, attempt)
	}
	s.sim.WriteFile(file, id+" "+file+"\n")
	if fail {
		s.sim.FailCodon(id, "tests failed", true)
		s.marker(ckpt.KindError, id, attempt)
		return
	}
	s.sim.CompleteCodon(id)
	s.marker(ckpt.KindCompleted, id, attempt)
}

// autosave changes a file and seals the autosave the quiet period brings.
func (s *story) autosave(file string) {
	s.t.Helper()
	s.sim.WriteFile(file, "draft of "+file+"\n")
	s.seal(snapshot.SealRequest{Kind: ckpt.KindAutosave, SkipUnchanged: true})
}

func (s *story) restore(target string) {
	s.t.Helper()
	tg, err := restore.ParseTarget(target)
	if err != nil {
		s.t.Fatal(err)
	}
	res, err := checkpoints.RunRestore(s.ctx, s.st, s.st.Dir(), restore.Op{Target: tg, Continue: true})
	if err != nil {
		s.t.Fatalf("restore %s: %v", target, err)
	}
	if res.Continued == nil {
		s.t.Fatalf("restore %s recorded no continuation: %s", target, res.StateNote)
	}
	s.cont = res.Continued
}

// retain applies a retention policy that keeps the newest n autosaves.
func (s *story) retain(n int) {
	s.t.Helper()
	all := retain.Policy{KeepLast: 100}
	res, err := checkpoints.ApplyRetention(s.ctx, s.st, retain.Policies{Autosave: retain.Policy{KeepLast: n}, PreRestore: all, Checkpoints: all}, time.Now())
	if err != nil || len(res.Pruned) == 0 {
		s.t.Fatalf("retention pruned nothing: %+v %v", res, err)
	}
}

func (s *story) undo() {
	s.t.Helper()
	if _, err := checkpoints.Undo(s.ctx, s.st, s.st.Dir(), restore.Op{}); err != nil {
		s.t.Fatalf("undo: %v", err)
	}
}

// ledger closes the store and reads the ledger as `cairn log` does without a
// daemon.
func (s *story) ledger() ledger {
	s.t.Helper()
	s.st.Close()
	dir := s.sim.ExecDir()
	l, err := localBackend{f: &storeFlags{layout: "auto"}, dir: dir, real: dir}.list(s.ctx)
	if err != nil {
		s.t.Fatal(err)
	}
	return l
}

var (
	logBase = time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	recRef  = regexp.MustCompile(`(refs/heads/recovery/)[^"]*`)
)

// stable makes what the clock, chance and git decide (SHAs, times, seal
// durations, the continuation's run id, recovery refs) a function of the
// ledger ids, keeping every relation between records: record cN was sealed
// N minutes after logBase. It returns the drawing's now.
func stable(recs []ckpt.Record) time.Time {
	slices.SortFunc(recs, func(a, b ckpt.Record) int { return num(b) - num(a) })
	runs := map[string]string{}
	runIDs := []string{"1753110463686-yayna", "1753111235034-wbnqe", "1753112004411-ofh2k"}
	for i := len(recs) - 1; i >= 0; i-- { // oldest first: runs named in the order they began
		if id := recs[i].RunID; id != "" && runs[id] == "" {
			runs[id] = runIDs[len(runs)]
		}
	}
	fake := map[string]string{}
	name := func(sha string) string {
		if sha == "" {
			return ""
		}
		if _, ok := fake[sha]; !ok {
			id := "outside"
			for _, r := range recs {
				if r.SHA == sha && (id == "outside" || num(r) < num(ckpt.Record{ID: id})) {
					id = r.ID
				}
			}
			sum := sha1.Sum([]byte(id))
			fake[sha] = hex.EncodeToString(sum[:])
		}
		return fake[sha]
	}
	last := 0
	for i := range recs {
		r := &recs[i]
		n, _ := ckpt.LedgerNum(r.ID)
		last = max(last, n)
		r.SHA, r.Parent = name(r.SHA), name(r.Parent)
		if r.RunID != "" {
			r.Ref = strings.ReplaceAll(r.Ref, r.RunID, runs[r.RunID])
			r.RunID = runs[r.RunID]
		}
		r.Time = logBase.Add(time.Duration(n) * time.Minute)
		r.DurationMS = 0
		if r.PrunedAt != nil {
			at := logBase.Add(time.Duration(n)*time.Minute + 30*time.Second)
			r.PrunedAt = &at
		}
		r.Ref = recRef.ReplaceAllString(r.Ref, "${1}TIME-LABEL-HEX")
	}
	return logBase.Add(time.Duration(last+3) * time.Minute)
}

func num(r ckpt.Record) int {
	n, ok := ckpt.LedgerNum(r.ID)
	if !ok {
		return 1 << 30
	}
	return n
}

// TestLogGolden draws stores the real engine built, against testdata/log/.
func TestLogGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		play func(s *story)
		opts timeline.Options
	}{
		{"run", func(s *story) {
			s.sim.StartRun()
			s.codon("setup", "README.md", false, 0)
			s.codon("write", "main.go", false, 0)
			s.codon("test", "main_test.go", false, 0)
			s.sim.Shutdown()
		}, timeline.Options{}},
		{"retry", func(s *story) {
			s.sim.StartRun()
			s.codon("setup", "README.md", false, 0)
			s.codon("write", "main.go", true, 0)
			s.codon("write", "main.go", false, 1)
			s.codon("test", "main_test.go", false, 0)
			s.sim.Shutdown()
		}, timeline.Options{}},
		{"autosaves", func(s *story) {
			s.sim.StartRun()
			s.codon("setup", "README.md", false, 0)
			s.autosave("notes.md")
			s.autosave("draft.go")
			s.codon("write", "main.go", false, 0)
			s.autosave("main.go")
			s.codon("test", "main_test.go", false, 0)
			s.sim.Shutdown()
		}, timeline.Options{}},
		{"rollback", func(s *story) {
			s.sim.StartRun()
			s.codon("setup", "README.md", false, 0)
			s.codon("write", "main.go", false, 0)
			s.codon("test", "main_test.go", false, 0)
			s.sim.Shutdown()
			s.restore("codon:setup") // the runtime's rollback: a continuation run from setup's end
			s.sim.StartRun()
			s.codon("write", "main.go", false, 0)
			s.autosave("main.go")
			s.codon("test", "main_test.go", false, 0)
			s.sim.Shutdown()
		}, timeline.Options{}},
		{"undo", func(s *story) {
			s.sim.StartRun()
			s.codon("setup", "README.md", false, 0)
			s.codon("write", "main.go", false, 0)
			s.sim.Shutdown()
			s.restore("c3") // setup's completed checkpoint
			s.undo()        // back to where the restore left from
			s.autosave("main.go")
		}, timeline.Options{}},
		{"pruned", pruneStory, timeline.Options{}},
		{"pruned-all", pruneStory, timeline.Options{All: true}},
		{"limit", func(s *story) {
			s.sim.StartRun()
			s.codon("setup", "README.md", false, 0)
			s.autosave("notes.md")
			s.codon("write", "main.go", false, 0)
			s.codon("test", "main_test.go", false, 0)
			s.sim.Shutdown()
		}, timeline.Options{Limit: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStory(t)
			tc.play(s)
			l := s.ledger()
			now := stable(l.recs)
			opts := tc.opts
			opts.Head = l.head
			g := timeline.Layout(l.recs, opts)
			var b bytes.Buffer
			drawLog(&b, g, now, false)
			golden(t, tc.name+".golden", b.Bytes())
			if tc.name == "rollback" {
				b.Reset()
				drawLog(&b, g, now, true)
				golden(t, tc.name+".color.golden", b.Bytes())
				b.Reset()
				if err := printLogJSON(&b, g); err != nil {
					t.Fatal(err)
				}
				golden(t, tc.name+".json.golden", b.Bytes())
			}
		})
	}
}

// pruneStory: autosaves, of which retention keeps the newest two.
func pruneStory(s *story) {
	s.sim.StartRun()
	s.codon("setup", "README.md", false, 0)
	s.autosave("notes.md")
	s.autosave("draft.go")
	s.autosave("todo.md")
	s.codon("write", "main.go", false, 0)
	s.sim.Shutdown()
	s.retain(2)
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "log", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (run with -update to rewrite it)\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

// TestLogColourModes: --color never and auto without a terminal draw plain.
func TestLogColourModes(t *testing.T) {
	for _, c := range []struct {
		mode string
		want palette
		bad  bool
	}{{"never", false, false}, {"always", true, false}, {"auto", false, false}, {"sometimes", false, true}} {
		p, err := colourFor(c.mode, &bytes.Buffer{})
		if p != c.want || (err != nil) != c.bad {
			t.Errorf("--color %s: %v %v", c.mode, p, err)
		}
	}
	for r, want := range map[*ckpt.Record]string{
		{State: ckpt.StateFailed, RunID: "r"}: "×", {State: ckpt.StateOK, RunID: "r"}: "●", {State: ckpt.StatePruned}: "○",
	} {
		if got := nodeSign(*r); got != want {
			t.Errorf("sign of %+v: %s, want %s", *r, got, want)
		}
	}
	if got := palette(false).paint(sgrRed, "x"); got != "x" {
		t.Errorf("the plain palette painted: %q", got)
	}
}
