package snapshot

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"
	"sync"

	"github.com/cairn-dev/cairn/platform"
	"github.com/cairn-dev/cairn/snapshot/gitobj"
)

// sharedIndex is what the store and the git engine ask of the in-process
// engine about cairn's index, which both engines use (docs/engine.md, "The
// seam"): the in-process engine keeps the entries it sealed outside the
// index (pending, in its stat cache) until git reads it, seals on a base
// recorded against it, and knows which objects are stored. Only that
// engine's state (inprocState) implements it; nothing else reads its fields.
type sharedIndex interface {
	// indexDoubt says why cairn's index cannot stand for the newest
	// checkpoint sealed ("" when it can): asked before an incremental seal
	// or staging builds on it.
	indexDoubt() string
	// syncIndex writes the in-process engine's pending entries into cairn's
	// index: before every git command that reads it.
	syncIndex(ctx context.Context) error
	// gitSealed tells the in-process engine that git wrote tree from cairn's
	// index and sealed it as commit: the base it seals on next.
	gitSealed(ctx context.Context, tree, commit string)
	// vouchTree checks that every object of tree, which git wrote from
	// cairn's index, is stored (only what differs from ptree, the parent's
	// tree, when that was found whole). An *errMissingObject when one is not.
	vouchTree(ctx context.Context, tree, ptree string) error
}

var _ sharedIndex = (*inprocState)(nil)

// inprocState is the in-process engine's state for one store, across its
// restarts: the engine running now (nil until a seal or a question needs
// it, and once the store dropped it) and the stat cache it keeps on disk.
// The store holds one from Open; it starts, drops and closes the engine
// through it, and asks it about cairn's index (sharedIndex).
type inprocState struct {
	s   *Store
	eng *inproc
}

// drop stops the engine and forgets its state: the next seal starts it
// afresh from what is on disk.
func (h *inprocState) drop() {
	if h.eng != nil {
		h.eng.close()
		h.eng = nil
	}
}

// close stops the engine's long-running helpers; its state stays.
func (h *inprocState) close() {
	if h.eng != nil {
		h.eng.close()
	}
}

// release lets go of the delta bases and the open packs the engine's reads
// of packed objects kept during one store operation (gitobj.Known.Release).
func (h *inprocState) release() {
	if h != nil && h.eng != nil && h.eng.known != nil {
		h.eng.known.Release()
	}
}

// releasePacks, under the store lock after a repack, has the engine let go
// of the packs it read (inproc.releasePacks).
func (h *inprocState) releasePacks() {
	if h.eng != nil {
		h.eng.releasePacks()
	}
}

// engine returns the in-process engine, (re)reading git's config when its
// files changed. errFallback when the store's config is one it does not
// write exactly (another object format or ref backend, core.fileMode off…).
func (h *inprocState) engine(ctx context.Context) (*inproc, error) {
	var stamps [4]fileStamp
	for i, p := range h.s.cfgFiles() {
		stamps[i], _ = stampFile(p)
	}
	if h.eng != nil && h.eng.cfg == stamps {
		if !h.eng.cfgOK {
			return nil, errFallback
		}
		return h.eng, nil
	}
	h.drop() // check-ignore read the old ignore files
	// Remembered from here on with its verdict (cfgOK), unless git could
	// not answer at all (nil): that is asked again at the next seal.
	e, err := h.start(ctx, stamps)
	h.eng = e
	if err != nil {
		return nil, err
	}
	return e, nil
}

// start makes an engine for the store's config as stamped: ready, or
// (with errFallback) one that remembers the store is not for it, or nil
// when git could not answer.
func (h *inprocState) start(ctx context.Context, stamps [4]fileStamp) (*inproc, error) {
	s := h.s
	e := &inproc{s: s, home: h, cfg: stamps, commits: map[string]string{}}
	out, err := s.git.Run(ctx, nil, "config", "-l", "-z")
	if err != nil {
		return nil, err
	}
	cfg := map[string]string{}
	for _, kv := range splitNul(out) {
		k, v, _ := strings.Cut(kv, "\n")
		cfg[strings.ToLower(k)] = v
	}
	isTrue := func(k string, def bool) bool {
		v, ok := cfg[k]
		if !ok {
			return def
		}
		switch strings.ToLower(v) {
		case "true", "yes", "on", "1", "":
			return true
		}
		return false
	}
	f, ok := gitobj.FormatByName(cfg["extensions.objectformat"])
	switch {
	case !ok,
		cfg["extensions.refstorage"] != "" && cfg["extensions.refstorage"] != "files",
		!isTrue("core.filemode", true), isTrue("core.ignorecase", false), isTrue("core.precomposeunicode", false),
		isTrue("core.bare", false), cfg["core.sharedrepository"] != "", cfg["core.compression"] != "",
		cfg["core.loosecompression"] != "" && cfg["core.loosecompression"] != "1":
		return e, errFallback
	}
	e.format, e.db = f, gitobj.NewDB(s.gitDir, f)
	if s.layout == LayoutHankweave {
		// The runtime stores its own checkpoints' objects here, loose and
		// unflushed: a flush after it did is a syncfs (a checkpoint on top
		// of one names them).
		e.db.WatchForeign()
	}
	e.known, e.whole = e.db.Known(), map[string]bool{}
	e.mgrain, e.cgrain = newGrain(), newGrain()
	if fi, err := os.Lstat(s.workTree); err == nil {
		e.mgrain.see(fi.ModTime().UnixNano())
		e.cgrain.see(platform.ChangeTime(fi))
	}
	e.logAll = strings.ToLower(cfg["core.logallrefupdates"])
	e.excludes = cfg["core.excludesfile"]
	e.empty = f.Hash("tree", nil)
	// The two identities and the stat cache at once: each waits on its own
	// (two gits started, a file read and decoded).
	var (
		aOut  []byte
		aErr  error
		cache *statCache
		wg    sync.WaitGroup
	)
	wg.Add(2)
	go func() {
		defer wg.Done()
		aOut, aErr = s.git.Run(ctx, nil, "var", "GIT_AUTHOR_IDENT")
	}()
	go func() {
		defer wg.Done()
		cache = s.loadStatCache(f.Name)
	}()
	varOut, err := s.git.Run(ctx, nil, "var", "GIT_COMMITTER_IDENT")
	wg.Wait()
	if err != nil && ctx.Err() != nil {
		return nil, err
	} else if err != nil {
		return e, errFallback // git could not commit either; let it say so
	}
	ident := strings.TrimSpace(string(varOut))
	if i := strings.LastIndexByte(ident, '>'); i > 0 {
		ident = ident[:i+1]
	}
	if aErr != nil && ctx.Err() != nil {
		return nil, aErr
	}
	if aErr != nil || !strings.HasPrefix(strings.TrimSpace(string(aOut)), ident+" ") {
		return e, errFallback // author and committer differ: not written by this engine
	}
	e.ident = ident
	e.cache = cache
	e.cfgOK = true
	return e, nil
}

// ready returns the engine when it can seal under sel: its base is
// recorded against the index as it is on disk, and the index was staged
// under the same selection and size limit.
func (h *inprocState) ready(ctx context.Context, sel *Selector) (*inproc, bool) {
	s := h.s
	if s.engineName() != EngineInproc {
		return nil, false
	}
	e, err := h.engine(ctx)
	if err != nil {
		return nil, false
	}
	if !s.statCacheFresh(e.cache) {
		e.cache = s.loadStatCache(e.format.Name)
	}
	if e.cache.hdr.Base == "" || !s.indexTiedBy(e.cache) {
		return nil, false
	}
	var prev indexMeta
	b, err := readNoFollow(s.git.Index+".json", maxSmallFile)
	if err != nil || json.Unmarshal(b, &prev) != nil || prev != (indexMeta{Selection: sel.Key(), MaxSize: s.opts.MaxFileSize}) {
		return nil, false
	}
	return e, true
}

// indexTiedBy reports whether the stat cache c ties cairn's index to the
// newest checkpoint: it names the index as it is on disk and that
// checkpoint. The cache must stand for the newest checkpoint sealed: an
// older one (a record lost at its end, a copy put back) names an older
// base; a lost or damaged one names neither.
func (s *Store) indexTiedBy(c *statCache) bool {
	if st, ok := stampFile(s.git.Index); !ok || st != c.hdr.Index {
		return false
	}
	last, ok := s.lastSealed()
	return ok && last.SHA == c.hdr.Commit
}

// gitSealed notes, after git wrote tree from cairn's index and sealed
// commit from it, that the index stands for tree: the engine can seal on
// top of it.
func (h *inprocState) gitSealed(ctx context.Context, tree, commit string) {
	s := h.s
	if s.engineName() != EngineInproc {
		return
	}
	e, err := h.engine(ctx)
	if err != nil {
		return
	}
	// git sealed the whole tree, maybe for ignore files the watch did not
	// report: the checker starts again on the rules as they are now.
	e.stopIgnore()
	if !s.statCacheFresh(e.cache) {
		e.cache = s.loadStatCache(e.format.Name)
	}
	st, ok := stampFile(s.git.Index)
	if !ok || len(e.cache.pending) > 0 { // a sync should have emptied it
		return
	}
	e.cache.hdr.Base, e.cache.hdr.Index, e.cache.hdr.Commit = tree, st, commit
	if err := s.saveStatCache(e.cache); err != nil {
		zerologCtx(ctx).Warn().Err(err).Msg("could not record the in-process engine's base")
	}
}

// indexDoubt says why cairn's index cannot stand for the newest checkpoint
// sealed ("" when it can): the in-process engine sealed it, and the stat
// cache holding the entries it did not write into the index is missing,
// cannot be read whole, or describes an older checkpoint. An incremental
// seal would then build on an older state; a full reconcile re-reads every
// file whose stat the index does not vouch for, and is exact.
func (h *inprocState) indexDoubt() string {
	s := h.s
	last, ok := s.lastSealed()
	if !ok || last.Engine != EngineInproc {
		return "" // git wrote the index whole at that seal
	}
	var hdr statHeader
	if h.eng != nil && h.eng.cache != nil && h.eng.cache.loaded != loadedDamaged && s.statCacheFresh(h.eng.cache) {
		hdr = h.eng.cache.hdr
	} else {
		b, err := readNoFollow(s.statCachePath(), maxStatCache)
		if errors.Is(err, fs.ErrNotExist) {
			return "the in-process engine's stat cache is missing"
		}
		c, derr := decodeStatCache(b)
		if err != nil || derr != nil {
			return "the in-process engine's stat cache cannot be read whole"
		}
		hdr = c.hdr
	}
	switch {
	case hdr.Commit != last.SHA:
		return "the in-process engine's stat cache describes another checkpoint than " + last.ID
	}
	return ""
}

// syncIndex writes the in-process engine's pending entries into cairn's
// index, so git reads what the engine sealed: before every git command that
// reads the index. The entries carry no stat data: git re-reads those files
// the next time it compares them with the disk.
func (h *inprocState) syncIndex(ctx context.Context) error {
	s := h.s
	var c *statCache
	switch {
	case h.eng != nil && h.eng.cache != nil && s.statCacheFresh(h.eng.cache):
		c = h.eng.cache
	default:
		if _, err := os.Lstat(s.statCachePath()); err != nil {
			return nil
		}
		var format string
		if h.eng != nil && h.eng.cfgOK {
			format = h.eng.format.Name
		} else {
			b, err := readNoFollow(s.statCachePath(), maxStatCache)
			if err != nil {
				return nil
			}
			dc, err := decodeStatCache(b)
			if err != nil {
				os.Remove(s.statCachePath()) // damaged: the base goes with it
				return nil
			}
			format = dc.hdr.Format
		}
		c = s.loadStatCache(format)
		if h.eng != nil && h.eng.cfgOK {
			h.eng.cache = c
		}
	}
	if len(c.pending) == 0 {
		return nil
	}
	st, ok := stampFile(s.git.Index)
	if !ok || st != c.hdr.Index {
		// The index is not the one the entries apply to (gone, or rewritten
		// without them): rebuild it from the disk.
		zerologCtx(ctx).Warn().Str("store", s.gitDir).Msg("cairn's index does not match the in-process engine's record; it is rebuilt from the work tree")
		os.Remove(s.git.Index)
	} else {
		var ids bytes.Buffer
		var in bytes.Buffer
		keys := make([]string, 0, len(c.pending))
		for k := range c.pending {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, pass := range []bool{true, false} { // removals first
			for _, k := range keys {
				pe := c.pending[k]
				if (pe.Mode == 0) != pass {
					continue
				}
				id := pe.ID
				if pe.Mode == 0 {
					id = strings.Repeat("0", len(c.hdr.Base))
				} else {
					ids.WriteString(id + "\n")
				}
				fmt.Fprintf(&in, "%o %s\t%s\x00", pe.Mode, id, k)
			}
		}
		// Objects a crash before the flush lost must not enter the index.
		out, err := s.git.Run(ctx, &ids, "cat-file", "--batch-check")
		s.dropDeadIndexLock(ctx)
		if err != nil {
			return err
		}
		if bytes.Contains(out, []byte(" missing\n")) {
			zerologCtx(ctx).Warn().Str("store", s.gitDir).Msg("objects the in-process engine wrote are missing; cairn's index is rebuilt from the work tree")
			os.Remove(s.git.Index)
		} else if _, _, err := s.git.runMapped(ctx, in.Bytes(), "update-index", "-z", "--index-info"); err != nil {
			return err
		}
	}
	c.clearPending()
	if st, ok := stampFile(s.git.Index); ok && c.hdr.Base != "" {
		c.hdr.Index = st
	} else {
		c.hdr.Base, c.hdr.Index = "", fileStamp{}
	}
	return s.saveStatCache(c)
}

// vouchTree checks, after git wrote tree from cairn's index, that every
// object it names is stored: write-tree reuses the index's cached trees
// without looking at their blobs. Against the parent's tree (ptree, when
// known and found whole before), only what differs is looked at. A missing
// one is an *errMissingObject, for the git engine to drop the index. Stores
// whose config the engine cannot read are left to git.
func (h *inprocState) vouchTree(ctx context.Context, tree, ptree string) error {
	e, err := h.engine(ctx)
	if err != nil {
		return nil
	}
	e.refreshKnown()
	err = e.vouch(ctx, h.s, tree, ptree, "")
	if errors.As(err, new(*errMissingObject)) {
		return err
	}
	if err != nil {
		return fmt.Errorf("check the objects of tree %s: %w", tree, err)
	}
	return nil
}
