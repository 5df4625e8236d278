package daemonbench

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// A generated tree: filesPerDir files a folder, dirsPerTop folders under
// each top folder (100,000 files make 5,000 folders under 50 top ones).
const (
	filesPerDir = 20
	dirsPerTop  = 100
	minText     = 256
	maxText     = 2048
)

// tree is a generated work tree and its file list.
type tree struct {
	root    string
	files   []string // slash paths relative to root
	folders int      // root included
	rng     *rand.Rand
}

var vocab = strings.Fields("func return if else for range var const type struct err nil ctx string int " +
	"bool map len append make import package defer select case value key name path file data result " +
	"count index item node tree config state event handler { } ( ) = := == != // 0 1 42")

// makeTree writes n small text files under root; the same seed gives the
// same tree, byte for byte.
func makeTree(ctx context.Context, root string, n int, seed uint64) (*tree, error) {
	leaves := (n + filesPerDir - 1) / filesPerDir
	tops := (leaves + dirsPerTop - 1) / dirsPerTop
	leaf := func(j int) string { return fmt.Sprintf("t%02d/d%04d", j%tops, j) }
	for j := range leaves {
		if err := os.MkdirAll(filepath.Join(root, filepath.FromSlash(leaf(j))), 0o755); err != nil {
			return nil, err
		}
	}
	t := &tree{root: root, folders: 1 + tops + leaves, rng: rand.New(rand.NewPCG(seed, 0))}
	for i := range n {
		t.files = append(t.files, fmt.Sprintf("%s/f%06d.txt", leaf(i%leaves), i))
	}

	jobs := make(chan int)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	for range 4 * runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for i := range jobs {
				r := rand.New(rand.NewPCG(seed, uint64(i)+1))
				if err := os.WriteFile(t.abs(t.files[i]), text(r, minText+r.IntN(maxText-minText)), 0o644); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		})
	}
	var err error
feed:
	for i := range n {
		select {
		case jobs <- i:
		case err = <-errs:
			break feed
		case <-ctx.Done():
			err = ctx.Err()
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	return t, err
}

func (t *tree) abs(rel string) string { return filepath.Join(t.root, filepath.FromSlash(rel)) }

// text is line-structured text of about size bytes.
func text(r *rand.Rand, size int) []byte {
	b := make([]byte, 0, size+64)
	for len(b) < size {
		for w := range 2 + r.IntN(8) {
			if w > 0 {
				b = append(b, ' ')
			}
			b = append(b, vocab[r.IntN(len(vocab))]...)
		}
		b = append(b, '\n')
	}
	return b
}

// pick chooses k distinct files.
func (t *tree) pick(k int) []string {
	seen := map[int]bool{}
	out := make([]string, 0, k)
	for len(out) < k {
		i := t.rng.IntN(len(t.files))
		if !seen[i] {
			seen[i] = true
			out = append(out, t.files[i])
		}
	}
	return out
}

// appendLine appends line to each of paths under root, as an editor saving
// an edit does (the size changes, so no stat check can miss it).
func appendLine(root string, paths []string, line string) error {
	for _, p := range paths {
		f, err := os.OpenFile(filepath.Join(root, filepath.FromSlash(p)), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return err
		}
		_, err = f.WriteString(line)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// ---- comparing a checkpoint with the disk ----

// blobSHA is git's object name for a file's content.
func blobSHA(b []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(b))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

// diskBlobs hashes every regular file under root, as git would.
func diskBlobs(root string) (map[string]string, error) {
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		out[filepath.ToSlash(rel)] = blobSHA(b)
		return nil
	})
	return out, err
}

// treeBlobs lists a commit's files and their blobs (git ls-tree -r).
func treeBlobs(ctx context.Context, gitDir, commit string) (map[string]string, error) {
	cmd := exec.CommandContext(ctx, "git", "--git-dir", gitDir, "ls-tree", "-r", "-z", "--full-tree", commit)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-tree %s: %w: %s", commit, err, bytes.TrimSpace(stderr.Bytes()))
	}
	out := map[string]string{}
	for _, e := range bytes.Split(b, []byte{0}) {
		// <mode> SP <type> SP <object> TAB <path>
		meta, path, ok := bytes.Cut(e, []byte{'\t'})
		if !ok {
			continue
		}
		f := strings.Fields(string(meta))
		if len(f) == 3 && f[1] == "blob" {
			out[string(path)] = f[2]
		}
	}
	return out, nil
}

// TreeCheck compares a checkpoint's tree with the files on disk.
type TreeCheck struct {
	Commit    string   `json:"commit"`
	TreeFiles int      `json:"treeFiles"`
	DiskFiles int      `json:"diskFiles"`
	Differ    int      `json:"differ"` // missing on either side, or different content
	Examples  []string `json:"examples,omitempty"`
	Equal     bool     `json:"equal"`
}

func compareTree(ctx context.Context, gitDir, commit, root string) (TreeCheck, error) {
	c := TreeCheck{Commit: commit}
	inTree, err := treeBlobs(ctx, gitDir, commit)
	if err != nil {
		return c, err
	}
	onDisk, err := diskBlobs(root)
	if err != nil {
		return c, err
	}
	c.TreeFiles, c.DiskFiles = len(inTree), len(onDisk)
	note := func(p, why string) {
		c.Differ++
		if len(c.Examples) < 5 {
			c.Examples = append(c.Examples, p+": "+why)
		}
	}
	for p, sha := range onDisk {
		switch got, ok := inTree[p]; {
		case !ok:
			note(p, "on disk, not in the checkpoint")
		case got != sha:
			note(p, "content differs ("+shortSHA(got)+" in the checkpoint, "+shortSHA(sha)+" on disk)")
		}
	}
	for p := range inTree {
		if _, ok := onDisk[p]; !ok {
			note(p, "in the checkpoint, not on disk")
		}
	}
	c.Equal = c.Differ == 0
	return c, nil
}

func shortSHA(s string) string {
	if len(s) > 10 {
		return s[:10]
	}
	return s
}

// readRef reads a ref's value from a git directory without running git: the
// loose ref file, else packed-refs; "" when it does not exist.
func readRef(gitDir, ref string) (string, error) {
	b, err := os.ReadFile(filepath.Join(gitDir, filepath.FromSlash(ref)))
	if err == nil {
		return string(bytes.TrimSpace(b)), nil
	}
	if !os.IsNotExist(err) {
		return "", err
	}
	b, err = os.ReadFile(filepath.Join(gitDir, "packed-refs"))
	if os.IsNotExist(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if sha, name, ok := strings.Cut(line, " "); ok && name == ref {
			return sha, nil
		}
	}
	return "", nil
}
