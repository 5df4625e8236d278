package hankweave

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/cairn-dev/cairn/platform"
)

// ArchiveManifestFile is .hankweave/archive-manifest.json: what the runtime
// moved from agentRoot/ into rigArchive/.
const ArchiveManifestFile = "archive-manifest.json"

// ArchiveEntry is the part of a manifest entry a rollback needs.
type ArchiveEntry struct {
	SourcePath    string `json:"sourcePath"`  // relative to the work tree
	ArchivePath   string `json:"archivePath"` // relative to the execution directory, under rigArchive/
	CodonID       string `json:"codonId"`
	CheckpointSHA string `json:"checkpointSha"` // or "orphan"
}

// ArchiveResult says what RestoreArchive did.
type ArchiveResult struct {
	Restored  []string `json:"restoredPaths"`
	Protected []string `json:"protectedPaths,omitempty"` // destination exists: the archive stays
	Failed    []string `json:"failedPaths,omitempty"`
}

// RestoreArchive moves back into the work tree every archived file whose
// checkpoint lies on the abandoned line (abandoned(sha) true) or is
// "orphan", as the runtime's rollback does: a destination that exists is
// protected (the archive stays); restored entries leave the manifest, and
// every other entry is kept byte for byte. No manifest: nothing to do.
func RestoreArchive(execDir, workTree string, abandoned func(sha string) bool) (ArchiveResult, error) {
	var res ArchiveResult
	// Every path below is resolved beneath the execution directory (or the
	// work tree) with no symbolic link followed at any component: the
	// manifest is never read or replaced through a linked .hankweave, a
	// link, a FIFO or a device, and no file moves through a folder swapped
	// for a link (platform.Tree; README.md, "Security").
	exec, err := platform.OpenTree(execDir)
	if err != nil {
		return res, fmt.Errorf("restore archive: %w", err)
	}
	defer exec.Close()
	manifest := filepath.Join(HankweaveDir, ArchiveManifestFile)
	path := filepath.Join(execDir, manifest)
	data, err := exec.ReadFile(manifest, platform.MaxRuntimeFile)
	if errors.Is(err, fs.ErrNotExist) {
		return res, nil
	}
	if err != nil {
		return res, fmt.Errorf("restore archive: %w", err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil {
		return res, fmt.Errorf("%s: %w", path, err)
	}
	var entries []json.RawMessage
	if raw, ok := doc["entries"]; ok {
		if err := json.Unmarshal(raw, &entries); err != nil {
			return res, fmt.Errorf("%s: entries: %w", path, err)
		}
	}
	var keep []json.RawMessage
	uid, gid := ownerIDs(execDir)
	var trees archiveTrees
	defer trees.close()
	for _, raw := range entries {
		var e ArchiveEntry
		if json.Unmarshal(raw, &e) != nil || !(e.CheckpointSHA == "orphan" || abandoned(e.CheckpointSHA)) {
			keep = append(keep, raw)
			continue
		}
		src, dst, ok := archivePaths(e)
		var arch, wt *platform.Tree
		if ok {
			arch, wt, err = trees.open(exec, workTree)
		}
		if !ok || err != nil {
			res.Failed = append(res.Failed, e.SourcePath)
			keep = append(keep, raw)
			continue
		}
		if _, err := wt.Lstat(dst); err == nil {
			res.Protected = append(res.Protected, e.SourcePath)
			keep = append(keep, raw)
			continue
		}
		// A root daemon moves files for the owner: folders it creates are
		// the owner's, the moved file keeps its owner, and a destination
		// that appears meanwhile is not replaced.
		err := wt.MkdirAll(filepath.Dir(dst), 0o755, uid, gid)
		if err == nil {
			err = arch.Move(src, wt, dst)
		}
		if errors.Is(err, fs.ErrExist) {
			res.Protected = append(res.Protected, e.SourcePath)
			keep = append(keep, raw)
			continue
		}
		if err != nil {
			res.Failed = append(res.Failed, e.SourcePath)
			keep = append(keep, raw)
			continue
		}
		res.Restored = append(res.Restored, e.SourcePath)
	}
	if len(res.Restored) == 0 {
		return res, nil
	}
	if keep == nil {
		keep = []json.RawMessage{}
	}
	kept, err := json.Marshal(keep)
	if err != nil {
		return res, err
	}
	doc["entries"] = kept
	out, err := json.Marshal(doc)
	if err != nil {
		return res, err
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, out, "", "  "); err != nil {
		return res, err
	}
	// Created afresh (O_EXCL) beside it and renamed over it: a link planted
	// at the manifest is replaced, never written through.
	return res, exec.WriteFileAtomic(manifest, pretty.Bytes(), 0o644, uid, gid)
}

// archiveTrees are rigArchive/ and the work tree, opened beneath the
// execution directory at the first move.
type archiveTrees struct {
	arch, wt *platform.Tree
	err      error
}

func (a *archiveTrees) open(exec *platform.Tree, workTree string) (*platform.Tree, *platform.Tree, error) {
	if a.arch == nil && a.err == nil {
		a.arch, a.err = exec.Sub("rigArchive")
		if a.err == nil {
			if rel, err := exec.Rel(workTree); err == nil {
				a.wt, a.err = exec.Sub(rel)
			} else {
				a.wt, a.err = platform.OpenTree(workTree)
			}
		}
	}
	return a.arch, a.wt, a.err
}

func (a *archiveTrees) close() {
	a.arch.Close()
	a.wt.Close()
}

// archivePaths checks an entry's paths stay where they belong and makes
// them relative: the archive's to <exec>/rigArchive, the destination's to
// the work tree.
func archivePaths(e ArchiveEntry) (src, dst string, ok bool) {
	clean := func(rel string) (string, bool) {
		if rel == "" || filepath.IsAbs(rel) {
			return "", false
		}
		p := filepath.Clean(filepath.FromSlash(rel))
		return p, p != "." && p != ".." && !strings.HasPrefix(p, ".."+string(filepath.Separator))
	}
	src, ok1 := clean(strings.TrimPrefix(filepath.ToSlash(e.ArchivePath), "rigArchive/"))
	dst, ok2 := clean(e.SourcePath)
	return src, dst, ok1 && ok2
}
