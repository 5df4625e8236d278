// Package hankweave reads what a Hankweave runtime writes into an execution
// directory (state.json, the journal, runtime.lock) and derives from it the
// codon lifecycle checkpoints cairn must hold (docs/runtime-formats.md).
//
// Reading is tolerant: a torn or invalid state.json falls back to
// state.json.bak, fields of an unexpected type are left zero instead of failing
// the whole file, and nothing panics on any input. Writing is exact: every
// field cairn does not know survives a rewrite byte for byte, in its order.
//
// Every runtime file is opened as a root daemon must open a file its owner
// controls (platform.OpenRegular, platform.ReadFileCapped): no symbolic link is
// followed, a FIFO or device is refused without blocking, and a file read
// whole is size-capped. Writes go through a fresh file and a rename.
//
// The package uses the standard library and cairn's platform package only.
package hankweave

import "path/filepath"

// File names inside an execution directory.
const (
	HankweaveDir    = ".hankweave"
	AgentRootDir    = "agentRoot"
	StateFile       = "state.json"
	StateBackupFile = "state.json.bak"
	StateTempFile   = "state.json.tmp"
	LockFile        = "runtime.lock"
	JournalFile     = "events.jsonl"
	JournalZstFile  = "events.jsonl.zst"
	JournalMetaFile = "journal.meta.json"
	EventsDir       = "events"
)

// StatePath is <exec>/.hankweave/state.json.
func StatePath(execDir string) string { return filepath.Join(execDir, HankweaveDir, StateFile) }

// LockPath is <exec>/.hankweave/runtime.lock.
func LockPath(execDir string) string { return filepath.Join(execDir, HankweaveDir, LockFile) }

// JournalPath is <exec>/.hankweave/events/events.jsonl.
func JournalPath(execDir string) string {
	return filepath.Join(execDir, HankweaveDir, EventsDir, JournalFile)
}
