// Package restore holds the pure logic of a restore (README.md, "Restore and
// rollback"): which checkpoint a target names, the plan a restore carries out
// and how it is printed, and which checkpoint the listing marks with
// "← HEAD". It reads and writes nothing; the daemon feeds it the ledger and
// git's answers.
//
// It imports nothing of cairn but restore/ckpt, the types it shares with
// the store (a checkpoint is a ckpt.Record: a ledger record, or a commit
// outside the ledger, without an ID).
package restore

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// The runtime's refusals, byte for byte (docs/runtime-formats.md, "Rollback:
// resolution, messages, events").
const (
	MsgCodonRunning       = "Cannot rollback while codon is running. Use 'codon.forceStop' first."
	MsgRollbackInProgress = "Rollback already in progress"

	// MsgRollbackBlocked is the message every other state-changing request
	// gets while a rollback runs, with code CodeRollbackInProgress and
	// context BlockedContext(<command type>).
	MsgRollbackBlocked     = "Cannot execute state-modifying commands while rollback is in progress"
	CodeRollbackInProgress = "ROLLBACK_IN_PROGRESS"
)

// Refusals of a restore, for errors.Is: the API answers each with 409.
var (
	// ErrCodonRunning: the runtime is running a codon (MsgCodonRunning).
	//lint:ignore ST1005 the runtime's exact wording (docs/runtime-formats.md)
	ErrCodonRunning = errors.New(MsgCodonRunning)
	// ErrRollbackInProgress: another restore or rollback of the workspace
	// is under way (MsgRollbackInProgress).
	//lint:ignore ST1005 the runtime's exact wording (docs/runtime-formats.md)
	ErrRollbackInProgress = errors.New(MsgRollbackInProgress)
	// ErrNothingToUndo: the ledger holds no pre-restore checkpoint.
	ErrNothingToUndo = errors.New("nothing to undo: no pre-restore checkpoint in the ledger")
)

// BlockedContext is the context line of a ROLLBACK_IN_PROGRESS refusal:
// "Attempted command: <type>".
func BlockedContext(commandType string) string { return "Attempted command: " + commandType }

// Blocked is the runtime's error payload for a state-changing request refused
// while a rollback runs.
type Blocked struct {
	Message  string `json:"message"`
	Context  string `json:"context"`
	Fatal    bool   `json:"fatal"`
	Severity string `json:"severity"`
	Code     string `json:"code"`
}

// RollbackBlocked builds the ROLLBACK_IN_PROGRESS payload for a request of
// the given command type (e.g. "rollback.toCodon", "checkpoint").
func RollbackBlocked(commandType string) Blocked {
	return Blocked{Message: MsgRollbackBlocked, Context: BlockedContext(commandType),
		Fatal: false, Severity: "operation", Code: CodeRollbackInProgress}
}

// NotFoundError: no checkpoint matches a ledger id, SHA prefix, time or
// "last-success". Error() is always `unknown checkpoint: <input>`;
// Detail carries the longer sentence, for a SHA miss the runtime's
// `Checkpoint <prefix> not found in any run (current or historical)`.
type NotFoundError struct {
	Input  string // what was asked for, as given
	Detail string
}

func (e *NotFoundError) Error() string { return "unknown checkpoint: " + e.Input }

// CodonNotFoundError: no ledger record belongs to the codon.
type CodonNotFoundError struct{ CodonID string }

func (e *CodonNotFoundError) Error() string {
	return "Codon " + e.CodonID + " not found in execution history"
}

// TypeNotFoundError: the codon's newest attempt has no checkpoint of the
// type asked for (a stored type, or the start/end alias).
type TypeNotFoundError struct{ CodonID, Type string }

func (e *TypeNotFoundError) Error() string {
	return "No " + e.Type + " checkpoint found for codon " + e.CodonID
}

// AmbiguousError: a SHA prefix matches several commits. Matches are newest
// first. Error() is the runtime's message, one line per match.
type AmbiguousError struct {
	Prefix  string
	Matches []ckpt.Record
}

func (e *AmbiguousError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Ambiguous checkpoint SHA '%s'. Multiple checkpoints match:\n", e.Prefix)
	for _, m := range e.Matches {
		fmt.Fprintf(&b, "  - %s (%s - %s) in run %s\n", m.SHA, matchName(m), kindName(m), orDash(m.RunID))
	}
	b.WriteString("Please provide more characters to uniquely identify the checkpoint.")
	return b.String()
}

// matchName is what stands for <codonName> in an ambiguity line: the codon's
// name, else its id, else the checkpoint's label, else its ledger id.
func matchName(c ckpt.Record) string {
	for _, s := range []string{c.CodonName, c.CodonID, c.Label, c.ID} {
		if s != "" {
			return s
		}
	}
	return "—"
}

// kindName is what stands for <type> in an ambiguity line: the kind, or
// "commit" for a commit of the store that is no checkpoint of a known kind.
func kindName(c ckpt.Record) string {
	if c.Kind == "" {
		return "commit"
	}
	return string(c.Kind)
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// InvalidTargetError: the target cannot be understood (a SHA prefix under
// four hex digits, an unknown checkpoint type, a malformed time, …).
type InvalidTargetError struct {
	Input  string
	Reason string
}

func (e *InvalidTargetError) Error() string {
	if e.Input == "" {
		return "invalid checkpoint target: " + e.Reason
	}
	return fmt.Sprintf("invalid checkpoint target %q: %s", e.Input, e.Reason)
}

// UnusableError: the target names a ledger record that cannot be restored,
// because its seal failed or git no longer has its commit.
type UnusableError struct {
	Checkpoint ckpt.Record
	Reason     string
}

func (e *UnusableError) Error() string {
	return "checkpoint " + e.Checkpoint.Name() + " cannot be restored: " + e.Reason
}

// IsNotFound reports whether err says the target names nothing (the API's
// not-found code): NotFoundError, CodonNotFoundError or TypeNotFoundError.
func IsNotFound(err error) bool {
	var a *NotFoundError
	var b *CodonNotFoundError
	var c *TypeNotFoundError
	return errors.As(err, &a) || errors.As(err, &b) || errors.As(err, &c)
}
