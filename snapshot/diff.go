package snapshot

import (
	"context"
	"fmt"
	"strings"
)

// maxPatch caps the patch a Diff returns.
const maxPatch = 8 << 20

// Diff compares two checkpoints: a and b are commits of the store (full SHAs
// or anything git resolves to a commit). An empty a is the empty tree; an
// empty b is the work tree as it is now (every visible file, through a copy
// of the index: nothing is sealed, no ref moves). It returns git's diffstat
// and, when patch is set, the patch (cut at 8 MiB).
func (s *Store) Diff(ctx context.Context, a, b string, patch bool) (stat, body string, err error) {
	err = s.withLock(ctx, func() error {
		ta, tb := emptyTreeOf(s), ""
		if a != "" {
			t, ok := s.resolve(ctx, a+"^{tree}")
			if !ok {
				return fmt.Errorf("unknown checkpoint: %s", a)
			}
			ta = t
		}
		if b != "" {
			t, ok := s.resolve(ctx, b+"^{tree}")
			if !ok {
				return fmt.Errorf("unknown checkpoint: %s", b)
			}
			tb = t
		} else {
			t, err := s.dryTree(ctx, ta)
			if err != nil {
				return err
			}
			tb = t
		}
		out, err := s.git.Run(ctx, nil, "diff-tree", "-r", "--stat=200", "--no-renames", "--no-color", ta, tb)
		if err != nil {
			return err
		}
		stat = string(out)
		if patch {
			var w strings.Builder
			lw := &limitedWriter{w: &w, n: maxPatch}
			if err := s.git.RunTo(ctx, lw, nil, "diff-tree", "-r", "-p", "--no-renames", "--no-color", "--no-ext-diff", ta, tb); err != nil {
				return err
			}
			body = w.String()
		}
		return nil
	})
	return stat, body, err
}

// emptyTreeOf is the empty tree in the store's object format.
func emptyTreeOf(s *Store) string {
	if out, err := s.git.Run(context.Background(), strings.NewReader(""), "hash-object", "-t", "tree", "--stdin"); err == nil {
		return strings.TrimSpace(string(out))
	}
	return "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
}
