package snapshot

import (
	"bytes"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// An open reads thousands of ledger lines, and decoding them with
// encoding/json was most of its time. The lines cairn writes have one
// simple shape: a flat object of plain strings, integers and booleans. The
// fast path below decodes exactly that shape without reflection and says
// no to anything else (escapes, arrays, null, floats, an unknown or
// differently cased key, invalid UTF-8, bytes after the object); the
// caller then decodes the line with encoding/json, so the result is always
// what json.Unmarshal gives (FuzzDecodeRecordFast, FuzzDecodePruneFast).

// flatValue is one value of a flat object: a string without escapes, an
// integer, or a boolean.
type flatValue struct {
	str  []byte
	num  int64
	flag bool
	kind byte // 's', 'n', 'b'
}

func (v flatValue) text() (string, bool)   { return string(v.str), v.kind == 's' }
func (v flatValue) integer() (int64, bool) { return v.num, v.kind == 'n' }

// small is an integer that fits an int (encoding/json refuses the rest).
func (v flatValue) small() (int, bool) {
	return int(v.num), v.kind == 'n' && v.num == int64(int(v.num))
}
func (v flatValue) boolean() (bool, bool) { return v.flag, v.kind == 'b' }

// time decodes a string as encoding/json decodes a time.Time.
func (v flatValue) time() (time.Time, bool) {
	var t time.Time
	return t, v.kind == 's' && t.UnmarshalText(v.str) == nil
}

// scanFlat calls fn for each key and value of a flat JSON object, in
// order; false (from the scan or from fn) means "not the simple shape".
func scanFlat(line []byte, fn func(key string, v flatValue) bool) bool {
	p := bytes.Trim(line, " \t\r\n") // JSON's whitespace, no other
	if len(p) < 2 || p[0] != '{' || p[len(p)-1] != '}' {
		return false
	}
	p = p[1 : len(p)-1]
	i := 0
	skip := func() {
		for i < len(p) && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r') {
			i++
		}
	}
	str := func() ([]byte, bool) {
		if i >= len(p) || p[i] != '"' {
			return nil, false
		}
		j := bytes.IndexByte(p[i+1:], '"')
		if j < 0 {
			return nil, false
		}
		s := p[i+1 : i+1+j]
		if bytes.IndexByte(s, '\\') >= 0 || !utf8.Valid(s) {
			return nil, false
		}
		for _, c := range s {
			if c < 0x20 {
				return nil, false
			}
		}
		i += j + 2
		return s, true
	}
	value := func() (flatValue, bool) {
		switch {
		case i >= len(p):
			return flatValue{}, false
		case p[i] == '"':
			s, ok := str()
			return flatValue{str: s, kind: 's'}, ok
		case bytes.HasPrefix(p[i:], []byte("true")):
			i += 4
			return flatValue{flag: true, kind: 'b'}, true
		case bytes.HasPrefix(p[i:], []byte("false")):
			i += 5
			return flatValue{kind: 'b'}, true
		}
		j := i
		if p[j] == '-' {
			j++
		}
		k := j
		for j < len(p) && '0' <= p[j] && p[j] <= '9' {
			j++
		}
		if j == k || (p[k] == '0' && j-k > 1) {
			return flatValue{}, false
		}
		n, err := strconv.ParseInt(string(p[i:j]), 10, 64)
		i = j
		return flatValue{num: n, kind: 'n'}, err == nil
	}
	skip()
	for first := true; i < len(p); first = false {
		if !first {
			if p[i] != ',' {
				return false
			}
			i++
			skip()
			if i >= len(p) {
				return false // a trailing comma
			}
		}
		key, ok := str()
		if !ok {
			return false
		}
		skip()
		if i >= len(p) || p[i] != ':' {
			return false
		}
		i++
		skip()
		v, ok := value()
		if !ok || !fn(string(key), v) {
			return false
		}
		skip()
	}
	return true
}

// decodeRecordFast decodes a ledger record of the simple shape.
func decodeRecordFast(line []byte, r *ckpt.Record) bool {
	var out ckpt.Record
	ok := scanFlat(line, func(key string, v flatValue) bool {
		var ok bool
		switch key {
		case "id":
			out.ID, ok = v.text()
		case "sha":
			out.SHA, ok = v.text()
		case "parent":
			out.Parent, ok = v.text()
		case "kind":
			var s string
			s, ok = v.text()
			out.Kind = ckpt.Kind(s)
		case "label":
			out.Label, ok = v.text()
		case "codonId":
			out.CodonID, ok = v.text()
		case "codonName":
			out.CodonName, ok = v.text()
		case "runId":
			out.RunID, ok = v.text()
		case "ref":
			out.Ref, ok = v.text()
		case "state":
			var s string
			s, ok = v.text()
			out.State = ckpt.State(s)
		case "error":
			out.Error, ok = v.text()
		case "engine":
			out.Engine, ok = v.text()
		case "prunedBy":
			out.PrunedBy, ok = v.text()
		case "attempt":
			out.Attempt, ok = v.small()
		case "durationMs":
			out.DurationMS, ok = v.integer()
		case "changed":
			out.Changed, ok = v.small()
		case "added":
			out.Added, ok = v.small()
		case "removed":
			out.Removed, ok = v.small()
		case "adopted":
			out.Adopted, ok = v.boolean()
		case "recovered":
			out.Recovered, ok = v.boolean()
		case "time":
			out.Time, ok = v.time()
		case "prunedAt":
			var t time.Time
			t, ok = v.time()
			out.PrunedAt = &t
		}
		return ok // issues, skipped, or a key this code does not know: encoding/json
	})
	if ok {
		*r = out
	}
	return ok
}

// decodePruneFast decodes a prune line of the simple shape.
func decodePruneFast(line []byte, m *pruneLine) bool {
	var out pruneLine
	ok := scanFlat(line, func(key string, v flatValue) bool {
		var ok bool
		switch key {
		case "prune":
			out.Prune, ok = v.text()
		case "prunedAt":
			out.PrunedAt, ok = v.time()
		case "prunedBy":
			out.PrunedBy, ok = v.text()
		}
		return ok
	})
	if ok {
		*m = out
	}
	return ok
}
