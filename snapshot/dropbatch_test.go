package snapshot

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/restore/ckpt"
	"github.com/cairn-dev/cairn/snapshot/retain"
)

// TestDeleteRefsBatched deletes 2,000 refs in one transaction, then, with one
// stale old value among them, falls back to one by one: only that one stays.
func TestDeleteRefsBatched(t *testing.T) {
	ctx := context.Background()
	dir, st := newTestStore(t, Options{})
	writeFile(t, dir, "f.txt", "x", 0o644)
	rec := mustSeal(t, st, SealRequest{Kind: ckpt.KindBaseline})
	mk := func(n int, prefix string) []refDelete {
		var in bytes.Buffer
		var dels []refDelete
		for i := range n {
			ref := fmt.Sprintf("refs/cairn/autosave/%s%d", prefix, i)
			fmt.Fprintf(&in, "create %s %s\n", ref, rec.SHA)
			dels = append(dels, refDelete{drop: retain.Drop{Ref: ref}, old: rec.SHA})
		}
		gitOut(t, st, &in, "update-ref", "--stdin")
		return dels
	}
	dels := mk(2000, "a")
	t0 := time.Now()
	for _, d := range st.deleteRefs(ctx, dels) {
		if d.err != nil {
			t.Fatalf("%s: %v", d.drop.Ref, d.err)
		}
	}
	t.Logf("2,000 refs deleted in %s", time.Since(t0))
	if out := gitOut(t, st, nil, "for-each-ref", "refs/cairn/autosave/"); len(out) != 0 {
		t.Fatalf("refs left: %.200s", out)
	}
	dels = mk(5, "b")
	dels[2].old = strings.Repeat("0", 39) + "1" // stale: the transaction fails
	var failed []string
	for _, d := range st.deleteRefs(ctx, dels) {
		if d.err != nil {
			failed = append(failed, d.drop.Ref)
		}
	}
	left := strings.TrimSpace(string(gitOut(t, st, nil, "for-each-ref", "--format=%(refname)", "refs/cairn/autosave/")))
	if len(failed) != 1 || failed[0] != dels[2].drop.Ref || left != dels[2].drop.Ref {
		t.Fatalf("failed %v, left %q", failed, left)
	}
}
