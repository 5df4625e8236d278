package snapshot

import (
	"context"
	"errors"
	"fmt"
)

// ErrNotEmpty is what FetchRefs returns for a store that already has
// checkpoints: the fetched ledger ids would collide with its own.
var ErrNotEmpty = errors.New("the store already has checkpoints")

// FetchOptions say what FetchRefs fetches, from where and as whom.
type FetchOptions struct {
	Remote   string   // a URL git accepts, or an absolute path
	Refspecs []string // passed to git fetch as they are
	// Home is HOME for this one call (the user's, so that their ssh keys,
	// credential helpers and url rewrites apply); empty keeps the store's.
	Home string
	// Env adds variables to the call (an ssh agent's socket, proxies).
	Env []string
	// Config are -c options given before the command (a credential helper),
	// Secret what that helper reads (Git.Secret).
	Config []string
	Secret []byte
	// Position, when it names a checkpoint the ledger then holds, becomes the
	// store's position (`← HEAD`).
	Position string
}

// FetchRefs fills a store that has no checkpoints yet from a remote (docs/
// cairn-formats.md, "Fleet replication"): it fetches the refspecs under the
// store's lock, then rebuilds the ledger from the fetched commits' trailers.
// It returns how many checkpoints the ledger then holds.
func (s *Store) FetchRefs(ctx context.Context, o FetchOptions) (int, error) {
	if len(o.Refspecs) == 0 {
		return 0, errors.New("fetch: no refspecs")
	}
	n := 0
	err := s.withLock(ctx, func() error {
		if err := s.loadLedger(ctx); err != nil {
			return err
		}
		if len(s.records) > 0 {
			return fmt.Errorf("%w (%d records in %s)", ErrNotEmpty, len(s.records), s.ledger)
		}
		g := *s.git
		g.WorkTree, g.Index = "", ""
		if o.Home != "" {
			g.Home = o.Home
		}
		g.Extra = append(append([]string(nil), g.Extra...), o.Env...)
		g.Secret = o.Secret
		args := append(append(append([]string(nil), o.Config...), "fetch", "--quiet", "--no-tags", "--no-recurse-submodules",
			// main, where HEAD points, is replaced: nothing of the store's checks it out.
			"--update-head-ok", "--end-of-options", o.Remote), o.Refspecs...)
		if _, err := g.Run(ctx, nil, args...); err != nil {
			return err
		}
		if err := s.loadLedger(ctx); err != nil {
			return err
		}
		for _, r := range s.records {
			if r.SHA != "" {
				n++
			}
			if o.Position != "" && r.SHA == o.Position {
				s.setPosition(o.Position)
			}
		}
		return nil
	})
	return n, err
}
