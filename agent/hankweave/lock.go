package hankweave

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/platform"
)

// StaleAfter is how old a lock's heartbeat may be before the runtime is
// considered gone (docs/runtime-formats.md: heartbeat every 30 s, stale past
// 120 s).
const StaleAfter = 120 * time.Second

// Lock is .hankweave/runtime.lock: {pid, lockId, runId, startTime,
// lastHeartbeat, port}. Timestamps are read from ISO 8601 strings or from
// epoch milliseconds (numbers or numeric strings); which the runtime writes
// is not documented, so both are accepted.
type Lock struct {
	PID           int
	LockID        string
	RunID         string
	StartTime     time.Time // zero when absent or unreadable
	LastHeartbeat time.Time // zero when absent or unreadable
	Port          int

	// ModTime is the lock file's modification time: every heartbeat rewrites
	// the file, so it stands in for an unreadable lastHeartbeat.
	ModTime time.Time
	Raw     RawObject
}

// ReadLock reads <exec>/.hankweave/runtime.lock. A missing file means the
// runtime is not running: (nil, nil). An unreadable or invalid file is an
// error (the runtime writes it by rename, so this is not a torn write; the
// caller should look again later rather than decide either way).
func ReadLock(execDir string) (*Lock, error) {
	path := LockPath(execDir)
	// A link, FIFO, device or huge file planted by the owner is refused, not
	// followed, waited on or read whole.
	f, err := platform.OpenRegular(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("read lock: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read lock: %w", err)
	}
	data, err := platform.ReadCapped(f, platform.MaxRuntimeFile)
	if err != nil {
		return nil, fmt.Errorf("read lock: %w", err)
	}
	l, err := ParseLock(data)
	if err != nil {
		return nil, fmt.Errorf("read lock %s: %w", path, err)
	}
	l.ModTime = fi.ModTime()
	return l, nil
}

// ParseLock parses the bytes of a lock file. Members of an unexpected type
// are left zero. It never panics.
func ParseLock(data []byte) (*Lock, error) {
	if !json.Valid(data) {
		return nil, errors.New("lock is not valid JSON")
	}
	raw, err := parseRawObject(data)
	if err != nil {
		return nil, err
	}
	if !raw.IsObject() {
		return nil, errors.New("lock is not a JSON object")
	}
	l := &Lock{Raw: raw}
	if v, ok := raw.Get("pid"); ok {
		l.PID, _ = jsonInt(v)
	}
	if v, ok := raw.Get("port"); ok {
		l.Port, _ = jsonInt(v)
	}
	if v, ok := raw.Get("lockId"); ok {
		l.LockID = jsonString(v)
	}
	if v, ok := raw.Get("runId"); ok {
		l.RunID = jsonString(v)
	}
	if v, ok := raw.Get("startTime"); ok {
		l.StartTime, _ = ParseTime(v)
	}
	if v, ok := raw.Get("lastHeartbeat"); ok {
		l.LastHeartbeat, _ = ParseTime(v)
	}
	return l, nil
}

// Alive reports whether the runtime holding this lock is running at now: its
// pid exists (kill(pid, 0) succeeds or fails with EPERM) and its heartbeat is
// at most StaleAfter old. A nil lock (no file) is not alive.
func (l *Lock) Alive(now time.Time) bool {
	alive, _ := l.Check(now)
	return alive
}

// Check is Alive with the reason when the runtime is not alive.
func (l *Lock) Check(now time.Time) (alive bool, reason string) {
	if l == nil {
		return false, "no runtime.lock"
	}
	if l.PID <= 0 {
		return false, "runtime.lock names no pid"
	}
	if ok, known := pidAlive(l.PID); known && !ok {
		return false, fmt.Sprintf("pid %d is gone", l.PID)
	}
	hb := l.LastHeartbeat
	if hb.IsZero() {
		hb = l.ModTime
	}
	if !hb.IsZero() {
		// A heartbeat in the future (clock skew) counts as fresh.
		if age := now.Sub(hb); age > StaleAfter {
			return false, fmt.Sprintf("heartbeat is %s old", age.Round(time.Second))
		}
	}
	return true, ""
}

// ParseTime reads a timestamp as the runtime writes one: an ISO 8601 string
// (JavaScript's toISOString, "2025-07-21T15:07:43.686Z"), or epoch time as a
// number or numeric string (milliseconds; values below 1e11 are taken as
// seconds). ok is false for anything else, null included.
func ParseTime(v json.RawMessage) (t time.Time, ok bool) {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return time.Time{}, false
	}
	if v[0] == '"' {
		var s string
		if json.Unmarshal(v, &s) != nil {
			return time.Time{}, false
		}
		return ParseTimeString(s)
	}
	var f float64
	if json.Unmarshal(v, &f) != nil {
		return time.Time{}, false
	}
	return epochTime(f)
}

// ParseTimeString is ParseTime for a string already unquoted.
func ParseTimeString(s string) (time.Time, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, false
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999Z07:00"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, true
		}
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return epochTime(f)
	}
	return time.Time{}, false
}

func epochTime(f float64) (time.Time, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) || f <= 0 || f > 1e15 {
		return time.Time{}, false
	}
	if f < 1e11 {
		f *= 1000
	}
	ms := int64(f)
	return time.UnixMilli(ms).Add(time.Duration((f - float64(ms)) * float64(time.Millisecond))), true
}

func jsonInt(v json.RawMessage) (int, bool) {
	var f float64
	if json.Unmarshal(v, &f) != nil {
		var s string
		if json.Unmarshal(v, &s) != nil {
			return 0, false
		}
		var err error
		if f, err = strconv.ParseFloat(strings.TrimSpace(s), 64); err != nil {
			return 0, false
		}
	}
	if f != math.Trunc(f) || f < math.MinInt32 || f > math.MaxInt32 {
		return 0, false
	}
	return int(f), true
}

func jsonString(v json.RawMessage) string {
	var s string
	if json.Unmarshal(v, &s) != nil {
		return ""
	}
	return s
}
