package snapshot

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// FuzzDecodeRecordFast: whatever the fast path accepts, encoding/json
// accepts too and decodes to the same record.
func FuzzDecodeRecordFast(f *testing.F) {
	at := time.Date(2026, 11, 30, 21, 16, 8, 39896135, time.UTC)
	for _, r := range []ckpt.Record{
		{ID: "c1", SHA: "f22b8bd24f5fa407a9f1a616c8ead5da373af22b", Parent: "44a5d7aa9fbc614433cf2075e56e9d4263a1a51e", Kind: ckpt.KindBaseline, Ref: "refs/cairn/baseline/c1", Time: at, DurationMS: 3404, Added: 10000, State: ckpt.StateOK},
		{ID: "c7", Kind: ckpt.KindCompleted, Label: "a “label” ✔", CodonID: "write", CodonName: "Write the code", RunID: "1753110463686-yayna", Attempt: 2, Time: at, State: ckpt.StateOK, Adopted: true, Recovered: true},
		{ID: "c9", Kind: ckpt.KindAutosave, Time: at, State: ckpt.StateFailed, Error: "disk full"},
		{ID: "c3", Kind: ckpt.KindAutosave, Time: at, State: ckpt.StatePruned, PrunedAt: &at, PrunedBy: "retention.autosave: keep_last=1"},
		{ID: "c4", Kind: ckpt.KindManual, Time: at, State: ckpt.StatePartial, Issues: []ckpt.PathIssue{{Path: "a", Reason: "b"}}},
		{ID: "c5", Kind: ckpt.KindManual, Label: "quote \" and \\ and \n", Time: at.In(time.FixedZone("", 7200)), State: ckpt.StateOK},
	} {
		b, _ := json.Marshal(r)
		f.Add(b)
	}
	for _, s := range []string{`{}`, ` { } `, `{"id":"c1",}`, `{"id":"c1"}}`, `{"ID":"c1"}`, `{"id":null}`, `{"added":012}`, `{"added":-0}`,
		`{"added":1e3}`, `{"recovered":truex}`, `{"time":"2026-11-30T25:00:00Z"}`, "\u00a0{\"id\":\"c1\"}", `{"id":"c1","id":"c2"}`, "{\"id\":\"\xff\"}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		var fast, slow ckpt.Record
		if !decodeRecordFast(line, &fast) {
			return
		}
		if err := json.Unmarshal(line, &slow); err != nil {
			t.Fatalf("fast path accepted %q; encoding/json: %v", line, err)
		}
		a, _ := json.Marshal(fast)
		b, _ := json.Marshal(slow)
		if !bytes.Equal(a, b) {
			t.Fatalf("%q:\nfast %s\njson %s", line, a, b)
		}
	})
}

// FuzzDecodePruneFast: the same for prune lines.
func FuzzDecodePruneFast(f *testing.F) {
	for _, s := range []string{`{"prune":"c3","prunedAt":"2026-11-30T21:16:08.039896135Z","prunedBy":"retention.autosave: keep_last=1"}`,
		`{"prune":"c3","prunedAt":"2026-11-30T21:16:08+02:00","prunedBy":"budget (max 1.0 KiB)","x":1}`, `{"prune":"c3",}`, `{"prune":null}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		var fast, slow pruneLine
		if !decodePruneFast(line, &fast) {
			return
		}
		if err := json.Unmarshal(line, &slow); err != nil {
			t.Fatalf("fast path accepted %q; encoding/json: %v", line, err)
		}
		a, _ := json.Marshal(fast)
		b, _ := json.Marshal(slow)
		if !bytes.Equal(a, b) {
			t.Fatalf("%q:\nfast %s\njson %s", line, a, b)
		}
	})
}
