package hankweave

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/cairn-dev/cairn/platform"
)

// Event is one journal line: {"id", "timestamp", "type", "data"}.
type Event struct {
	ID        string          `json:"id"`
	Timestamp string          `json:"timestamp"`
	Type      string          `json:"type"`
	Data      json.RawMessage `json:"data,omitempty"`
}

// EventStateTransition is the type of the journal's state-change lines.
const EventStateTransition = "state.transition"

// Time parses the event's timestamp (zero when unreadable).
func (e Event) Time() time.Time {
	t, _ := ParseTimeString(e.Timestamp)
	return t
}

// Transition is the data of a state.transition line. Which members are set
// depends on TransitionType (docs/runtime-formats.md, "The journal").
type Transition struct {
	TransitionType string          `json:"transitionType"` // RunStarted, CodonTransitioned, CheckpointCreated, …
	RunID          string          `json:"runId"`
	CodonID        string          `json:"codonId"`
	From           string          `json:"from"` // CodonTransitioned
	To             string          `json:"to"`   // CodonTransitioned
	Metadata       json.RawMessage `json:"metadata"`
	CheckpointType string          `json:"checkpointType"` // CheckpointCreated
	SHA            string          `json:"sha"`            // CheckpointCreated
	Branch         string          `json:"branch"`         // CheckpointCreated
}

// Transition decodes the data of a state.transition event; ok is false for
// any other event or data that does not fit.
func (e Event) Transition() (tr Transition, ok bool) {
	if e.Type != EventStateTransition || len(e.Data) == 0 {
		return Transition{}, false
	}
	if json.Unmarshal(e.Data, &tr) != nil || tr.TransitionType == "" {
		return Transition{}, false
	}
	return tr, true
}

// Bounds on what a Journal holds in memory.
const (
	journalReadChunk = 1 << 20  // bytes read per Read call at most, 1 MiB at a time
	journalReadMax   = 16 << 20 // bytes consumed per Read call at most
	journalMaxLine   = 16 << 20 // a line longer than this is dropped
	journalHeadLen   = 256      // bytes of the file's start remembered to notice a replacement
)

// Journal tails .hankweave/events/events.jsonl by offset. Read returns the
// complete lines appended since the last call. A torn last line is held back
// until its newline arrives; a line that does not parse is skipped. When the
// file disappears (the runtime compacted it into events.jsonl.zst) Read
// returns nothing and no error; when a file is back, or was replaced or
// truncated (a different inode, a smaller size, or different first bytes),
// reading restarts at offset 0.
//
// A Journal is not safe for concurrent use.
type Journal struct {
	path    string
	offset  int64       // bytes of the file consumed (complete lines and the held-back tail)
	pending []byte      // the torn tail: bytes after the last newline
	drop    bool        // discarding an over-long line up to its newline
	info    fs.FileInfo // the file as last seen
	head    []byte      // its first bytes as last seen
	skipped int
}

// NewJournal tails the journal of an execution directory, from its start.
func NewJournal(execDir string) *Journal { return &Journal{path: JournalPath(execDir)} }

// NewJournalAt tails the journal file at path.
func NewJournalAt(path string) *Journal { return &Journal{path: path} }

// Path is the file tailed.
func (j *Journal) Path() string { return j.path }

// Offset is how many bytes of the current file have been consumed.
func (j *Journal) Offset() int64 { return j.offset }

// Skipped counts lines that did not parse, over the Journal's life.
func (j *Journal) Skipped() int { return j.skipped }

// Reset forgets the position: the next Read starts at offset 0.
func (j *Journal) Reset() {
	j.offset, j.pending, j.drop, j.info, j.head = 0, nil, false, nil, nil
}

// Read returns the events completed since the last call, in file order.
func (j *Journal) Read() ([]Event, error) {
	// The journal is tailed, not read whole, so it has no size limit; but a
	// link, FIFO or device in its place is refused, never followed or waited on.
	f, err := platform.OpenRegular(j.path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			j.Reset() // compacted or not yet created: a file that comes back starts over
			return nil, nil
		}
		return nil, fmt.Errorf("journal: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	if j.replaced(f, fi) {
		j.Reset()
	}
	j.info = fi
	if fi.Size() <= j.offset {
		return nil, nil
	}
	if _, err := f.Seek(j.offset, io.SeekStart); err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	var events []Event
	buf := make([]byte, journalReadChunk)
	consumed := 0
	for consumed < journalReadMax {
		n, rerr := f.Read(buf)
		if n > 0 {
			consumed += n
			j.offset += int64(n)
			j.rememberHead(buf[:n], j.offset-int64(n))
			events = j.split(buf[:n], events)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return events, fmt.Errorf("journal: %w", rerr)
		}
	}
	return events, nil
}

// replaced reports whether the file at the path is not the one read so far.
func (j *Journal) replaced(f *os.File, fi fs.FileInfo) bool {
	if j.info == nil {
		return j.offset != 0
	}
	if !os.SameFile(j.info, fi) || fi.Size() < j.offset {
		return true
	}
	// An inode number can be reused at once by a new file: compare the start too.
	if len(j.head) > 0 {
		got := make([]byte, len(j.head))
		n, _ := f.ReadAt(got, 0)
		if !bytes.Equal(got[:n], j.head) {
			return true
		}
	}
	return false
}

func (j *Journal) rememberHead(chunk []byte, at int64) {
	if at >= journalHeadLen || int64(len(j.head)) != at {
		return
	}
	room := journalHeadLen - len(j.head)
	if room > len(chunk) {
		room = len(chunk)
	}
	j.head = append(j.head, chunk[:room]...)
}

// split appends the complete lines of pending+chunk to events, keeping the tail.
func (j *Journal) split(chunk []byte, events []Event) []Event {
	for len(chunk) > 0 {
		i := bytes.IndexByte(chunk, '\n')
		if i < 0 {
			if !j.drop {
				j.pending = append(j.pending, chunk...)
				if len(j.pending) > journalMaxLine {
					j.pending, j.drop = nil, true
					j.skipped++
				}
			}
			return events
		}
		line := chunk[:i]
		chunk = chunk[i+1:]
		if j.drop {
			j.drop = false
			continue
		}
		if len(j.pending) > 0 {
			line = append(j.pending, line...)
			j.pending = nil
		}
		if ev, ok := parseEventLine(line); ok {
			events = append(events, ev)
		} else if len(bytes.TrimSpace(line)) > 0 {
			j.skipped++
		}
	}
	return events
}

// parseEventLine parses one line. A line whose start is the remnant of a write
// torn by a crash, followed by a complete event the runtime appended after it
// restarted, yields that event.
func parseEventLine(line []byte) (Event, bool) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return Event{}, false
	}
	if ev, ok := decodeEvent(line); ok {
		return ev, true
	}
	for from, tries := 1, 0; from < len(line) && tries < 64; tries++ {
		k := bytes.Index(line[from:], []byte(`{"`))
		if k < 0 {
			break
		}
		from += k
		if ev, ok := decodeEvent(line[from:]); ok {
			return ev, true
		}
		from++
	}
	return Event{}, false
}

func decodeEvent(b []byte) (Event, bool) {
	if len(b) == 0 || b[0] != '{' || !json.Valid(b) {
		return Event{}, false
	}
	var raw map[string]json.RawMessage
	if json.Unmarshal(b, &raw) != nil {
		return Event{}, false
	}
	var ev Event
	if v, ok := raw["type"]; !ok || json.Unmarshal(v, &ev.Type) != nil || ev.Type == "" {
		return Event{}, false
	}
	if v, ok := raw["id"]; ok {
		if json.Unmarshal(v, &ev.ID) != nil {
			ev.ID = string(v) // numeric ids are kept as written
		}
	}
	if v, ok := raw["timestamp"]; ok {
		if json.Unmarshal(v, &ev.Timestamp) != nil {
			ev.Timestamp = string(v)
		}
	}
	if v, ok := raw["data"]; ok {
		ev.Data = v
	}
	return ev, true
}
