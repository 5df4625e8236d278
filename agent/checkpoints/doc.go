// Package checkpoints is the work cairn does on one workspace's store,
// shared by the daemon (which runs it on the workspace's goroutine) and by
// the cairn command when no daemon runs (which runs it on the store
// directly, under its lock): restores and undo (restore.go, over the
// restore package's pipeline), show, verify, pins and retention.
package checkpoints
