package snapshot

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
)

// Size budgets on the store's side (docs/operating.md, "Budgets and disk space"): what
// the store would weigh once maintenance collected everything unreachable,
// with or without some refs. Dropped objects leave the disk only at the next
// maintenance (prune, repack), so a budget pass plans by this projection and
// the maintenance that follows it makes it true.

// ProjectedBytes is what the store would weigh after a maintenance that
// collects every unreachable object, were the refs in without deleted: its
// bytes outside objects/ (refs, cairn's index, config) plus the bytes on
// disk of the objects the other refs reach (`git rev-list --objects
// --disk-usage`, git 2.31+: a packed object counts its delta, a loose one its
// compressed size). A repack usually compresses further (loose objects
// become deltas), so the projection errs on the large side.
func (s *Store) ProjectedBytes(ctx context.Context, st StoreStats, without map[string]bool) (int64, error) {
	if !s.git.Version.AtLeast(Version{2, 31, 0}) {
		return 0, fmt.Errorf("size budgets need git 2.31 or newer (rev-list --disk-usage); this is %s", s.git.Version)
	}
	tips, err := s.refTips(ctx)
	if err != nil {
		return 0, err
	}
	var in bytes.Buffer
	seen := map[string]bool{}
	for ref, sha := range tips {
		if without[ref] || seen[sha] {
			continue
		}
		seen[sha] = true
		in.WriteString(sha)
		in.WriteByte('\n')
	}
	overhead := max(st.Bytes-st.LooseBytes-st.PackBytes, 0)
	if len(seen) == 0 {
		return overhead, nil
	}
	out, err := s.git.Run(ctx, &in, "rev-list", "--objects", "--disk-usage", "--stdin")
	if err != nil {
		return 0, fmt.Errorf("rev-list --disk-usage: %w", err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("rev-list --disk-usage: %q: %w", out, err)
	}
	return overhead + n, nil
}
