package snapshot

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Exposure names what of the store other users can reach, with the fix,
// or is "" when the store is its owner's alone (README, "Where checkpoints
// live"). The store's folder and its ledger are looked at as they lie: a
// class of users (group, others) reaches one when every folder above it
// lets that class through (x) and its own mode gives that class anything.
// cairn never changes an existing store's modes itself: the runtime may
// share it on purpose.
func (s *Store) Exposure() string {
	var open []string
	verb := "read"
	for _, p := range []string{s.gitDir, s.ledger} {
		fi, err := os.Lstat(p)
		if err != nil {
			continue
		}
		if bits := fi.Mode().Perm() & reachable(filepath.Dir(p)); bits != 0 {
			if bits&0o022 != 0 {
				verb = "read or change"
			}
			open = append(open, fmt.Sprintf("%s (mode %04o)", p, fi.Mode().Perm()))
		}
	}
	if len(open) == 0 {
		return ""
	}
	fix := s.gitDir
	if len(open) > 1 || !strings.HasPrefix(open[0], s.gitDir+" ") {
		fix += " " + s.ledger
	}
	return fmt.Sprintf("other users can %s this workspace's checkpoints: %s; run chmod -R go-rwx %s",
		verb, strings.Join(open, ", "), fix)
}

// reachable is the permission bits (group 070, others 007) of the classes
// of users that may pass through dir and every folder above it.
func reachable(dir string) os.FileMode {
	bits := os.FileMode(0o077)
	for {
		fi, err := os.Stat(dir)
		if err != nil {
			return 0 // not there or not ours to look at: nothing to name
		}
		m := fi.Mode().Perm()
		if m&0o010 == 0 {
			bits &^= 0o070
		}
		if m&0o001 == 0 {
			bits &^= 0o007
		}
		parent := filepath.Dir(dir)
		if bits == 0 || parent == dir {
			return bits
		}
		dir = parent
	}
}
