package hankweave

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
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
	path := filepath.Join(execDir, HankweaveDir, ArchiveManifestFile)
	// The manifest says what to move and is rewritten below: never read or
	// replaced through a linked .hankweave, a link, a FIFO or a device.
	if err := platform.NoSymlinkBelow(execDir, path, false); err != nil {
		return res, fmt.Errorf("restore archive: %w", err)
	}
	data, err := platform.ReadFileCapped(path, platform.MaxRuntimeFile)
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
	for _, raw := range entries {
		var e ArchiveEntry
		if json.Unmarshal(raw, &e) != nil || !(e.CheckpointSHA == "orphan" || abandoned(e.CheckpointSHA)) {
			keep = append(keep, raw)
			continue
		}
		src, dst, ok := archivePaths(execDir, workTree, e)
		if !ok {
			res.Failed = append(res.Failed, e.SourcePath)
			keep = append(keep, raw)
			continue
		}
		if _, err := os.Lstat(dst); err == nil {
			res.Protected = append(res.Protected, e.SourcePath)
			keep = append(keep, raw)
			continue
		}
		// A root daemon moves files for the owner: never through a folder
		// replaced by a link, and folders it creates are the owner's. The
		// moved file keeps its owner.
		err := noLinkBelow(execDir, src)
		if err == nil {
			err = noLinkBelow(workTree, dst)
		}
		if err == nil {
			err = mkdirOwned(workTree, filepath.Dir(dst), uid, gid)
		}
		if err == nil {
			err = os.Rename(src, dst)
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
	tmp := path + ".tmp"
	_ = os.Remove(tmp) // unlink removes a link planted there, never its target
	// O_EXCL: created afresh, never through a link (NoFollow says so twice).
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|platform.NoFollow, 0o644)
	if err != nil {
		return res, err
	}
	if uid >= 0 {
		_ = f.Chown(uid, gid)
	}
	_, err = f.Write(pretty.Bytes())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return res, err
	}
	return res, os.Rename(tmp, path)
}

// noLinkBelow refuses p when a folder between base and p is a symbolic link.
func noLinkBelow(base, p string) error {
	rel, err := filepath.Rel(base, filepath.Dir(p))
	if err != nil || rel == "." {
		return err
	}
	cur := base
	for _, part := range strings.Split(filepath.ToSlash(rel), "/") {
		cur = filepath.Join(cur, part)
		fi, err := os.Lstat(cur)
		if err != nil {
			return nil // missing: created below, by us
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("%s is a symbolic link", cur)
		}
	}
	return nil
}

// mkdirOwned creates dir's missing folders below base, each given to uid:gid
// (uid < 0: the writer's).
func mkdirOwned(base, dir string, uid, gid int) error {
	if _, err := os.Lstat(dir); err == nil || dir == base || dir == filepath.Dir(dir) {
		return nil
	}
	if err := mkdirOwned(base, filepath.Dir(dir), uid, gid); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	if uid >= 0 {
		return os.Lchown(dir, uid, gid)
	}
	return nil
}

// archivePaths checks an entry's paths stay where they belong: the archive
// under <exec>/rigArchive, the destination inside the work tree.
func archivePaths(execDir, workTree string, e ArchiveEntry) (src, dst string, ok bool) {
	clean := func(base, rel string) (string, bool) {
		if rel == "" || filepath.IsAbs(rel) {
			return "", false
		}
		p := filepath.Join(base, filepath.FromSlash(rel))
		r, err := filepath.Rel(base, p)
		return p, err == nil && r != "." && !strings.HasPrefix(r, "..")
	}
	src, ok1 := clean(filepath.Join(execDir, "rigArchive"), strings.TrimPrefix(filepath.ToSlash(e.ArchivePath), "rigArchive/"))
	dst, ok2 := clean(workTree, e.SourcePath)
	return src, dst, ok1 && ok2
}
