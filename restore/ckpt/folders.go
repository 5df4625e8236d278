package ckpt

import (
	"fmt"
	"sort"
	"strings"
)

// FolderCount is how many of a list's files lie in one folder (at any
// depth below it), by how they changed. A file directly in the folder the
// list is grouped under is an entry of its own (Path is the file, Files 1,
// Folder false).
type FolderCount struct {
	Path    string `json:"path"` // slash-separated, relative to the work tree
	Folder  bool   `json:"folder,omitempty"`
	Files   int    `json:"files"`
	Added   int    `json:"added,omitempty"`
	Changed int    `json:"changed,omitempty"`
	Removed int    `json:"removed,omitempty"`
	Bytes   int64  `json:"bytes,omitempty"` // a restore plan's files' sizes
}

// GroupFiles groups changes by the child of folder under ("" the top)
// each lies in, most files first (then by path); changes outside under are
// left out.
func GroupFiles(files []FileChange, under string) []FolderCount {
	return group(len(files), under, func(i int) (string, string, int64) { return files[i].Path, files[i].Status, 0 })
}

// GroupPlan groups a plan's files the same way (a file written new counts
// as added, one overwritten as changed, a deletion as removed), with their
// sizes.
func GroupPlan(write, del []PlanFile, under string) []FolderCount {
	return group(len(write)+len(del), under, func(i int) (string, string, int64) {
		if i < len(write) {
			f := write[i]
			if f.Action == ActionAdd {
				return f.Path, FileAdded, f.Size
			}
			return f.Path, FileChanged, f.Size
		}
		f := del[i-len(write)]
		return f.Path, FileRemoved, f.Size
	})
}

func group(n int, under string, at func(i int) (path, status string, size int64)) []FolderCount {
	prefix := strings.Trim(under, "/")
	if prefix != "" {
		prefix += "/"
	}
	by := map[string]*FolderCount{}
	for i := range n {
		p, status, size := at(i)
		rest, ok := strings.CutPrefix(p, prefix)
		if !ok || rest == "" {
			continue
		}
		key, folder := rest, false
		if j := strings.IndexByte(rest, '/'); j >= 0 {
			key, folder = rest[:j], true
		}
		c := by[prefix+key]
		if c == nil {
			c = &FolderCount{Path: prefix + key, Folder: folder}
			by[prefix+key] = c
		}
		c.Files++
		c.Bytes += size
		switch status {
		case FileAdded:
			c.Added++
		case FileRemoved:
			c.Removed++
		default:
			c.Changed++
		}
	}
	out := make([]FolderCount, 0, len(by))
	for _, c := range by {
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Files != out[j].Files {
			return out[i].Files > out[j].Files
		}
		return out[i].Path < out[j].Path
	})
	return out
}

// Under is the changes below folder (slash-separated; "" is every one).
func Under(files []FileChange, folder string) []FileChange {
	prefix := strings.Trim(folder, "/")
	if prefix == "" {
		return files
	}
	prefix += "/"
	var out []FileChange
	for _, f := range files {
		if strings.HasPrefix(f.Path, prefix) {
			out = append(out, f)
		}
	}
	return out
}

// CountLine says how many files changed and how: "60 files changed: 40
// added, 15 changed, 5 removed".
func CountLine(files []FileChange) string {
	var a, c, r int
	for _, f := range files {
		switch f.Status {
		case FileAdded:
			a++
		case FileRemoved:
			r++
		default:
			c++
		}
	}
	word := "files"
	if len(files) == 1 {
		word = "file"
	}
	return fmt.Sprintf("%d %s changed: %d added, %d changed, %d removed\n", len(files), word, a, c, r)
}

// Page is files[offset:offset+limit], clamped; limit 0 is the rest.
func Page[T any](files []T, offset, limit int) []T {
	offset = min(max(offset, 0), len(files))
	end := len(files)
	if limit > 0 {
		end = min(offset+limit, end)
	}
	return files[offset:end]
}
