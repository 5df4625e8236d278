package hankweave

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/agent/hankweave/hwsim"
	"github.com/cairn-dev/cairn/agent/hankweave/hwsim/hwsimtest"
)

func line(id string) string {
	return `{"id":"` + id + `","timestamp":"2026-01-01T00:00:00.000Z","type":"state.transition","data":{"transitionType":"CodonTransitioned","runId":"r","codonId":"a","from":"running","to":"completed"}}` + "\n"
}

func ids(evs []Event) string {
	var s []string
	for _, e := range evs {
		s = append(s, e.ID)
	}
	return strings.Join(s, ",")
}

// Each step appends to (or replaces) the journal, then Read must return the ids listed.
func TestJournalRead(t *testing.T) {
	type step struct {
		do   func(t *testing.T, path string)
		want string
	}
	appendRaw := func(s string) func(*testing.T, string) {
		return func(t *testing.T, path string) {
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteString(s); err != nil {
				t.Fatal(err)
			}
		}
	}
	replace := func(s string) func(*testing.T, string) {
		return func(t *testing.T, path string) {
			tmp := path + ".new"
			if err := os.WriteFile(tmp, []byte(s), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, path); err != nil {
				t.Fatal(err)
			}
		}
	}
	remove := func(t *testing.T, path string) { _ = os.Remove(path) }
	nothing := func(*testing.T, string) {}
	torn := line("3")

	cases := []struct {
		name  string
		steps []step
	}{
		{"no file yet", []step{{nothing, ""}, {appendRaw(line("1")), "1"}}},
		{"appends", []step{{appendRaw(line("1") + line("2")), "1,2"}, {nothing, ""}, {appendRaw(line("3")), "3"}}},
		{"torn last line held back", []step{
			{appendRaw(line("1") + torn[:40]), "1"},
			{appendRaw(torn[40:90]), ""},
			{appendRaw(torn[90:]), "3"},
		}},
		{"garbage and blank lines skipped", []step{
			{appendRaw("not json\n\n" + line("1") + "{\"id\":\"x\"}\n[1,2]\n" + line("2")), "1,2"},
		}},
		{"crlf", []step{{appendRaw(strings.TrimSuffix(line("1"), "\n") + "\r\n"), "1"}}},
		{"torn remnant then a complete line", []step{
			{appendRaw(line("1") + torn[:50]), "1"},
			{appendRaw(line("4")), "4"},
		}},
		{"compacted, then back", []step{
			{appendRaw(line("1") + line("2")), "1,2"},
			{remove, ""},
			{nothing, ""},
			{appendRaw(line("5")), "5"},
		}},
		{"replaced by a bigger file", []step{
			{appendRaw(line("1")), "1"},
			{replace(line("7") + line("8") + line("9")), "7,8,9"},
		}},
		{"replaced by a file of the same size", []step{
			{appendRaw(line("1")), "1"},
			{replace(line("7")), "7"},
		}},
		{"truncated", []step{
			{appendRaw(line("1") + line("2")), "1,2"},
			{func(t *testing.T, path string) { _ = os.Truncate(path, 0) }, ""},
			{appendRaw(line("6")), "6"},
		}},
		{"rewritten in place", []step{
			{appendRaw(line("1")), "1"},
			{func(t *testing.T, path string) { _ = os.WriteFile(path, []byte(line("7")+line("8")), 0o644) }, "7,8"},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := JournalPath(dir)
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			j := NewJournal(dir)
			for i, st := range tc.steps {
				st.do(t, path)
				evs, err := j.Read()
				if err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				if got := ids(evs); got != st.want {
					t.Fatalf("step %d: got %q, want %q", i, got, st.want)
				}
			}
		})
	}
}

// The simulator's journal: one state.transition per transition, then
// compaction (nothing, no error) and reappearance at the next start.
func TestJournalFromSim(t *testing.T) {
	dir := t.TempDir()
	sim := hwsimtest.New(t, dir, hwsim.Plan(hwsim.Codon{ID: "a", Files: []string{"a.md"}}))
	j := NewJournal(dir)
	if evs, err := j.Read(); err != nil || len(evs) != 0 {
		t.Fatalf("before start: %v %v", evs, err)
	}
	sim.StartRun()
	sim.StartCodon("a")
	evs, err := j.Read()
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range evs {
		tr, ok := e.Transition()
		if !ok || e.Time().IsZero() || e.ID == "" {
			t.Fatalf("event %+v", e)
		}
		k := tr.TransitionType
		if tr.TransitionType == "CodonTransitioned" {
			k += ":" + tr.From + ">" + tr.To
			if tr.RunID != sim.RunID() || tr.CodonID != "a" {
				t.Fatalf("transition %+v", tr)
			}
		}
		kinds = append(kinds, k)
	}
	want := "RunStarted CodonStarted CodonTransitioned:preparing>starting CodonTransitioned:starting>initializing CodonTransitioned:initializing>running"
	if got := strings.Join(kinds, " "); got != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
	sim.CompleteCodon("a")
	sim.Shutdown()
	if evs, _ := j.Read(); len(evs) != 3 {
		t.Fatalf("after shutdown: %d events", len(evs))
	}
	sim.CompactJournal()
	for i := 0; i < 2; i++ {
		if evs, err := j.Read(); err != nil || len(evs) != 0 {
			t.Fatalf("compacted: %v %v", evs, err)
		}
	}
	sim.StartRun() // brings events.jsonl back: read from its start
	evs, err = j.Read()
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 5+3+1 {
		t.Fatalf("after reappearance: %d events", len(evs))
	}
	if tr, _ := evs[len(evs)-1].Transition(); tr.TransitionType != "RunStarted" || tr.RunID != sim.RunID() {
		t.Fatalf("last event %+v", tr)
	}
}

func TestEventTransition(t *testing.T) {
	ev, ok := parseEventLine([]byte(`{"id":"e","timestamp":"2026-01-01T00:00:00.000Z","type":"state.transition","data":{"transitionType":"CheckpointCreated","runId":"r","codonId":"a","checkpointType":"completed","sha":"abc","branch":"run-r"}}`))
	if !ok {
		t.Fatal("not parsed")
	}
	tr, ok := ev.Transition()
	if !ok || tr.CheckpointType != "completed" || tr.SHA != "abc" || tr.Branch != "run-r" {
		t.Fatalf("%+v", tr)
	}
	if _, ok := (Event{Type: "file.updated", Data: []byte(`{}`)}).Transition(); ok {
		t.Fatal("not a transition")
	}
	if _, ok := (Event{Type: EventStateTransition, Data: []byte(`[1]`)}).Transition(); ok {
		t.Fatal("data not an object")
	}
}
