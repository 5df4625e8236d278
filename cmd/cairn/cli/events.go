package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"
	"time"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/client"
	"github.com/cairn-dev/cairn/platform/printable"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

func init() {
	register("events", "follow the daemon's events, one line each", runEvents)
}

// How long to wait between attempts to reach the daemon again: from
// eventsRetryMin, doubling, at most eventsRetryMax; back to the minimum once
// a stream is open.
const (
	eventsRetryMin = 100 * time.Millisecond
	eventsRetryMax = 2 * time.Second
)

// codeEventsDropped is the error event the daemon sends before it cuts off
// a client that reads too slowly (docs/cairn-formats.md, "Events").
const codeEventsDropped = "EVENTS_DROPPED"

func runEvents(ctx context.Context, e *env, args []string) error {
	fs := newFlags("events", "events [--workspace DIR] [--json] [--wait] [--socket PATH]", e)
	var df daemonFlags
	df.register(fs)
	dir := fs.String("workspace", "", "only this workspace's events")
	asJSON := fs.Bool("json", false, "print each event as the daemon sent it, one JSON object a line")
	wait := fs.Bool("wait", false, "when no daemon answers at the start, wait for one instead of failing")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		fs.Usage()
		return usageErr("events takes no arguments; use --workspace DIR")
	}
	t := tail{e: e, c: df.client(), json: *asJSON, wait: *wait}
	defer t.c.Close()
	if *dir != "" {
		// The daemon knows a workspace by its real path, as every other command asks about it.
		if t.only, err = realAbs(*dir); err != nil {
			return err
		}
	}
	return t.run(ctx)
}

// tail follows the daemon's event stream until ctx ends (SIGINT, SIGTERM),
// opening it again whenever it ends: a daemon restarting, or the daemon
// cutting off a client that reads too slowly.
type tail struct {
	e    *env
	c    *client.Client
	only string // the workspace whose events the daemon sends; "" for all
	json bool
	wait bool
}

func (t *tail) run(ctx context.Context) error {
	delay := eventsRetryMin
	answered := false // a daemon answered once: from then on, never give up
	away := false     // stderr said the stream is gone (or awaited): say when it is back
	wasBack := false  // a stream proved itself once: "reconnected", not "connected"
	refusal := ""     // the daemon's last refusal, said once
	pause := func() bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(delay):
		}
		delay = min(delay*2, eventsRetryMax)
		return true
	}
	for {
		s, err := t.c.OpenEvents(ctx, t.only)
		if ctx.Err() != nil {
			if err == nil {
				s.Close()
			}
			return nil
		}
		if err != nil {
			var ce *client.Error
			isRefusal := errors.As(err, &ce)
			if !answered && !t.wait {
				if isRefusal {
					return daemonError{ce}
				}
				return t.unreachable(err)
			}
			if !away {
				away = true
				fmt.Fprintf(t.e.stderr, "cairn: waiting for a daemon on %s…\n", t.c.Socket)
			}
			// A daemon that just started may not serve the workspace yet: refused, then served.
			if isRefusal && ce.Message != refusal {
				refusal = ce.Message
				fmt.Fprintf(t.e.stderr, "cairn: the daemon refuses: %s; retrying\n", printable.String(ce.Message))
			}
			if !pause() {
				return nil
			}
			continue
		}
		answered = true
		proved, dropped := t.follow(s, func() {
			if away {
				if wasBack {
					fmt.Fprintln(t.e.stderr, "cairn: reconnected")
				} else {
					fmt.Fprintln(t.e.stderr, "cairn: connected")
				}
			}
			away, wasBack, refusal, delay = false, true, "", eventsRetryMin
		})
		if ctx.Err() != nil {
			return nil
		}
		if !proved {
			// A daemon on its way down still answers, then ends the stream
			// at once: the same outage, not a new one.
			if !pause() {
				return nil
			}
			continue
		}
		away = true
		if dropped {
			fmt.Fprintln(t.e.stderr, "cairn: the daemon dropped this client for reading events too slowly; events were lost; reconnecting…")
		} else {
			fmt.Fprintln(t.e.stderr, "cairn: daemon went away; reconnecting…")
		}
	}
}

// eventsSettle is how long a stream with no events yet stays open before it
// counts as the daemon back.
const eventsSettle = 500 * time.Millisecond

// follow prints the stream's events until it ends, and closes it. It calls
// back once the stream proves itself (an event, or eventsSettle open), and
// reports whether it did; dropped reports whether the daemon ended the
// stream because this client read too slowly.
func (t *tail) follow(s *client.EventStream, back func()) (proved, dropped bool) {
	lines := make(chan []byte)
	done := make(chan struct{})
	go func() { // ends with the stream, which the deferred Close ends
		defer close(lines)
		for {
			line, err := s.Next()
			if err != nil {
				return
			}
			select {
			case lines <- bytes.Clone(line):
			case <-done:
				return
			}
		}
	}()
	defer func() {
		close(done)
		s.Close()
		for range lines {
		}
	}()
	settle := time.NewTimer(eventsSettle)
	defer settle.Stop()
	prove := func() {
		if !proved {
			proved = true
			back()
		}
	}
	for {
		var line []byte
		select {
		case <-settle.C:
			prove()
			continue
		case l, ok := <-lines:
			if !ok {
				return proved, false
			}
			line = l
		}
		prove()
		if t.json {
			fmt.Fprintf(t.e.stdout, "%s\n", jsonLine(line))
		}
		var ev wireEvent
		if json.Unmarshal(line, &ev) != nil {
			continue
		}
		if !t.json {
			fmt.Fprintln(t.e.stdout, printable.String(eventLine(ev)))
		}
		if ev.Type == api.EvError {
			var d api.ErrorEvent
			if json.Unmarshal(ev.Data, &d) == nil && d.Code == codeEventsDropped {
				return proved, true
			}
		}
	}
}

// jsonLine is an event line as the daemon sent it, with the controls JSON
// may carry raw (DEL, C1, bidirectional) escaped: the same JSON. A line that
// is no JSON (raw controls are not) is escaped as text.
func jsonLine(line []byte) []byte {
	if !json.Valid(line) {
		return []byte(printable.String(string(line)))
	}
	return printable.JSON(line)
}

// unreachable is the error for no daemon at the start without --wait.
func (t *tail) unreachable(err error) error {
	why := err.Error()
	switch {
	case errors.Is(err, fs.ErrNotExist):
		why = "no socket there"
	case errors.Is(err, syscall.ECONNREFUSED):
		why = "connection refused"
	}
	return fmt.Errorf("no daemon answers on %s (%s); start one with: cairn daemon --watch DIR, or pass --wait to wait for one", t.c.Socket, why)
}

// wireEvent is api.Event with its data kept as sent, to be decoded by type.
type wireEvent struct {
	Type      string          `json:"type"`
	Workspace string          `json:"workspace"`
	Time      time.Time       `json:"time"`
	Data      json.RawMessage `json:"data"`
}

// eventLine is an event for people: the time, the workspace, what happened.
func eventLine(ev wireEvent) string {
	return ev.Time.Local().Format("15:04:05") + "  " + orDash(ev.Workspace) + "  " + eventWhat(ev)
}

// eventWhat says what happened, by the event's type (docs/cairn-formats.md, "Events").
func eventWhat(ev wireEvent) string {
	switch ev.Type {
	case api.EvCheckpointSealed:
		var r ckpt.Record
		if json.Unmarshal(ev.Data, &r) == nil {
			return sealedWhat(r)
		}
	case api.EvRollbackStarted:
		var d api.RollbackStarted
		if json.Unmarshal(ev.Data, &d) == nil {
			if d.ToCodon == "" && d.CodonsToProcess == 0 { // a plain restore, no codon to roll back
				return "restore started: to " + orDash(short(d.ToCheckpoint)) + suffix(d.CheckpointType)
			}
			return fmt.Sprintf("rollback started: to %s %s%s, %s to process",
				orDash(short(d.ToCheckpoint)), orDash(d.CheckpointType), codonOf(d.ToCodon), plural(d.CodonsToProcess, "codon", ""))
		}
	case api.EvRollbackProgress:
		var d api.RollbackProgress
		if json.Unmarshal(ev.Data, &d) == nil {
			return fmt.Sprintf("rollback %d/%d %s", d.CurrentStep, d.TotalSteps, d.Message)
		}
	case api.EvRollbackArchiveRestore:
		var d api.ArchiveRestore
		if json.Unmarshal(ev.Data, &d) == nil {
			line := fmt.Sprintf("rollback restored %s from rigArchive %s", plural(len(d.RestoredPaths), "path", ""), d.Status)
			if n := len(d.ProtectedPaths); n > 0 {
				line += fmt.Sprintf(", %d protected", n)
			}
			if n := len(d.FailedPaths); n > 0 {
				line += fmt.Sprintf(", %d failed", n)
			}
			return line
		}
	case api.EvRollbackCompleted:
		var d api.RollbackCompleted
		if json.Unmarshal(ev.Data, &d) == nil {
			line := fmt.Sprintf("rollback completed: at %s %s%s", orDash(short(d.Checkpoint)), orDash(d.CheckpointType), codonOf(d.CodonID))
			if d.CodonID == "" && d.ToRun == "" {
				line = "restore completed: at " + orDash(short(d.Checkpoint)) + suffix(d.CheckpointType)
			}
			if d.ToRun != "" {
				line += ", continues as run " + d.ToRun
			}
			if d.AutoRestart {
				line += ", restarting"
			}
			return line
		}
	case api.EvError:
		var d api.ErrorEvent
		if json.Unmarshal(ev.Data, &d) == nil {
			if d.Code == codeEventsDropped {
				return "events dropped: " + d.Message
			}
			return "error " + d.Code + ": " + d.Message
		}
	}
	// A type this cairn does not know (a newer daemon's), or data it cannot read.
	return strings.TrimSpace(ev.Type + " " + string(ev.Data))
}

// sealedWhat is a checkpoint.sealed line: id, kind, label or codon, state, duration.
func sealedWhat(r ckpt.Record) string {
	var b strings.Builder
	fmt.Fprintf(&b, "sealed %s %s", orDash(r.ID), r.Kind)
	switch {
	case r.Label != "":
		fmt.Fprintf(&b, " %q", r.Label)
	case r.CodonID != "":
		fmt.Fprintf(&b, " %s/%s", r.CodonID, r.RunID)
	}
	fmt.Fprintf(&b, " %s (%d ms)", r.State, r.DurationMS)
	switch {
	case r.Error != "":
		b.WriteString(": " + r.Error)
	case len(r.Issues) > 0:
		fmt.Fprintf(&b, ": %s on disk", plural(len(r.Issues), "path not held as it is", "paths not held as they are"))
	}
	if n := len(r.Skipped); n > 0 {
		fmt.Fprintf(&b, "; %s left out (size limit)", plural(n, "file", ""))
	}
	return b.String()
}

// codonOf is " (codon ID)", or nothing without one.
func codonOf(id string) string {
	if id == "" {
		return ""
	}
	return " (codon " + id + ")"
}
