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
		if got := baseEdits(entries, positions(entries, k), k); !maps.Equal(got, want) {
			t.Fatalf("seed %d: baseEdits %v, want %v", seed, got, want)
		}
		if got := baseEdits(entries, nil, k); !maps.Equal(got, want) {
			t.Fatalf("seed %d: baseEdits looking paths up %v, want %v", seed, got, want)
		}
	}
}

// positions is what the walk hands baseEdits: 1 + each entry's position
// in the index, 0 for none.
func positions(entries []idxEntry, k *knownEntries) []int32 {
	from := make([]int32, len(entries))
	for i, x := range entries {
		if j, ok := slices.BinarySearchFunc(k.sorted, x.path, func(e idxEntry, p string) int { return strings.Compare(e.path, p) }); ok {
			from[i] = int32(j) + 1
		}
	}
	return from
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
	for _, x := range k.sorted {
		if p := x.path; !final[p] && k.tracked(p) {
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
	from := positions(walked, k)
	b.Run("now", func(b *testing.B) {
		for range b.N {
			baseEdits(walked, from, k)
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

// TestKnownEntriesFolder: the walk's per-folder view of cairn's index
// (knownEntries.folder), followed from the top through each subfolder's
// run as the walk follows it, finds in every folder exactly the files and
// subfolders a look at every path finds, with names whose byte order and
// folder order disagree, and finds nothing for names the folder lacks.
func TestKnownEntriesFolder(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 3))
		paths := randomPaths(rng, 1+rng.IntN(300))
		slices.Sort(paths)
		var idx []idxEntry
		for _, p := range paths {
			idx = append(idx, idxEntry{path: p})
		}
		// The oracle: every folder's files and subfolders, and how many
		// paths lie under each folder.
		files, dirs, under := map[string][]string{}, map[string][]string{}, map[string]int{".": len(paths)}
		for _, p := range paths {
			dir := "."
			for {
				name, _, deeper := strings.Cut(strings.TrimPrefix(p, strings.TrimPrefix(dir+"/", "./")), "/")
				if !deeper {
					files[dir] = append(files[dir], name)
					break
				}
				sub := strings.TrimPrefix(dir+"/"+name, "./")
				if under[sub] == 0 {
					dirs[dir] = append(dirs[dir], name)
				}
				under[sub]++
				dir = sub
			}
		}
		k := loadKnown(idx, nil)
		type folder struct {
			rel string
			sp  span
		}
		queue := []folder{{".", span{0, int32(len(idx))}}}
		seen := 0
		for len(queue) > 0 {
			d := queue[0]
			queue = queue[1:]
			seen++
			f := k.folder(d.rel, d.sp)
			if int(d.sp.hi-d.sp.lo) != under[d.rel] {
				t.Fatalf("seed %d: %s: a run of %d entries, want %d", seed, d.rel, d.sp.hi-d.sp.lo, under[d.rel])
			}
			var gotFiles, gotDirs []string
			for _, i := range f.files {
				gotFiles = append(gotFiles, idx[i].path[f.prefix:])
			}
			for _, r := range f.dirs {
				gotDirs = append(gotDirs, r.name)
			}
			if !slices.Equal(gotFiles, files[d.rel]) || !slices.Equal(gotDirs, dirs[d.rel]) {
				t.Fatalf("seed %d: %s: files %q dirs %q, want %q %q", seed, d.rel, gotFiles, gotDirs, files[d.rel], dirs[d.rel])
			}
			full := func(name string) string { return strings.TrimPrefix(d.rel+"/"+name, "./") }
			for _, name := range files[d.rel] {
				if x := f.file(name); x == nil || x.path != full(name) {
					t.Fatalf("seed %d: %s: file %q found as %v", seed, d.rel, name, x)
				}
				if _, ok := f.dir(name); ok {
					t.Fatalf("seed %d: %s: file %q found as a folder", seed, d.rel, name)
				}
			}
			for _, name := range dirs[d.rel] {
				r, ok := f.dir(name)
				if !ok || idx[r.lo].path[:f.prefix+len(name)] != full(name) || f.file(name) != nil {
					t.Fatalf("seed %d: %s: folder %q found as %v %v", seed, d.rel, name, r, ok)
				}
				queue = append(queue, folder{full(name), r.span})
			}
			for _, name := range []string{"a", "a.b", "a-", "a0", "zz", "", "a/b"} {
				if !slices.Contains(files[d.rel], name) && f.file(name) != nil {
					t.Fatalf("seed %d: %s: absent file %q found", seed, d.rel, name)
				}
				if _, ok := f.dir(name); ok && !slices.Contains(dirs[d.rel], name) {
					t.Fatalf("seed %d: %s: absent folder %q found", seed, d.rel, name)
				}
			}
		}
		if seen != len(under) {
			t.Fatalf("seed %d: walked %d folders, want %d", seed, seen, len(under))
		}
	}
}
