package snapshot

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/snapshot/gitobj"
)

// randomPaths makes n distinct paths in nested folders, names chosen so
// that byte order and folder order disagree ("a.b" sorts before "a/x",
// "a-" before "a/", "a0" after), in the order a breadth-first walk with
// unsorted folder listings gives them.
func randomPaths(rng *rand.Rand, n int) []string {
	names := []string{"a", "a.b", "a-", "a0", "b", "B", "z", "_", "a.b.c", "ab", "x y", "é"}
	seen := map[string]bool{}
	var out []string
	for len(out) < n {
		depth := rng.IntN(4)
		var parts []string
		for range depth {
			parts = append(parts, names[rng.IntN(len(names))])
		}
		parts = append(parts, fmt.Sprintf("%s%d", names[rng.IntN(len(names))], rng.IntN(40)))
		p := strings.Join(parts, "/")
		// A path can be a file or a folder, not both.
		clash := false
		for d := p; ; {
			j := strings.LastIndexByte(d, '/')
			if j < 0 {
				break
			}
			d = d[:j]
			if seen[d] {
				clash = true
			}
		}
		for q := range seen {
			if strings.HasPrefix(q, p+"/") {
				clash = true
				break
			}
		}
		if clash || seen[p] {
			continue
		}
		seen[p] = true
		out = append(out, p)
	}
	// Breadth first, each folder's files in no order.
	slices.SortFunc(out, func(a, b string) int { return strings.Count(a, "/") - strings.Count(b, "/") })
	rng.Shuffle(len(out)/3, func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// TestBaseEdits: baseEdits, given the new checkpoint's entries in any
// order (the walk's), finds what a lookup of every path both ways finds
// (baseEditsOracle, the first version), with pending entries (added,
// removed, changed, for paths in the index or not).
func TestBaseEdits(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 2))
		paths := randomPaths(rng, 1+rng.IntN(300))
		slices.Sort(paths)
		ids := []string{"1111", "2222", "3333"}
		var indexed, entries []idxEntry
		pending := map[string]pendEntry{}
		for _, p := range paths {
			if rng.IntN(5) > 0 {
				indexed = append(indexed, idxEntry{path: p, mode: 0o100644, id: ids[rng.IntN(3)]})
			}
			if rng.IntN(5) > 0 {
				mode := uint32(0o100644)
				if rng.IntN(10) == 0 {
					mode = 0o100755
				}
				entries = append(entries, idxEntry{path: p, mode: mode, id: ids[rng.IntN(3)]})
			}
			switch rng.IntN(8) {
			case 0:
				pending[p] = pendEntry{} // removed
			case 1:
				pending[p] = pendEntry{Mode: 0o100644, ID: ids[rng.IntN(3)]}
			}
		}
		k := loadKnown(indexed, pending)
		want := baseEditsOracle(entries, k)
		rng.Shuffle(len(entries), func(i, j int) { entries[i], entries[j] = entries[j], entries[i] })
		if got := baseEdits(entries, k); !maps.Equal(got, want) {
			t.Fatalf("seed %d: baseEdits %v, want %v", seed, got, want)
		}
	}
}

// baseEditsOracle is baseEdits as first written: every path looked up
// both ways.
func baseEditsOracle(entries []idxEntry, k *knownEntries) map[string]edit {
	edits := map[string]edit{}
	final := make(map[string]bool, len(entries))
	for _, x := range entries {
		final[x.path] = true
		if mode, id, ok := k.old(x.path); !ok || mode != x.mode || id != x.id {
			edits[x.path] = edit{mode: x.mode, id: x.id}
		}
	}
	for p := range k.byPath {
		if !final[p] && k.tracked(p) {
			edits[p] = edit{del: true}
		}
	}
	for p, pe := range k.pending {
		if pe.Mode != 0 && !final[p] {
			edits[p] = edit{del: true}
		}
	}
	return edits
}

// benchEntries is a 100k-file tree's entries, as the walk lists them and as the index holds them.
func benchEntries() (walked, indexed []idxEntry) {
	rng := rand.New(rand.NewPCG(1, 1))
	for a := range 20 {
		for b := range 250 {
			for f := range 20 {
				p := fmt.Sprintf("src/pkg%02d/mod%03d/file_%03d.go", a, b, f)
				indexed = append(indexed, idxEntry{path: p, mode: 0o100644, id: fmt.Sprintf("%040x", rng.Uint64())})
			}
		}
	}
	walked = slices.Clone(indexed)
	for i := 0; i < len(walked); i += 20 {
		s := walked[i : i+20]
		rng.Shuffle(len(s), func(x, y int) { s[x], s[y] = s[y], s[x] })
	}
	return walked, indexed
}

func BenchmarkBaseEdits(b *testing.B) {
	walked, indexed := benchEntries()
	k := loadKnown(indexed, map[string]pendEntry{})
	b.Run("now", func(b *testing.B) {
		for range b.N {
			baseEdits(walked, k)
		}
	})
	b.Run("first", func(b *testing.B) {
		for range b.N {
			baseEditsOracle(walked, k)
		}
	})
}

// BenchmarkIndexLoad: what a full reconcile spends on cairn's index before
// its walk, at 100k files: reading it, and loading it for lookups.
func BenchmarkIndexLoad(b *testing.B) {
	_, indexed := benchEntries()
	p := filepath.Join(b.TempDir(), "index")
	f, _ := gitobj.FormatByName("sha1")
	if err := writeGitIndex(p, f, indexed); err != nil {
		b.Fatal(err)
	}
	b.Run("read", func(b *testing.B) {
		for range b.N {
			if _, err := readGitIndex(p, f); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("load", func(b *testing.B) {
		for range b.N {
			loadKnown(indexed, nil)
		}
	})
}
