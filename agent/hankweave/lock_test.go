package hankweave

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/agent/hankweave/hwsim"
	"github.com/cairn-dev/cairn/agent/hankweave/hwsim/hwsimtest"
)

func TestLockAlive(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	live, dead := os.Getpid(), hwsim.DeadPID()
	iso := func(d time.Duration) string { return `"` + now.Add(-d).Format("2006-01-02T15:04:05.000Z") + `"` }
	ms := func(d time.Duration) string { return fmt.Sprint(now.Add(-d).UnixMilli()) }
	lock := func(pid int, hb string) string {
		return fmt.Sprintf(`{"pid": %d, "lockId": "l", "runId": "r", "startTime": %s, "lastHeartbeat": %s, "port": 7777}`, pid, iso(time.Hour), hb)
	}
	cases := []struct {
		name   string
		body   string // "" = no file
		mtime  time.Duration
		alive  bool
		hasErr bool
	}{
		{"no file", "", 0, false, false},
		{"fresh ISO", lock(live, iso(10*time.Second)), 0, true, false},
		{"fresh epoch ms", lock(live, ms(10*time.Second)), 0, true, false},
		{"fresh epoch ms string", lock(live, `"`+ms(10*time.Second)+`"`), 0, true, false},
		{"fresh epoch seconds", lock(live, fmt.Sprint(now.Add(-10*time.Second).Unix())), 0, true, false},
		{"at the limit", lock(live, iso(StaleAfter)), 0, true, false},
		{"stale ISO", lock(live, iso(StaleAfter+time.Second)), 0, false, false},
		{"stale epoch ms", lock(live, ms(5*time.Minute)), 0, false, false},
		{"future heartbeat", lock(live, iso(-time.Minute)), 0, true, false},
		{"dead pid, fresh heartbeat", lock(dead, iso(time.Second)), 0, false, false},
		{"pid 1 (alive, maybe EPERM)", lock(1, iso(time.Second)), 0, true, false},
		{"pid 0", lock(0, iso(time.Second)), 0, false, false},
		{"negative pid", lock(-1, iso(time.Second)), 0, false, false},
		{"pid as string", `{"pid": "` + fmt.Sprint(live) + `", "lastHeartbeat": ` + iso(time.Second) + `}`, 0, true, false},
		{"no heartbeat, fresh file", fmt.Sprintf(`{"pid": %d}`, live), 5 * time.Second, true, false},
		{"no heartbeat, old file", fmt.Sprintf(`{"pid": %d}`, live), 10 * time.Minute, false, false},
		{"null heartbeat, old file", fmt.Sprintf(`{"pid": %d, "lastHeartbeat": null}`, live), 10 * time.Minute, false, false},
		{"torn", `{"pid": 12`, 0, false, true},
		{"not an object", `[1]`, 0, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.body != "" {
				p := LockPath(dir)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(tc.body), 0o644); err != nil {
					t.Fatal(err)
				}
				mt := now.Add(-tc.mtime)
				if err := os.Chtimes(p, mt, mt); err != nil {
					t.Fatal(err)
				}
			}
			l, err := ReadLock(dir)
			if (err != nil) != tc.hasErr {
				t.Fatalf("ReadLock err = %v", err)
			}
			alive, why := l.Check(now)
			if alive != tc.alive {
				t.Fatalf("alive = %v (%s), want %v; lock %+v", alive, why, tc.alive, l)
			}
			if !alive && why == "" {
				t.Fatal("no reason given")
			}
			if l.Alive(now) != alive {
				t.Fatal("Alive and Check disagree")
			}
		})
	}
}

func TestLockFromSim(t *testing.T) {
	cases := []struct {
		name  string
		opts  []hwsim.Option
		play  func(s *hwsimtest.Sim)
		alive bool
		none  bool
	}{
		{"running", nil, func(s *hwsimtest.Sim) { s.StartRun(); s.Heartbeat() }, true, false},
		{"running, epoch ms", []hwsim.Option{hwsim.WithEpochMillisLock()}, func(s *hwsimtest.Sim) { s.StartRun() }, true, false},
		{"shut down", nil, func(s *hwsimtest.Sim) { s.StartRun(); s.Shutdown() }, false, true},
		{"stopped", nil, func(s *hwsimtest.Sim) { s.StartRun(); s.Stop() }, false, true},
		{"crashed", nil, func(s *hwsimtest.Sim) { s.StartRun(); s.Crash() }, false, false},
		{"crashed, epoch ms", []hwsim.Option{hwsim.WithEpochMillisLock()}, func(s *hwsimtest.Sim) { s.StartRun(); s.Crash() }, false, false},
		{"hung", nil, func(s *hwsimtest.Sim) { s.StartRun(); s.Hang() }, false, false},
		{"restarted after a crash", nil, func(s *hwsimtest.Sim) { s.StartRun(); s.Crash(); s.StartRun() }, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			sim := hwsimtest.New(t, dir, hwsim.Plan(hwsim.Codon{ID: "a"}), tc.opts...)
			tc.play(sim)
			l, err := ReadLock(dir)
			if err != nil {
				t.Fatal(err)
			}
			if (l == nil) != tc.none {
				t.Fatalf("lock = %+v", l)
			}
			if got := l.Alive(time.Now()); got != tc.alive {
				_, why := l.Check(time.Now())
				t.Fatalf("alive = %v (%s), want %v", got, why, tc.alive)
			}
			if l != nil && (l.RunID != sim.RunID() || l.Port != 7777 || l.LockID == "" || l.StartTime.IsZero()) {
				t.Fatalf("lock = %+v", l)
			}
		})
	}
}

func TestParseTime(t *testing.T) {
	want := time.Date(2025, 7, 21, 15, 7, 43, 686e6, time.UTC)
	cases := []struct {
		in string
		ok bool
	}{
		{`"2025-07-21T15:07:43.686Z"`, true},
		{`"2025-07-21T17:07:43.686+02:00"`, true},
		{`"2025-07-21T15:07:43.686"`, true},
		{`1753110463686`, true},
		{`"1753110463686"`, true},
		{`1753110463.686`, true},
		{`null`, false},
		{`""`, false},
		{`"yesterday"`, false},
		{`-5`, false},
		{`1e300`, false},
		{`{}`, false},
		{``, false},
	}
	for _, tc := range cases {
		got, ok := ParseTime(json.RawMessage(tc.in))
		if ok != tc.ok || (ok && !got.Equal(want)) {
			t.Errorf("ParseTime(%s) = %v, %v", tc.in, got, ok)
		}
	}
}
