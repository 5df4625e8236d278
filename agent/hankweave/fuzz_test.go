package hankweave

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/cairn-dev/cairn/agent/hankweave/hwsim"
	"github.com/cairn-dev/cairn/agent/hankweave/hwsim/hwsimtest"
)

// FuzzParseState: no input panics ParseState, Due or ExitDue; whatever parses
// writes back to something that parses again and writes back identically.
func FuzzParseState(f *testing.F) {
	f.Add(readFuzzSeed(f, filepath.Join("testdata", "state-runtime.json")))
	f.Add([]byte(`{"runs":[],"currentRunId":null,"executionPlan":[]}`))
	f.Add([]byte(`{"runs":[null,1,"x",[],{"runId":"r","codons":[null,{"codonId":"a","status":"failed","failedDuring":7}]}],"currentRunId":"r","executionPlan":[{"codonId":"a","codon":null},{}]}`))
	f.Add([]byte(`{"runs":[{"runId":"r","status":"running","codons":[{"codonId":"a","status":"running","rigSetupCheckpoint":"` + string(bytes.Repeat([]byte("a"), 40)) + `"}]}],"currentRunId":"r","executionPlan":[{"codonId":"a","codon":{"id":"a","checkpointedFiles":["**"],"rigSetup":[{}]}}]}`))
	f.Add([]byte(`{"runs":[],"currentRunId":null,"executionPlan":[],"runs":[{}]}`)) // duplicate key
	f.Add([]byte(`{"runs":[],"currentRunId":null,"executionPl`))
	f.Add([]byte("\xff\xfe{}"))

	// States the simulated runtime writes along a scenario, and their torn halves.
	dir := f.TempDir()
	sim := hwsimtest.New(f, dir, hwsim.Plan(
		hwsim.Codon{ID: "a", Files: []string{"a.md"}, RigSetup: []hwsim.RigStep{hwsim.Command("make", nil)}},
		hwsim.Loop("l", 2, hwsim.Codon{ID: "r", Files: []string{"r.md"}}),
	))
	for _, step := range []func(){
		func() { sim.StartRun() },
		func() { sim.StartCodon("a") },
		func() { sim.FailCodon("a", "x", true) },
		func() { sim.StartCodon("a"); sim.CompleteCodon("a") },
		func() { sim.SkipCodon("r#0") },
		func() { sim.StartCodon("r#1"); sim.Crash(); sim.StartRun() },
	} {
		step()
		b := readFuzzSeed(f, StatePath(dir))
		f.Add(b)
		f.Add(b[:len(b)/2])
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := ParseState(data)
		if err != nil {
			if st != nil {
				t.Fatal("state with an error")
			}
			return
		}
		for _, m := range Due(st) {
			_ = m.Key()
		}
		_ = ExitDue(st, false)
		_, _, _ = Active(st)
		out, err := st.MarshalIndent()
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		st2, err := ParseState(out)
		if err != nil {
			t.Fatalf("rewritten state does not parse: %v\n%s", err, out)
		}
		out2, err := st2.MarshalIndent()
		if err != nil || !bytes.Equal(out, out2) {
			t.Fatalf("rewrite is not stable: %v\n%s\n%s", err, out, out2)
		}
	})
}

func readFuzzSeed(f *testing.F, path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// FuzzRawObject: the scanner never panics, whatever it is given, and on valid
// JSON objects it agrees with encoding/json.
func FuzzRawObject(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1}`, `{"a":"x\"}","b":[1,{"c":"]"}],"a":2}`, ` {"k" : [ ] , "l":null } `, `[1,2]`, `"s"`, `{"a":`, `{"a" 1}`, `{"\u0041":true}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		o, err := parseRawObject(data)
		_, _ = splitArray(data)
		if err != nil || !json.Valid(data) {
			return
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(data, &m) != nil {
			if o.IsObject() {
				t.Fatalf("scanner saw an object encoding/json did not: %q", data)
			}
			return
		}
		if !o.IsObject() || o.Len() != len(m) {
			t.Fatalf("members: %d vs %d for %q", o.Len(), len(m), data)
		}
		for k, v := range m {
			got, ok := o.Get(k)
			if !ok || !bytes.Equal(bytes.TrimSpace(got), bytes.TrimSpace(v)) {
				t.Fatalf("member %q: %q vs %q", k, got, v)
			}
		}
	})
}
