//go:build cairnfault

package snapshot

// Test hooks: only a build with -tags cairnfault has them (hooks_off.go is
// the shipped one, where the calls compile to nothing). Tests set them from
// files built with the same tag.

// hookBeforeUpdateRef lets a test act as another writer just before the ref moves.
var hookBeforeUpdateRef func()

// hookBeforeHash, when set, runs in an in-process seal after the paths are
// planned and before the first file is read.
var hookBeforeHash func()

func beforeUpdateRef() {
	if hookBeforeUpdateRef != nil {
		hookBeforeUpdateRef()
	}
}

func beforeHashHook() func() { return hookBeforeHash }

// hookRestoreApplied, when set, runs once a restore has written the work
// tree, before cairn's index follows; an error fails the restore there.
var hookRestoreApplied func() error

func restoreApplied() error {
	if hookRestoreApplied != nil {
		return hookRestoreApplied()
	}
	return nil
}
