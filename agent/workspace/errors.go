package workspace

import (
	"errors"
	"strings"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/autodev"
	"github.com/cairn-dev/cairn/restore"
	"github.com/cairn-dev/cairn/restore/ckpt"
	"github.com/cairn-dev/cairn/snapshot"
)

// A workspace's errors, and the one mapping of them to what a client is
// answered: a Class (the HTTP layer turns it into a status) and an error
// code (docs/cairn-formats.md, "Socket API in brief": errors).

// ErrNotServing means the workspace is not watching yet (or failed).
var ErrNotServing = errors.New("workspace is not being watched right now; see cairn status")

// errWorkspaceGone refuses seals of a workspace whose folder was removed:
// git would fail on its missing work tree with a misleading error.
var errWorkspaceGone = errors.New("the workspace folder is gone")

// errFolderBack ends serve when a removed workspace folder reappears: its
// watch died with it, so the workspace starts over.
var errFolderBack = errors.New("the workspace folder is back")

// ErrAutodevLayout refuses what only the shadow store has (diff, show, pin,
// prune, gc, the runtime's rollbacks) for an autodev workspace.
var ErrAutodevLayout = errors.New("this workspace is in the autodev layout: its checkpoints are commits in its own repository; use cairn list, checkpoint, restore, undo (or git itself)")

// busyError refuses a state-changing request while a restore or rollback of
// the workspace runs: a rollback gets the runtime's "Rollback already in
// progress", any other request its ROLLBACK_IN_PROGRESS payload.
type busyError struct{ cmdType string }

func (e *busyError) rollback() bool { return strings.HasPrefix(e.cmdType, "rollback.") }

func (e *busyError) Error() string {
	if e.rollback() {
		return restore.MsgRollbackInProgress
	}
	b := restore.RollbackBlocked(e.cmdType)
	return b.Message + " (" + b.Context + ")"
}

func (e *busyError) Unwrap() error { return restore.ErrRollbackInProgress }

// notReadyError is a failure because the workspace stopped serving (its
// context ended); its message is the cause's.
type notReadyError struct{ err error }

func (e notReadyError) Error() string { return e.err.Error() }
func (e notReadyError) Unwrap() error { return e.err }

// Unserved marks err as the workspace having stopped serving under a
// request (its context ended): answered NOT_READY, not as a failure.
func Unserved(err error) error { return notReadyError{err} }

// Error codes of failures; refusals have their own (Classify).
const (
	CodeRestoreFailed = "RESTORE_FAILED"
	CodeSealFailed    = "SEAL_FAILED"
	CodePinFailed     = "PIN_FAILED"
	CodePruneFailed   = "PRUNE_FAILED"
	CodeVerifyFailed  = "VERIFY_FAILED"
	CodeGCFailed      = "GC_FAILED"
)

// Class is what kind of answer an error gets.
type Class int

const (
	Failed   Class = iota // the daemon failed: not the asker's to fix
	Invalid               // the request cannot be carried out as asked
	NotFound              // no such checkpoint
	Conflict              // the workspace's state refuses it now (a restore runs, a codon runs, ...)
	Gone                  // the workspace folder is gone
	NotReady              // the workspace is not serving (yet, or any more)
)

// Refusal reports whether c is the asker's to fix (or wait out), not a failure.
func (c Class) Refusal() bool { return c != Failed }

// Classify is the one mapping of a workspace's errors to a class and an
// error code; an error it does not know is Failed with fallback.
func Classify(err error, fallback string) (Class, string) {
	var busy *busyError
	var notReady notReadyError
	var inv *restore.InvalidTargetError
	var amb *restore.AmbiguousError
	var unusable *restore.UnusableError
	var damaged *ckpt.TargetDamagedError
	var are *autodev.RestoreError
	var blocked *autodev.BlockedError
	switch {
	case errors.As(err, &are) && are.Unknown:
		return NotFound, "UNKNOWN_CHECKPOINT"
	case errors.As(err, &are) && are.Live:
		return Conflict, "RUN_LIVE"
	case errors.Is(err, autodev.ErrNotRepo):
		return Conflict, "CHECKPOINTS_OFF"
	case errors.As(err, &blocked):
		return Conflict, "REPOSITORY_BUSY"
	case errors.As(err, new(*autodev.UntrustedError)):
		return Conflict, "REPOSITORY_UNTRUSTED"
	case errors.Is(err, autodev.ErrNoDryRun), errors.Is(err, autodev.ErrNoPaths):
		return Invalid, "BAD_REQUEST"
	case errors.Is(err, ErrAutodevLayout):
		return Conflict, "AUTODEV_LAYOUT"
	case errors.As(err, &busy):
		return Conflict, restore.CodeRollbackInProgress
	case errors.Is(err, errWorkspaceGone):
		return Gone, "WORKSPACE_GONE"
	case errors.Is(err, ErrNotServing), errors.As(err, &notReady):
		return NotReady, "NOT_READY"
	case errors.Is(err, restore.ErrCodonRunning):
		return Conflict, "CODON_RUNNING"
	case restore.IsNotFound(err):
		return NotFound, "UNKNOWN_CHECKPOINT"
	case errors.As(err, &inv):
		return Invalid, "INVALID_TARGET"
	case errors.As(err, &amb):
		return Conflict, "AMBIGUOUS_CHECKPOINT"
	case errors.As(err, &unusable):
		return Conflict, "UNUSABLE_CHECKPOINT"
	case errors.Is(err, restore.ErrNothingToUndo):
		return Conflict, "NOTHING_TO_UNDO"
	case errors.As(err, &damaged):
		return Conflict, api.CodeTargetDamaged
	case errors.Is(err, snapshot.ErrCannotHoldInTheWay):
		return Conflict, "IN_THE_WAY"
	}
	return Failed, fallback
}

// Blocked says, for an error refusing a request because a restore or
// rollback runs, which command was refused; a rollback refused so is not
// blocked (it gets the runtime's own message).
func Blocked(err error) (cmdType string, ok bool) {
	var busy *busyError
	if errors.As(err, &busy) && !busy.rollback() {
		return busy.cmdType, true
	}
	return "", false
}
