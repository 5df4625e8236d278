package sealbench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
)

// Shape of a generated tree. The numbers aim at an agent's work tree: many
// small source files about 20 to a folder, a few large binaries, and ignore
// rules that leave real files out.
const (
	filesPerDir  = 20
	minDepth     = 2
	maxDepth     = 5
	minText      = 512
	maxText      = 5 << 10
	binaries     = 3
	minBinary    = 2 << 20
	maxBinary    = 8 << 20
	ignoreFiles  = 2 // the root .gitignore and one nested one
	fixedFiles   = binaries + ignoreFiles
	minTreeFiles = fixedFiles + 30 // room for the first mutation's edits and deletions

	editsPerRun   = 20
	addsPerRun    = 5
	deletesPerRun = 5
)

// tree is a generated work tree and the benchmark's own account of it, so the
// references that need every file are not charged for a walk.
type tree struct {
	root     string
	seed     uint64
	fixed    []string       // binaries and .gitignore files: tracked, never mutated
	text     []string       // tracked source files: what mutations pick from
	pos      map[string]int // index of each path in text, for O(1) deletion
	dirs     []string       // folders holding source files: where additions go
	ignored  int            // files present on disk but ignored by .gitignore
	bytes    int64          // bytes of every file written, ignored ones included
	bytesMu  sync.Mutex
	nextText int // numbering for generated names, so added files never collide
}

// files returns every tracked path, sorted as git would list them.
func (t *tree) files() []string {
	all := make([]string, 0, len(t.fixed)+len(t.text))
	all = append(all, t.fixed...)
	all = append(all, t.text...)
	slices.Sort(all)
	return all
}

// tracked is the number of files a checkpoint holds.
func (t *tree) tracked() int { return len(t.fixed) + len(t.text) }

// rng returns the generator for one stream. Each file and each mutation has
// its own stream, so the tree is the same whatever order the workers run in.
func (t *tree) rng(stream, n uint64) *rand.Rand {
	return rand.New(rand.NewPCG(t.seed, stream<<40|n))
}

const (
	streamLayout uint64 = iota + 1
	streamText
	streamBinary
	streamIgnored
	streamMutate
)

var (
	topDirs = []string{"src", "lib", "pkg", "internal", "docs", "test", "tools", "web", "api", "scripts"}
	subDirs = []string{"core", "util", "model", "view", "store", "net", "auth", "config", "parser", "render",
		"cache", "jobs", "queue", "ui", "db", "http", "cli", "fmt", "io", "sync"}
	stems = []string{"main", "handler", "types", "service", "helpers", "index", "client", "server", "schema",
		"routes", "worker", "reader", "writer", "errors", "options", "state"}
	exts  = []string{"go", "ts", "tsx", "py", "md", "json", "js", "rs", "yaml", "txt"}
	vocab = []string{"func", "return", "if", "else", "for", "range", "var", "const", "type", "struct",
		"err", "nil", "ctx", "string", "int", "bool", "map", "slice", "len", "append", "make", "new",
		"import", "package", "interface", "defer", "go", "select", "case", "default", "switch", "break",
		"value", "key", "name", "path", "file", "data", "result", "count", "index", "item", "list",
		"node", "tree", "config", "options", "state", "event", "handler", "request", "response",
		"{", "}", "(", ")", "=", ":=", "==", "!=", "&&", "||", "+", "-", "//", "\"text\"", "0", "1", "42"}
)

// generate writes a tree of n tracked files under root. Folders are made
// first, then files are written by a pool of workers: at 100k files the
// writes are syscall-bound and overlap well even on two cores.
func generate(ctx context.Context, root string, n int, seed uint64) (*tree, error) {
	if n < minTreeFiles {
		return nil, fmt.Errorf("sealbench: a tree needs at least %d files, asked for %d", minTreeFiles, n)
	}
	t := &tree{root: root, seed: seed, pos: make(map[string]int)}
	nText := n - fixedFiles
	nDirs := max(1, (nText+filesPerDir-1)/filesPerDir)

	lay := t.rng(streamLayout, 0)
	seen := make(map[string]bool, nDirs)
	for len(t.dirs) < nDirs {
		depth := minDepth + lay.IntN(maxDepth-minDepth+1)
		parts := []string{topDirs[lay.IntN(len(topDirs))]}
		for range depth - 1 {
			parts = append(parts, fmt.Sprintf("%s%d", subDirs[lay.IntN(len(subDirs))], lay.IntN(50)))
		}
		d := path.Join(parts...)
		if !seen[d] {
			seen[d] = true
			t.dirs = append(t.dirs, d)
		}
	}

	// jobs collects every file to write; ignored files are written too, since
	// skipping them cheaply is part of what is measured.
	type job struct {
		path string
		kind uint64 // stream
		n    uint64
	}
	var jobs []job
	for i := range nText {
		p := path.Join(t.dirs[i%nDirs], fmt.Sprintf("%s%d.%s", stems[i%len(stems)], i, exts[(i/len(stems))%len(exts)]))
		t.addText(p)
		jobs = append(jobs, job{p, streamText, uint64(i)})
	}
	t.nextText = nText
	for i := range binaries {
		p := fmt.Sprintf("assets/bin/blob%d.bin", i)
		t.fixed = append(t.fixed, p)
		jobs = append(jobs, job{p, streamBinary, uint64(i)})
	}

	// The root .gitignore leaves out node_modules/ and every *.log; a nested
	// one leaves out a build/ folder and *.tmp beside it.
	nested := t.dirs[0]
	gitignores := map[string]string{
		".gitignore":                    "node_modules/\n*.log\n",
		path.Join(nested, ".gitignore"): "build/\n*.tmp\n",
	}
	for p := range gitignores {
		t.fixed = append(t.fixed, p)
	}
	slices.Sort(t.fixed)
	var ignored []string
	for i := range max(10, n/100) {
		ignored = append(ignored, fmt.Sprintf("node_modules/pkg%d/%s", i/4, []string{"index.js", "package.json", "README.md", "lib.js"}[i%4]))
	}
	for i := range max(2, n/500) {
		ignored = append(ignored, path.Join(t.dirs[(i*7)%nDirs], fmt.Sprintf("debug%d.log", i)))
	}
	for i := range 5 {
		ignored = append(ignored, path.Join(nested, "build", fmt.Sprintf("out%d.o", i)))
	}
	ignored = append(ignored, path.Join(nested, "scratch.tmp"))
	for i, p := range ignored {
		jobs = append(jobs, job{p, streamIgnored, uint64(i)})
	}
	t.ignored = len(ignored)

	dirs := map[string]bool{}
	for _, j := range jobs {
		dirs[path.Dir(j.path)] = true
	}
	for d := range dirs {
		if err := os.MkdirAll(filepath.Join(root, filepath.FromSlash(d)), 0o755); err != nil {
			return nil, err
		}
	}
	for p, body := range gitignores {
		if err := t.write(p, []byte(body)); err != nil {
			return nil, err
		}
	}

	// Below 1000 files (trees for tests, not for figures) the binaries
	// shrink in proportion, so a test does not spend its time in zlib.
	binLo, binHi := minBinary, maxBinary
	if n < 1000 {
		binLo, binHi = binLo*n/1000, binHi*n/1000
	}

	// The first failure cancels the rest; the cause is what we report.
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ch := make(chan job)
	var wg sync.WaitGroup
	for range 4 * runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for j := range ch {
				if wctx.Err() != nil {
					continue // drain
				}
				r := t.rng(j.kind, j.n)
				var body []byte
				if j.kind == streamBinary {
					body = make([]byte, binLo+r.IntN(binHi-binLo+1))
					fillRandom(r, body)
				} else {
					body = sourceText(r, minText+r.IntN(maxText-minText+1))
				}
				if err := t.write(j.path, body); err != nil {
					cancel(err)
				}
			}
		})
	}
	for _, j := range jobs {
		ch <- j
	}
	close(ch)
	wg.Wait()
	if wctx.Err() != nil {
		return nil, context.Cause(wctx)
	}
	return t, nil
}

func (t *tree) addText(p string) {
	t.pos[p] = len(t.text)
	t.text = append(t.text, p)
}

func (t *tree) removeText(p string) {
	i := t.pos[p]
	last := t.text[len(t.text)-1]
	t.text[i] = last
	t.pos[last] = i
	t.text = t.text[:len(t.text)-1]
	delete(t.pos, p)
}

func (t *tree) write(p string, body []byte) error {
	if err := os.WriteFile(filepath.Join(t.root, filepath.FromSlash(p)), body, 0o644); err != nil {
		return err
	}
	t.bytesMu.Lock()
	t.bytes += int64(len(body))
	t.bytesMu.Unlock()
	return nil
}

// sourceText is line-structured text from a small vocabulary: it compresses
// about as well as real source, which matters because a first seal is bound
// by zlib.
func sourceText(r *rand.Rand, size int) []byte {
	b := make([]byte, 0, size+96)
	for len(b) < size {
		for range r.IntN(4) {
			b = append(b, '\t')
		}
		for w := range 2 + r.IntN(10) {
			if w > 0 {
				b = append(b, ' ')
			}
			b = append(b, vocab[r.IntN(len(vocab))]...)
		}
		b = append(b, '\n')
	}
	return b
}

// fillRandom fills b with incompressible bytes, like a binary asset.
func fillRandom(r *rand.Rand, b []byte) {
	for i := 0; i < len(b); i += 8 {
		v := r.Uint64()
		for k := 0; k < 8 && i+k < len(b); k++ {
			b[i+k] = byte(v >> (8 * k))
		}
	}
}

// mutate edits 20 source files, adds 5 and deletes 5, and returns the 30
// paths touched, sorted. Each run has its own random stream, so the files
// differ from run to run and the sequence is the same on every machine.
func (t *tree) mutate(run int) ([]string, error) {
	r := t.rng(streamMutate, uint64(run))
	if len(t.text) < editsPerRun+deletesPerRun {
		return nil, fmt.Errorf("sealbench: tree too small to mutate")
	}
	picked := map[string]bool{}
	pick := func() string {
		for {
			p := t.text[r.IntN(len(t.text))]
			if !picked[p] {
				picked[p] = true
				return p
			}
		}
	}
	var changed []string
	for range editsPerRun {
		p := pick()
		// Appending always changes the size, so git's stat check sees the
		// edit even when the mtime lands in the same second.
		f, err := os.OpenFile(filepath.Join(t.root, filepath.FromSlash(p)), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return nil, err
		}
		_, err = fmt.Fprintf(f, "// edited in run %d: %s\n", run, vocab[r.IntN(len(vocab))])
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, err
		}
		changed = append(changed, p)
	}
	for range deletesPerRun {
		p := pick()
		if err := os.Remove(filepath.Join(t.root, filepath.FromSlash(p))); err != nil {
			return nil, err
		}
		t.removeText(p)
		changed = append(changed, p)
	}
	for i := range addsPerRun {
		p := path.Join(t.dirs[r.IntN(len(t.dirs))], fmt.Sprintf("added%d.%s", t.nextText, exts[i%len(exts)]))
		t.nextText++
		if err := t.write(p, sourceText(r, minText+r.IntN(maxText-minText+1))); err != nil {
			return nil, err
		}
		t.addText(p)
		changed = append(changed, p)
	}
	slices.Sort(changed)
	return changed, nil
}
