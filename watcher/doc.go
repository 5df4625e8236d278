// Package watcher turns fsnotify's per-folder watches into a recursive watch
// of one work tree, and debounces the changes it reports into flushes.
//
// A [Watcher] reports paths, not contents: whoever consumes [Change] values
// re-reads the disk. When it cannot vouch for having seen everything (lost
// kernel events, a folder it could not watch, a consumer too slow to keep up)
// it says so on [Watcher.Overflow], and the consumer does a full rescan.
//
// The package knows nothing of git, of the store or of workspaces.
package watcher
