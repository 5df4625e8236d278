package gitobj

import (
	"bytes"
	"cmp"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Modes git records in trees.
const (
	ModeTree    = 0o040000
	ModeFile    = 0o100644
	ModeExec    = 0o100755
	ModeSymlink = 0o120000
	ModeGitlink = 0o160000
)

// TreeEntry is one name in a tree.
type TreeEntry struct {
	Mode uint32
	Name string
	ID   string // hex
}

// IsTree reports whether the entry names a subtree.
func (e TreeEntry) IsTree() bool { return e.Mode == ModeTree }

// ParseTree decodes a tree object's content.
func ParseTree(data []byte, f Format) ([]TreeEntry, error) {
	var out []TreeEntry
	for len(data) > 0 {
		sp := bytes.IndexByte(data, ' ')
		if sp < 0 {
			return nil, fmt.Errorf("tree: bad entry mode")
		}
		mode, err := strconv.ParseUint(string(data[:sp]), 8, 32)
		if err != nil {
			return nil, fmt.Errorf("tree: bad entry mode %q", data[:sp])
		}
		data = data[sp+1:]
		nul := bytes.IndexByte(data, 0)
		if nul < 0 || len(data) < nul+1+f.Size {
			return nil, fmt.Errorf("tree: truncated entry")
		}
		e := TreeEntry{Mode: uint32(mode), Name: string(data[:nul]), ID: hex.EncodeToString(data[nul+1 : nul+1+f.Size])}
		if len(out) > 0 && CompareEntries(out[len(out)-1], e) >= 0 {
			return nil, fmt.Errorf("tree: entries not in git's order at %q", e.Name)
		}
		out = append(out, e)
		data = data[nul+1+f.Size:]
	}
	return out, nil
}

// sortTree puts entries in git's order (CompareEntries).
func sortTree(entries []TreeEntry) {
	slices.SortFunc(entries, CompareEntries)
}

// MergeEntries walks the entries of two trees (each in git's order, as
// ParseTree checks) as one list: fn gets each entry only ta holds (b nil),
// only tb holds (a nil), or both hold by name (a file and a folder of the
// same name sort apart: a removal and an addition). Each is a copy. The
// first error ends the walk.
func MergeEntries(ta, tb []TreeEntry, fn func(a, b *TreeEntry) error) error {
	for i, j := 0, 0; i < len(ta) || j < len(tb); {
		c := 0
		switch {
		case i == len(ta):
			c = 1
		case j == len(tb):
			c = -1
		default:
			c = CompareEntries(ta[i], tb[j])
		}
		var err error
		switch {
		case c < 0:
			x := ta[i]
			err = fn(&x, nil)
			i++
		case c > 0:
			y := tb[j]
			err = fn(nil, &y)
			j++
		default:
			x, y := ta[i], tb[j]
			err = fn(&x, &y)
			i, j = i+1, j+1
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// CompareEntries is git's order of tree entries: by name, a tree's name
// compared as if it ended in '/'. Parsed and encoded trees are in it.
func CompareEntries(a, b TreeEntry) int {
	n := min(len(a.Name), len(b.Name))
	if c := strings.Compare(a.Name[:n], b.Name[:n]); c != 0 {
		return c
	}
	return cmp.Compare(nextByte(a, n), nextByte(b, n))
}

// nextByte is the byte of e's sort key at i, past its name: '/' for a
// tree, nothing (-1) otherwise.
func nextByte(e TreeEntry, i int) int {
	switch {
	case i < len(e.Name):
		return int(e.Name[i])
	case i == len(e.Name) && e.IsTree():
		return '/'
	}
	return -1
}

// EncodeTree encodes entries (sorted here) as a tree object's content.
func EncodeTree(entries []TreeEntry, f Format) ([]byte, error) {
	sortTree(entries)
	var b bytes.Buffer
	b.Grow(len(entries) * (f.Size + 24))
	for i, e := range entries {
		if e.Name == "" || strings.ContainsAny(e.Name, "/\x00") || e.Name == "." || e.Name == ".." {
			return nil, fmt.Errorf("tree: invalid entry name %q", e.Name)
		}
		if i > 0 && entries[i-1].Name == e.Name {
			return nil, fmt.Errorf("tree: duplicate entry %q", e.Name)
		}
		raw, err := hex.DecodeString(e.ID)
		if err != nil || len(raw) != f.Size {
			return nil, fmt.Errorf("tree: entry %q: bad id %q", e.Name, e.ID)
		}
		b.WriteString(strconv.FormatUint(uint64(e.Mode), 8))
		b.WriteByte(' ')
		b.WriteString(e.Name)
		b.WriteByte(0)
		b.Write(raw)
	}
	return b.Bytes(), nil
}
